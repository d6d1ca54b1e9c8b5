/**
 * Order keys that take a rank's exports over the NIC before those over NVLink, for the backward of
 * deployment mode (a) (the transparent reshuffle).
 *
 * A backward task that computes with another rank's keys leaves a dK,dV partial that its rank
 * pushes to that keys' home after the last op using them (backward.ts). orderOps (order.ts) takes
 * the available exporting task of least key, and with position keys the last of those partials go
 * wherever the last positions live: often across nodes, where a GPU's NIC carries about a ninth of
 * its NVLink bandwidth (hopper-ib), and what is still in flight after the rank's last op is its
 * exposed tail. {@link nodeLocalLast} puts every task whose partial stays inside the rank's node
 * (or on the rank itself) after every task whose partial crosses nodes, position order kept inside
 * each class, so the pushes left at the end travel over NVLink.
 *
 * Measured (simulated, hopper-ib, mode (a), 3 batch kinds x 16-256 ranks, B - A of backward MFU,
 * `npx tsx bench/quality-ab.ts` with an experiment switch): seeds 1-3 +0.0043 ± 0.0011 (30 up, 13
 * down), held-out seeds 4-7 +0.0030 ± 0.0009 (42 up, 16 down), contention seeds 8-10 +0.0026 ±
 * 0.0011, ratio-5920 +0.0006 ± 0.0006. Counting a task's dQ push to its queries' user rank too (a
 * task crosses nodes when either of its pushes does) was less good: +0.0034 / +0.0021. In mode (b)
 * it is neutral or worse (+0.0001 below the launch-shape key of launch-shapes.ts, -0.0002 above it:
 * the shape order already decides there): not used. docs/results.md, "Session 22".
 */

/**
 * Keys of `key` (non-negative, as phase.ts builds them) with `span` (above every key) added to the
 * tasks whose push stays in their rank's node: `pushTo[i]`, the rank task i's results go to
 * (itself when nothing leaves), and `rank[i]` its rank; `nodeSize` GPUs per node (ranks
 * r / nodeSize share a node). Tasks of one class keep their order by key.
 */
export function nodeLocalLast(
  key: Float64Array,
  rank: Int32Array,
  pushTo: Int32Array,
  nodeSize: number,
): Float64Array {
  const g = Math.max(1, nodeSize);
  let span = 0;
  for (let i = 0; i < key.length; i++) if (key[i]! >= span) span = key[i]! + 1;
  const out = new Float64Array(key.length);
  for (let i = 0; i < key.length; i++)
    out[i] = key[i]! + (Math.floor(pushTo[i]! / g) === Math.floor(rank[i]! / g) ? span : 0);
  return out;
}

/**
 * Order keys that take a rank's exports over the NIC before those over NVLink, for both phases of
 * deployment mode (a) (the transparent reshuffle).
 *
 * An exporting task's results leave its rank after the last op writing them: in the backward a
 * dK,dV partial of another rank's keys goes to that keys' home (backward.ts), in the forward the O
 * rows of moved queries go back to their user rank (forward.ts). orderOps (order.ts) takes the
 * available exporting task of least key, and with position keys the last pushes go wherever the
 * last positions live: often across nodes, where a GPU's NIC carries about a ninth of its NVLink
 * bandwidth (hopper-ib), and what is still in flight after the rank's last op is its exposed tail.
 * {@link nodeLocalLast} puts every task whose push stays inside the rank's node (or on the rank
 * itself) after every task whose push crosses nodes, position order kept inside each class, so the
 * pushes left at the end travel over NVLink. `magi` 32 ranks, backward (`npx tsx bench/fcp-gaps.ts
 * --worlds 32 --batch magi --seeds 1,2,3 --dir backward`): the critical rank's tail after its last
 * op 10.8 / 12.5 / 12.4 ms -> 6.4 / 0.0 / 4.5 ms, makespan 95.6 / 158.8 / 218.5 -> 91.3 / 154.6 /
 * 210.8 ms.
 *
 * Measured (simulated, hopper-ib, mode (a), 3 batch kinds x 16-256 ranks, B - A of MFU, `npx tsx
 * bench/quality-ab.ts` with an experiment switch): backward seeds 1-3 +0.0043 ± 0.0011 (30 up, 13
 * down), held-out seeds 4-7 +0.0030 ± 0.0009 (42 up, 16 down), contention seeds 8-10 +0.0026 ±
 * 0.0011, ratio-5920 +0.0006 ± 0.0006; then the forward too: seeds 1-3 +0.0015 ± 0.0007 (16 up, 7
 * down), held-out +0.0027 ± 0.0007 (26 up, 10 down), contention +0.0020 ± 0.0007, ratio-5920
 * +0.0012 ± 0.0003 (19 up, 2 down). Counting a backward task's dQ push to its queries' user rank
 * too was less good (+0.0034 / +0.0021). In mode (b) the backward's order is the launch shapes'
 * (launch-shapes.ts) and this key there is neutral or worse (-0.0002 / +0.0001 below the shape
 * key, -0.0010 / -0.0002 above it), and its forward exports nothing: not used. docs/results.md,
 * "Session 22".
 */

import { sameNode } from '../../core/nodes.ts';

/**
 * Keys of `key` (non-negative, as task-keys.ts builds them) with `span` (above every key) added
 * to the tasks whose push stays in their rank's node: `pushTo[i]`, the rank task i's results go to
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
  for (let i = 0; i < key.length; i++) out[i] = key[i]! + (sameNode(pushTo[i]!, rank[i]!, g) ? span : 0);
  return out;
}

/**
 * Launch shapes of a phase's tasks, and the order that groups them into shared launches.
 *
 * The GPU runtime batches an op's identical dense pieces, split into powers of two, one launch
 * each (python/fcp_torch/kernels.py, `plan_launches`; the simulator's op cost, src/cost/op-cost.ts),
 * so an op's launches are about one per distinct shape it holds. A rank of a loader layout (mode
 * (b)) often holds blocks of several long sequences cut at different block sizes; taken in position
 * order, its backward ops (cut at about 2 ms so the dK,dV partials leave early) each held one tile
 * of every size: `bimodal` 16 ranks seed 3, rank 0, 109 launches in 33 ops, 6.3 ms of its 147.7 ms
 * of compute against a mean of 2.4 ms, the makespan. Taken shape by shape ({@link shapeMajorKeys})
 * the same rank made 64 launches (3.4 ms) and the makespan fell to 144.8 ms (simulated; `npx tsx
 * bench/launch-share.ts --loader-layout --batch bimodal --world 16 --seed 3`).
 */

/**
 * Per task, a key of its launch shape for the op cut (order.ts, OrderInput.shape): its query and
 * key lengths and whether it crosses the causal diagonal. Tasks of one key cut into the same
 * pieces, which the runtime batches into shared launches; grid tiles of one block size share a
 * key, which is what matters (a key shared by unlike tasks only misjudges a cut).
 */
export function batchShapes(
  t: {
    readonly qStart: Int32Array;
    readonly qLength: Int32Array;
    readonly kvStart: Int32Array;
    readonly kvLength: Int32Array;
  },
  causal: boolean,
): Float64Array {
  const out = new Float64Array(t.qLength.length);
  for (let i = 0; i < out.length; i++) {
    const crosses = causal && t.kvStart[i]! + t.kvLength[i]! > t.qStart[i]! ? 1 : 0;
    out[i] = (t.qLength[i]! * 2 ** 24 + t.kvLength[i]!) * 2 + crosses;
  }
  return out;
}

/**
 * Order keys that put a task's launch shape before its position: the tasks of the phase's most
 * frequent shape first (ties: the smaller shape key), then by `key`. orderOps (order.ts) takes the
 * available task of least key, so among the tasks whose data has arrived a rank runs one shape
 * after another, and its ops hold few shapes each. The result is exact: the shape's rank times the
 * number of distinct keys plus the key's rank (integers below 2^53 for up to 2^26 tasks).
 *
 * Used for the backward of a loader layout only. Measured (simulated, `npx tsx
 * bench/quality-ab.ts --loader-layout`, 3 batch kinds, 16-256 ranks): docs/results.md, "Session
 * 21". The forward of a loader layout cuts its ops only where the ready group changes, so its
 * shapes already share launches (neutral there), and with a reshuffle (mode (a)) the position order
 * is what lets the `out` pushes leave progressively (backward MFU -0.006, forward -0.006).
 */
export function shapeMajorKeys(key: Float64Array, shape: Float64Array): Float64Array {
  const n = key.length;
  const keyRank = denseRanks(key);
  // Distinct shapes ascending with their counts, then ranked by count (descending), shape ascending.
  const shapes = Float64Array.from(shape).sort();
  const values: number[] = [];
  const counts: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0 && shapes[i] === shapes[i - 1]) counts[counts.length - 1]!++;
    else {
      values.push(shapes[i]!);
      counts.push(1);
    }
  }
  const byCount = values.map((_, j) => j).sort((a, b) => counts[b]! - counts[a]! || a - b);
  const rankOfValue = new Float64Array(values.length);
  byCount.forEach((j, r) => {
    rankOfValue[j] = r;
  });
  let distinctKeys = 0;
  for (let i = 0; i < n; i++) distinctKeys = Math.max(distinctKeys, keyRank[i]! + 1);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++)
    out[i] = rankOfValue[lowerBound(values, shape[i]!)]! * distinctKeys + keyRank[i]!;
  return out;
}

/** Rank of each value among the distinct values (0 for the least). */
function denseRanks(x: Float64Array): Int32Array {
  const sorted = Float64Array.from(x).sort();
  const distinct: number[] = [];
  for (let i = 0; i < sorted.length; i++)
    if (i === 0 || sorted[i] !== sorted[i - 1]) distinct.push(sorted[i]!);
  const out = new Int32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = lowerBound(distinct, x[i]!);
  return out;
}

/** First index of a sorted array whose value is not below `v`. */
function lowerBound(a: readonly number[], v: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

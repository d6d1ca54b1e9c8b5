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

import { assert } from '../../core/assert.ts';

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
 * span of the keys plus the key. The keys must be non-negative integers with (distinct shapes) x
 * (largest key + 1) within 2^53 (phase.ts passes token offsets in the packed batch: below 2^27 at
 * 4096 ranks of 32K tokens); anything else is a bug of the caller (asserted).
 *
 * Used for the backward of a loader layout only. Measured (simulated, `npx tsx
 * bench/quality-ab.ts --loader-layout`, 3 batch kinds, 16-256 ranks): docs/results.md, "Session
 * 21". The forward of a loader layout cuts its ops only where the ready group changes, so its
 * shapes already share launches (neutral there), and with a reshuffle (mode (a)) the position order
 * is what lets the `out` pushes leave progressively (backward MFU -0.006, forward -0.006).
 */
export function shapeMajorKeys(key: Float64Array, shape: Float64Array): Float64Array {
  const n = key.length;
  // Distinct shapes ascending with their counts, then ranked by count (descending), shape ascending.
  const shapes = Float64Array.from(shape).sort();
  let distinct = 0;
  for (let i = 0; i < n; i++) if (i === 0 || shapes[i] !== shapes[i - 1]) shapes[distinct++] = shapes[i]!;
  const values = shapes.subarray(0, distinct);
  const counts = new Int32Array(distinct);
  const shapeOf = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const j = lowerBound(values, shape[i]!);
    shapeOf[i] = j;
    counts[j]!++;
  }
  const byCount = Array.from({ length: distinct }, (_, j) => j).sort(
    (a, b) => counts[b]! - counts[a]! || a - b,
  );
  const rankOfValue = new Int32Array(distinct);
  for (let r = 0; r < distinct; r++) rankOfValue[byCount[r]!] = r;
  let maxKey = 0;
  for (let i = 0; i < n; i++) {
    const k = key[i]!;
    assert(Number.isInteger(k) && k >= 0, `shapeMajorKeys: key ${k} is not a non-negative integer`);
    if (k > maxKey) maxKey = k;
  }
  const span = maxKey + 1;
  assert(
    distinct * span <= Number.MAX_SAFE_INTEGER,
    `shapeMajorKeys: ${distinct} shapes x ${span} keys pass 2^53`,
  );
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = rankOfValue[shapeOf[i]!]! * span + key[i]!;
  return out;
}

/** First index of a sorted array whose value is not below `v`. */
function lowerBound(a: Float64Array, v: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

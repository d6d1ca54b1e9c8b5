/** Inputs and counts shared by the tests of FCP's op order (order.ts and what feeds it). */
import { batchLaunches } from '../../src/cost/op-cost.ts';
import type { ComputeTable } from '../../src/plan/types.ts';

/** One rank's `n` exporting tasks of `ms` each, ready with group 0, keys in id order. */
export const oneRank = (n: number, ms: number) => ({
  rank: new Int32Array(n),
  ready: new Int32Array(n),
  exported: new Uint8Array(n).fill(1),
  ms: new Float64Array(n).fill(ms),
  key: Float64Array.from({ length: n }, (_, i) => i),
});

/** Launches of every rank: per op, one batch per shape, split into powers of two. */
export const launchesPerRank = (c: ComputeTable, shape: Float64Array, world: number): number[] => {
  const out = new Array<number>(world).fill(0);
  for (let op = 0; op < c.rank.length; op++) {
    const count = new Map<number, number>();
    for (let j = c.taskOffsets[op]!; j < c.taskOffsets[op + 1]!; j++) {
      const s = shape[c.taskIds[j]!]!;
      count.set(s, (count.get(s) ?? 0) + 1);
    }
    for (const n of count.values()) out[c.rank[op]!]! += batchLaunches(n);
  }
  return out;
};

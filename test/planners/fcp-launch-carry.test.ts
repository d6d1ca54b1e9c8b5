/**
 * Launch batches completed across ops (launch-carry.ts): tasks of a launch shape beyond an op's
 * largest power of two move to the next op of the rank when that saves launches and, by the
 * estimate, delays nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { batchLaunches } from '../../src/cost/op-cost.ts';
import type { ComputeTable } from '../../src/plan/types.ts';
import { carryLaunchBatches } from '../../src/planners/fcp/launch-carry.ts';
import { orderOps } from '../../src/planners/fcp/order.ts';
import { launchesPerRank } from '../helpers/order-input.ts';

/** Estimated end of every op (ops of a rank in table order, each after its group's arrival). */
const opEnds = (c: ComputeTable, ms: Float64Array, readyAt: (g: number, r: number) => number): number[] => {
  const ends: number[] = [];
  let end = 0;
  for (let op = 0; op < c.rank.length; op++) {
    if (op === 0 || c.rank[op - 1] !== c.rank[op]) end = 0;
    let m = 0;
    for (let j = c.taskOffsets[op]!; j < c.taskOffsets[op + 1]!; j++) m += ms[c.taskIds[j]!]!;
    end = Math.max(end, readyAt(c.after[op]!, c.rank[op]!)) + m;
    ends.push(end);
  }
  return ends;
};

// Few ranks, groups and shapes, so that ops hold several tasks of a shape; exports are rare.
const taskArb = fc.record({
  rank: fc.integer({ min: 0, max: 1 }),
  ready: fc.integer({ min: -1, max: 3 }),
  exported: fc.integer({ min: 0, max: 39 }).map((x) => x === 0),
  shape: fc.integer({ min: 0, max: 1 }),
  ms: fc.double({ min: 0.1, max: 1, noNaN: true }),
});

test('carried ops keep every task once, wait for its data, move no export, add no launch and end no later', () => {
  let runsWithMoves = 0;
  fc.assert(
    fc.property(
      fc.array(taskArb, { minLength: 20, maxLength: 80 }),
      fc.double({ min: 0.2, max: 3, noNaN: true }),
      fc.boolean(),
      (ts, gap, exports) => {
        const W = 2;
        const G = 4;
        const t = {
          rank: Int32Array.from(ts, (x) => x.rank),
          ready: Int32Array.from(ts, (x) => x.ready),
          // Half the runs export nothing (the forward of a loader layout), half a little.
          exported: Uint8Array.from(ts, (x) => (exports && x.exported ? 1 : 0)),
          ms: Float64Array.from(ts, (x) => x.ms),
          // Keys in group order: a group's tasks run before the next group's (as when positions
          // follow arrival), so ops end after their successor's group is in and can carry.
          key: Float64Array.from(ts, (x, i) => x.ready * 1000 + i),
          shape: Float64Array.from(ts, (x) => x.shape),
        };
        // Groups arrive every `gap` ms: short gaps leave room to carry, long ones do not.
        const groupEnd = new Float64Array(G * W);
        for (let g = 0; g < G; g++) for (let r = 0; r < W; r++) groupEnd[g * W + r] = gap * (g + 1) + 0.1 * r;
        const readyAt = (g: number, r: number): number => (g < 0 ? 0 : groupEnd[g * W + r]!);
        const before = orderOps(t, groupEnd, G, W, 2, 0);
        const after = carryLaunchBatches(before.compute, before.opOfTask, t, readyAt);
        const c = after.compute;
        assert.deepEqual(Array.from(c.rank), Array.from(before.compute.rank));
        assert.deepEqual(Array.from(c.after), Array.from(before.compute.after));
        const seen = new Uint8Array(ts.length);
        let moved = 0;
        for (let op = 0; op < c.rank.length; op++) {
          assert.ok(c.taskOffsets[op + 1]! > c.taskOffsets[op]!, 'no op is emptied');
          for (let j = c.taskOffsets[op]!; j < c.taskOffsets[op + 1]!; j++) {
            const i = c.taskIds[j]!;
            assert.equal(seen[i], 0, 'a task in one op only');
            seen[i] = 1;
            assert.equal(after.opOfTask[i], op);
            assert.ok(t.ready[i]! <= c.after[op]!, 'an op waits for its tasks data');
            assert.equal(c.rank[op], t.rank[i]);
            const old = before.opOfTask[i]!;
            if (old !== op) {
              moved++;
              assert.ok(op > old, 'a task moves to a later op only');
              assert.equal(t.exported[i], 0, 'no exporting task moves');
            }
          }
        }
        assert.equal(
          seen.reduce((a, b) => a + b, 0),
          ts.length,
          'every task in an op',
        );
        const l0 = launchesPerRank(before.compute, t.shape, W);
        const l1 = launchesPerRank(c, t.shape, W);
        for (let r = 0; r < W; r++) assert.ok(l1[r]! <= l0[r]!, `rank ${r}: launches ${l0[r]} -> ${l1[r]}`);
        if (moved > 0)
          assert.ok(l1.reduce((a, b) => a + b) < l0.reduce((a, b) => a + b), 'a move saves launches');
        // By the estimate (task ms, group arrivals) no op ends later than before.
        const e0 = opEnds(before.compute, t.ms, readyAt);
        const e1 = opEnds(c, t.ms, readyAt);
        for (let op = 0; op < e0.length; op++) assert.ok(e1[op]! <= e0[op]! + 1e-9, `op ${op} ends later`);
        if (moved > 0) runsWithMoves++;
      },
    ),
    { numRuns: 300 },
  );
  // The generator exercises the carry (else the properties above would hold vacuously).
  assert.ok(runsWithMoves > 20, `only ${runsWithMoves} of 300 runs moved a task`);
});

/** Two ops of one rank: op 0 (from the start) and op 1 (after group 0), tasks given per op. */
const twoOps = (first: number[], second: number[]): { compute: ComputeTable; opOfTask: Int32Array } => {
  const n = first.length + second.length;
  return {
    compute: {
      rank: Int32Array.of(0, 0),
      after: Int32Array.of(-1, 0),
      taskOffsets: Int32Array.of(0, first.length, n),
      taskIds: Int32Array.from([...first, ...second]),
    },
    opOfTask: Int32Array.from({ length: n }, (_, i) => (first.includes(i) ? 0 : 1)),
  };
};

test('three squares beside one of the next op become two and two when its group is in', () => {
  // Tasks 0-2: op 0, shape 7, 1 ms each; task 3: op 1, shape 7; group 0 arrives at 1.5 ms.
  const { compute, opOfTask } = twoOps([0, 1, 2], [3]);
  const t = {
    exported: new Uint8Array(4),
    ms: Float64Array.of(1, 1, 1, 1),
    shape: Float64Array.of(7, 7, 7, 7),
  };
  const early = carryLaunchBatches(compute, opOfTask, t, (g) => (g < 0 ? 0 : 1.5));
  assert.deepEqual(Array.from(early.compute.taskOffsets), [0, 2, 4]);
  assert.deepEqual(Array.from(early.opOfTask), [0, 0, 1, 1]);
  assert.deepEqual(Array.from(early.compute.taskIds), [0, 1, 3, 2]);
  // Group 0 arriving at 2.5 ms, after the shortened op 0 (2 ms): the move would delay task 2.
  const late = carryLaunchBatches(compute, opOfTask, t, (g) => (g < 0 ? 0 : 2.5));
  assert.deepEqual(Array.from(late.opOfTask), [0, 0, 0, 1]);
  // Exporting work (its push waits for its op) never moves.
  const exporting = carryLaunchBatches(
    compute,
    opOfTask,
    { ...t, exported: Uint8Array.of(1, 1, 1, 0) },
    () => 0,
  );
  assert.deepEqual(Array.from(exporting.opOfTask), [0, 0, 0, 1]);
  // Without the shape in the next op a move saves nothing (2 + 1 launches either way).
  const other = carryLaunchBatches(compute, opOfTask, { ...t, shape: Float64Array.of(7, 7, 7, 8) }, () => 0);
  assert.deepEqual(Array.from(other.opOfTask), [0, 0, 0, 1]);
});

test('batchLaunches counts the power-of-two batches of a count', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 7, 8, 12].map(batchLaunches), [0, 1, 1, 2, 1, 3, 1, 2]);
});

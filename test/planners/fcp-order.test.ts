/**
 * FCP compute op order (order.ts) and the timeline estimate behind push placement (transfers/timeline.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { ComputeTable } from '../../src/plan/types.ts';
import { orderOps } from '../../src/planners/fcp/order.ts';
import { reserveOf } from '../../src/planners/fcp/phase-ops.ts';
import { pushGroup, type Timeline } from '../../src/planners/fcp/transfers/timeline.ts';
import { testLinks } from '../fixtures/links.ts';
import { oneRank } from '../helpers/order-input.ts';

const taskArb = fc.record({
  rank: fc.integer({ min: 0, max: 3 }),
  ready: fc.integer({ min: -1, max: 5 }),
  exported: fc.boolean(),
  ms: fc.double({ min: 0.01, max: 3, noNaN: true }),
  key: fc.integer({ min: 0, max: 1000 }),
});

/** The order's input columns of generated tasks. */
const inputOf = (ts: { rank: number; ready: number; exported: boolean; ms: number; key: number }[]) => ({
  rank: Int32Array.from(ts, (t) => t.rank),
  ready: Int32Array.from(ts, (t) => t.ready),
  exported: Uint8Array.from(ts, (t) => (t.exported ? 1 : 0)),
  ms: Float64Array.from(ts, (t) => t.ms),
  key: Float64Array.from(ts, (t) => t.key),
});

/** Task ids of op `op`, in table order. */
const tasksOfOp = (c: ComputeTable, op: number): number[] =>
  Array.from(c.taskIds.subarray(c.taskOffsets[op]!, c.taskOffsets[op + 1]!));

/** Estimated ms of op `op` (its tasks' sum) and whether every task of it exports. */
const opMs = (c: ComputeTable, ms: Float64Array, op: number): number =>
  tasksOfOp(c, op).reduce((s, i) => s + ms[i]!, 0);
const allExport = (c: ComputeTable, exported: Uint8Array, op: number): boolean =>
  tasksOfOp(c, op).every((i) => exported[i] === 1);

/** Tasks per op, in table order. */
const sizes = (c: { taskOffsets: Int32Array }): number[] =>
  Array.from({ length: c.taskOffsets.length - 1 }, (_, op) => c.taskOffsets[op + 1]! - c.taskOffsets[op]!);

/** Estimated group ends: group g ends on rank r at gap (g + 1) + skew r ms. */
const groupEnds = (G: number, W: number, gap = 2, skew = 1): Float64Array => {
  const out = new Float64Array(G * W);
  for (let g = 0; g < G; g++) for (let r = 0; r < W; r++) out[g * W + r] = gap * (g + 1) + skew * r;
  return out;
};

test('ops hold every task once, never before its data; local ops wait for nothing', () => {
  fc.assert(
    fc.property(
      fc.array(taskArb, { maxLength: 80 }),
      fc.double({ min: 0.5, max: 5, noNaN: true }),
      (ts, maxOp) => {
        const W = 4;
        const G = 6;
        const input = inputOf(ts);
        const groupEnd = groupEnds(G, W);
        const { compute, opOfTask } = orderOps(input, groupEnd, G, W, maxOp, 1);
        const seen = new Uint8Array(ts.length);
        let prevRank = -1;
        let prevQuiet = -1;
        for (let op = 0; op < compute.rank.length; op++) {
          const r = compute.rank[op]!;
          assert.ok(r >= prevRank, 'ops are rank-major');
          prevRank = r;
          let ms = 0;
          let exported = 0;
          for (let k = compute.taskOffsets[op]!; k < compute.taskOffsets[op + 1]!; k++) {
            const i = compute.taskIds[k]!;
            assert.equal(seen[i], 0, 'a task in one op');
            seen[i] = 1;
            assert.equal(opOfTask[i], op);
            assert.equal(input.rank[i], r);
            assert.ok(compute.after[op]! >= input.ready[i]!, 'an op waits for its tasks data');
            ms += input.ms[i]!;
            if (input.exported[i] || input.ready[i]! >= 0) exported++;
          }
          // Ops holding exporting work stay near maxOpMs (the last task may overshoot); an op of
          // other work that waits for a group is cut only where the ready group grows, whatever
          // its time (the next such op of the rank waits for a later group); local ops are -1.
          let exporting = false;
          for (let k = compute.taskOffsets[op]!; k < compute.taskOffsets[op + 1]!; k++)
            exporting ||= input.exported[compute.taskIds[k]!] === 1;
          if (exporting) assert.ok(ms <= maxOp + 3 + 1e-9);
          else if (exported === 0) assert.equal(compute.after[op], -1);
          if (!exporting && compute.after[op]! >= 0 && prevQuiet >= 0 && compute.rank[op - 1] === r)
            assert.ok(compute.after[op]! > compute.after[prevQuiet]!, 'one op per ready group');
          prevQuiet = !exporting && compute.after[op]! >= 0 ? op : -1;
        }
        assert.ok(seen.every((x) => x === 1));
      },
    ),
    { seed: 5, numRuns: 200 },
  );
});

test('exporting ops are cut inside a push unit only at twice maxOpMs; without units as before', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ t: taskArb, unit: fc.integer({ min: 0, max: 3 }) }), { maxLength: 80 }),
      fc.double({ min: 0.5, max: 5, noNaN: true }),
      (rows, maxOp) => {
        const W = 4;
        const G = 6;
        const input = inputOf(rows.map((x) => x.t));
        const unit = Int32Array.from(rows, (x) => x.unit);
        const groupEnd = groupEnds(G, W);
        const plain = orderOps(input, groupEnd, G, W, maxOp, 1).compute;
        const alone = Int32Array.from(rows, (_, i) => i);
        const distinct = orderOps({ ...input, unit: alone }, groupEnd, G, W, maxOp, 1).compute;
        assert.deepEqual(distinct, plain, 'a unit per task cuts as without units');
        const { compute } = orderOps({ ...input, unit }, groupEnd, G, W, maxOp, 1);
        assert.ok(compute.rank.length <= plain.rank.length, 'units never add ops');
        const msOf = (op: number): number => opMs(compute, input.ms, op);
        const exporting = (op: number): boolean => allExport(compute, input.exported, op);
        for (let op = 1; op < compute.rank.length; op++) {
          if (compute.rank[op] !== compute.rank[op - 1] || !exporting(op) || !exporting(op - 1)) continue;
          // A cut where the next op waits for a later group: that group arrives (by the estimate)
          // after the earlier op's work ends, so extending would idle it (tested by hand above).
          if (compute.after[op]! > compute.after[op - 1]!) continue;
          const last = compute.taskIds[compute.taskOffsets[op]! - 1]!;
          const first = compute.taskIds[compute.taskOffsets[op]!]!;
          // Two exporting ops in a row: the first reached maxOpMs, twice that inside one unit.
          const bound = unit[last] === unit[first] ? 2 * maxOp : maxOp;
          assert.ok(msOf(op - 1) >= bound - 1e-9, `op ${op - 1} cut at ${msOf(op - 1)} < ${bound}`);
          assert.ok(msOf(op - 1) <= 2 * maxOp + 3 + 1e-9);
        }
      },
    ),
    { seed: 7, numRuns: 200 },
  );
});

test('exporting work goes by position once its data is in; local work covers the first wait', () => {
  // One rank: local work of 3 ms, exports ready at group 0 (ends at 2 ms) with keys 3, 1, 2.
  const input = {
    rank: new Int32Array(5),
    ready: Int32Array.from([-1, -1, 0, 0, 0]),
    exported: Uint8Array.from([0, 0, 1, 1, 1]),
    ms: Float64Array.from([1.5, 1.5, 1, 1, 1]),
    key: Float64Array.from([0, 0, 3, 1, 2]),
  };
  const { compute } = orderOps(input, Float64Array.from([2]), 1, 1, 10, 1);
  const order = [...compute.taskIds];
  assert.deepEqual(order, [0, 1, 3, 4, 2], 'local first (the wait), then exports by key');
  // With a reserve, part of the local work moves to the end.
  const reserved = orderOps(input, Float64Array.from([2]), 1, 1, 10, 2).compute;
  assert.deepEqual([...reserved.taskIds], [0, 3, 4, 2, 1]);
  assert.deepEqual([...reserved.after], [-1, 0, -1]);
});

test('with one fixed reserve, local work short of the wait and the reserve is split between them', () => {
  // One exporting rank: 4 ms of local work, its export's data arrives at 4 ms, reserve 4 ms. The
  // split gives the start 4 x 4 / (4 + 4) = 2 ms (two tasks) and the end the other two; per-rank
  // reserves (mode (b)'s backward) keep all of it for the end and the rank idles until 4 ms.
  const input = {
    rank: new Int32Array(5),
    ready: Int32Array.from([-1, -1, -1, -1, 0]),
    exported: Uint8Array.from([0, 0, 0, 0, 1]),
    ms: Float64Array.from([1, 1, 1, 1, 1]),
    key: Float64Array.from([0, 1, 2, 3, 4]),
  };
  const split = orderOps(input, Float64Array.from([4]), 1, 1, 10, 4).compute;
  assert.deepEqual([...split.taskIds], [0, 1, 4, 2, 3]);
  assert.deepEqual([...split.after], [-1, 0, -1]);
  const perRank = orderOps(input, Float64Array.from([4]), 1, 1, 10, Float64Array.from([4])).compute;
  assert.deepEqual([...perRank.taskIds], [4, 0, 1, 2, 3]);
  assert.deepEqual([...perRank.after], [0, -1]);
});

test('a push joins the first group its rank enters after the op ends, never before minGroup', () => {
  // Two ranks, three groups: rank 0 enters at 0, 4, 8; rank 1 at 0, 5, 9.
  const tl: Timeline = {
    world: 2,
    groups: 3,
    groupStart: Float64Array.from([0, 0, 4, 5, 8, 9]),
    groupEnd: Float64Array.from([4, 5, 8, 9, 12, 13]),
    opEnd: new Float64Array(0),
    meanOpMs: 2,
    afterUpTo: new Int32Array(0),
  };
  assert.equal(pushGroup(tl, 0, 3, 0, 2), 1);
  assert.equal(pushGroup(tl, 1, 4.5, 0, 2), 1);
  assert.equal(pushGroup(tl, 0, 3, 2, 2), 2, 'rule 5: after the ops before it');
  assert.equal(pushGroup(tl, 0, 12, 0, 2), 3, 'past the last group: a new group');
  assert.equal(pushGroup(tl, 0, 15, 0, 2), 5, 'one new group per slice beyond');
  for (let t = 0; t < 20; t += 0.5) assert.ok(pushGroup(tl, 0, t + 0.5, 0, 2) >= pushGroup(tl, 0, t, 0, 2));
});

test('a rank that exports nothing keeps no local work for the end: it fills the wait at the start', () => {
  // Rank 0: 3 ms of local work, 1 ms of work on remote K/V arriving with group 0 at 5 ms, nothing
  // exported (the forward of a loader layout). Rank 1: the same but one task exports.
  const input = {
    rank: Int32Array.from([0, 0, 0, 1, 1, 1]),
    ready: Int32Array.from([-1, -1, 0, -1, -1, 0]),
    exported: Uint8Array.from([0, 0, 0, 0, 0, 1]),
    ms: Float64Array.from([1.5, 1.5, 1, 1.5, 1.5, 1]),
    key: Float64Array.from([0, 1, 2, 0, 1, 2]),
  };
  const groupEnd = Float64Array.from([5, 5]);
  // Per-rank reserves (a loader layout's backward), 10 ms each.
  const { compute } = orderOps(input, groupEnd, 1, 2, 2, Float64Array.from([10, 10]));
  const first = (r: number): number => compute.rank.indexOf(r);
  // Rank 0 starts with its local work; the remote-K/V op comes last.
  assert.equal(compute.after[first(0)], -1);
  assert.equal(compute.after[compute.rank.lastIndexOf(0)], 0);
  // Rank 1 keeps its local work (3 ms < the 10 ms reserve) to cover its push at the end.
  assert.equal(compute.after[first(1)], 0);
  assert.equal(compute.after[compute.rank.lastIndexOf(1)], -1);
});

test('local work beyond the reserve fills the wait between two groups, the reserve stays at the end', () => {
  // One exporting rank: 4 local tasks of 1 ms, exports ready at group 0 (ends at 1 ms, 1 ms of
  // work) and group 1 (ends at 6 ms). Reserve 1 ms: 3 ms of local work fill the 1..6 ms wait.
  const input = {
    rank: new Int32Array(6),
    ready: Int32Array.from([-1, -1, -1, -1, 0, 1]),
    exported: Uint8Array.from([0, 0, 0, 0, 1, 1]),
    ms: Float64Array.from([1, 1, 1, 1, 1, 1]),
    key: Float64Array.from([0, 1, 2, 3, 4, 5]),
  };
  const { compute } = orderOps(input, Float64Array.from([1, 6]), 2, 1, 10, 1);
  assert.deepEqual(
    [...compute.taskIds],
    [0, 4, 1, 2, 5, 3],
    'head, group 0, the gap filled, group 1, reserve',
  );
  // Without the gap fill the rank would idle from 2 to 6 ms; with a reserve of all local work
  // nothing fills it: one fixed reserve still starts with its share of the 1 ms wait (4 x 1 / (1 +
  // 4) ms: one task), per-rank reserves keep everything for the end.
  const held = orderOps(input, Float64Array.from([1, 6]), 2, 1, 10, 4).compute;
  assert.deepEqual([...held.taskIds], [0, 4, 5, 1, 2, 3]);
  const perRank = orderOps(input, Float64Array.from([1, 6]), 2, 1, 10, Float64Array.from([4])).compute;
  assert.deepEqual([...perRank.taskIds], [4, 5, 0, 1, 2, 3]);
});

test('a rank that exports nothing runs all its local work first, even past the first arrival', () => {
  const input = {
    rank: new Int32Array(4),
    ready: Int32Array.from([-1, -1, -1, 0]),
    exported: new Uint8Array(4),
    ms: Float64Array.from([1, 1, 1, 1]),
    key: Float64Array.from([0, 1, 2, 3]),
  };
  const { compute } = orderOps(input, Float64Array.from([0.5]), 1, 1, 10, 10);
  assert.deepEqual([...compute.taskIds], [0, 1, 2, 3]);
  assert.deepEqual([...compute.after], [-1, 0]);
});

test('without extend, an exporting op never waits for a later group than its first task', () => {
  fc.assert(
    fc.property(fc.array(taskArb, { maxLength: 60 }), (ts) => {
      const W = 4;
      const G = 6;
      const input = inputOf(ts);
      const groupEnd = groupEnds(G, W);
      const { compute } = orderOps(input, groupEnd, G, W, 5, 1, true, false);
      for (let op = 0; op < compute.rank.length; op++) {
        let first = -2;
        let latest = -1;
        for (let k = compute.taskOffsets[op]!; k < compute.taskOffsets[op + 1]!; k++) {
          const i = compute.taskIds[k]!;
          if (input.ready[i]! < 0) continue; // local work filling a wait
          if (first === -2) first = input.ready[i]!;
          latest = Math.max(latest, input.ready[i]!);
        }
        if (first >= 0) assert.equal(latest, first, 'no task of a later group joins');
        assert.ok(compute.after[op]! >= latest);
      }
    }),
    { seed: 7, numRuns: 200 },
  );
  // Ready groups 0 then 1, both exporting, 1 ms each under a 2 ms cut: one op with extend, two without.
  const two = {
    rank: new Int32Array(2),
    ready: Int32Array.from([0, 1]),
    exported: Uint8Array.from([1, 1]),
    ms: Float64Array.from([1, 1]),
    key: Float64Array.from([0, 1]),
  };
  const ends = Float64Array.from([1, 1.5]);
  assert.deepEqual([...orderOps(two, ends, 2, 1, 2, 0).compute.after], [1]);
  assert.deepEqual([...orderOps(two, ends, 2, 1, 2, 0, true, false).compute.after], [0, 1]);
  // With extend, not a group the estimate has arriving after the op's work so far ends (group 1 at
  // 5 ms, the first task done at 2 ms): the first task would idle for it.
  const late = Float64Array.from([1, 5]);
  assert.deepEqual([...orderOps(two, late, 2, 1, 2, 0).compute.after], [0, 1]);
});

test('work that exports nothing goes in one op per ready group, however long (no push waits for it)', () => {
  // Ready groups 0, 0, 1, 1, 2 of 3 ms each, ops cut at 2 ms on a rank that exports.
  const input = {
    rank: new Int32Array(5),
    ready: Int32Array.from([0, 0, 1, 1, 2]),
    exported: new Uint8Array(5),
    ms: Float64Array.from([3, 3, 3, 3, 3]),
    key: Float64Array.from([0, 1, 2, 3, 4]),
  };
  const groupEnd = Float64Array.from([1, 2, 3]);
  const quiet = orderOps(input, groupEnd, 3, 1, 2, 0).compute;
  assert.deepEqual([...quiet.after], [0, 1, 2]);
  assert.deepEqual([...quiet.taskOffsets], [0, 2, 4, 5]);
  // The same tasks all exporting: ops cut by time (2 ms), one task each.
  const exporting = orderOps({ ...input, exported: new Uint8Array(5).fill(1) }, groupEnd, 3, 1, 2, 0).compute;
  assert.equal(exporting.after.length, 5);
  // Only the last task exports: the others still go by ready group, that one alone.
  const mixed = orderOps(
    { ...input, exported: Uint8Array.from([0, 0, 0, 0, 1]) },
    groupEnd,
    3,
    1,
    2,
    0,
  ).compute;
  assert.deepEqual([...mixed.taskOffsets], [0, 2, 4, 5]);
});

test('the reserve per rank is what its largest push takes, capped, and 0 for a rank that exports nothing', () => {
  const links = testLinks();
  const model = { qHeads: 64, kvHeads: 8, headDim: 128, bytesPerElement: 2 } as never;
  const tctx = { world: 3, links, model, causal: true, dir: 'forward', tm: null as never } as const;
  const tasks = {
    rank: Int32Array.from([0, 0, 1, 2]),
    qLength: Int32Array.from([1024, 4096, 4096, 1 << 20]),
    kvLength: Int32Array.from([4096, 4096, 4096, 4096]),
  } as never;
  const exported = Uint8Array.from([1, 1, 0, 1]);
  const fwd = reserveOf(tasks, exported, 10, false, tctx);
  const push = (4096 * 64 * 128 * 2) / 5e7 + 0.01;
  assert.ok(Math.abs(fwd[0]! - 2 * push) < 1e-9, 'twice the largest push');
  assert.equal(fwd[1], 0, 'exports nothing');
  assert.equal(fwd[2], 10, 'capped');
  const bwd = reserveOf(tasks, exported, 10, true, tctx);
  assert.ok(bwd[0]! > fwd[0]!, 'the backward also pushes dK,dV partials');
});

test('with launch shapes, an exporting op ends on a power of two of its next task shape, or at 1.5x the cut', () => {
  // Mostly exporting tasks of a few ready groups, several to an op (with `taskArb` consecutive
  // exporting ops are rare: 24 pairs in 300 runs, none holding three tasks of a shape, so the
  // property held without the rule too).
  const shapedArb = fc.record({
    t: fc.record({
      rank: fc.integer({ min: 0, max: 3 }),
      ready: fc.integer({ min: -1, max: 1 }),
      exported: fc.integer({ min: 0, max: 4 }).map((x) => x > 0),
      ms: fc.double({ min: 0.2, max: 1, noNaN: true }),
      key: fc.integer({ min: 0, max: 1000 }),
    }),
    shape: fc.integer({ min: 0, max: 1 }),
  });
  fc.assert(
    fc.property(
      fc.array(shapedArb, { maxLength: 80 }),
      fc.double({ min: 1, max: 3, noNaN: true }),
      (rows, maxOp) => {
        const W = 4;
        const G = 6;
        const input = inputOf(rows.map((x) => x.t));
        const shape = Float64Array.from(rows, (x) => x.shape);
        const { compute } = orderOps({ ...input, shape }, groupEnds(G, W), G, W, maxOp, 1);
        const exporting = (op: number): boolean => allExport(compute, input.exported, op);
        for (let op = 1; op < compute.rank.length; op++) {
          if (compute.rank[op] !== compute.rank[op - 1] || !exporting(op) || !exporting(op - 1)) continue;
          // (A cut before a later group: see the units test.)
          if (compute.after[op]! > compute.after[op - 1]!) continue;
          const prev = tasksOfOp(compute, op - 1);
          const ms = opMs(compute, input.ms, op - 1);
          const next = shape[tasksOfOp(compute, op)[0]!]!;
          const k = prev.filter((i) => shape[i] === next).length;
          // Cut at maxOpMs when that keeps the next task's shape at a power of two (or absent) in
          // the op; else the op grew on towards one and stopped at 1.5 x maxOpMs.
          assert.ok(ms >= maxOp - 1e-9, `op ${op - 1} cut at ${ms} < ${maxOp}`);
          if ((k & (k - 1)) !== 0)
            assert.ok(ms >= 1.5 * maxOp - 1e-9, `op ${op - 1}: ${k} of a shape at ${ms}`);
          assert.ok(ms <= 1.5 * maxOp + 3 + 1e-9);
        }
      },
    ),
    { seed: 11, numRuns: 300 },
  );
});

test('squares of one shape make ops of four (one launch), not three (2 + 1 launches)', () => {
  // One rank, 12 exporting squares of 0.7 ms ready at once, ops cut at 2 ms.
  const n = 12;
  const input = oneRank(n, 0.7);
  const groupEnd = Float64Array.from([1]);
  assert.deepEqual(sizes(orderOps(input, groupEnd, 1, 1, 2, 0).compute), [3, 3, 3, 3], 'by time alone');
  const shaped = orderOps({ ...input, shape: new Float64Array(n) }, groupEnd, 1, 1, 2, 0).compute;
  assert.deepEqual(sizes(shaped), [4, 4, 4]);
  // Two shapes alternating: at the time bound the next task's shape is once in the op (a power
  // of two), so the op is cut there.
  const mixed = orderOps(
    { ...input, shape: Float64Array.from({ length: n }, (_, i) => i % 2) },
    groupEnd,
    1,
    1,
    2,
    0,
  );
  assert.deepEqual(sizes(mixed.compute), [3, 3, 3, 3]);
});

test('before an op of work that exports nothing is cut, ready tasks of its shape complete its batch', () => {
  // One rank exporting nothing: squares A0-A3 (shape 1, keys 10-13) ready with group 0, B (shape
  // 2, key 0) with group 1, which arrives at 2.5 ms; 1 ms each. At 3 ms B is next by key and
  // opens the next op, while the op holds three squares (2 + 1 launches): A3 joins it first.
  const input = {
    rank: new Int32Array(5),
    ready: Int32Array.from([0, 0, 0, 0, 1]),
    exported: new Uint8Array(5),
    ms: new Float64Array(5).fill(1),
    key: Float64Array.from([10, 11, 12, 13, 0]),
  };
  const groupEnd = Float64Array.from([0, 2.5]);
  const plain = orderOps(input, groupEnd, 2, 1, 2, 0).compute;
  assert.deepEqual([...plain.taskIds], [0, 1, 2, 4, 3], 'by key alone, A3 runs after B');
  assert.deepEqual([...plain.taskOffsets], [0, 3, 5]);
  const shaped = orderOps({ ...input, shape: Float64Array.from([1, 1, 1, 1, 2]) }, groupEnd, 2, 1, 2, 0);
  assert.deepEqual([...shaped.compute.taskIds], [0, 1, 2, 3, 4]);
  assert.deepEqual([...shaped.compute.taskOffsets], [0, 4, 5]);
  assert.deepEqual([...shaped.compute.after], [0, 1]);
  // An exporting square does not join an op of work that exports nothing.
  const exporting = orderOps(
    { ...input, exported: Uint8Array.from([0, 0, 0, 1, 0]), shape: Float64Array.from([1, 1, 1, 1, 2]) },
    groupEnd,
    2,
    1,
    2,
    0,
  ).compute;
  assert.ok(exporting.taskIds.indexOf(3) > exporting.taskIds.indexOf(4), 'the exporting A3 still after B');
});

test('an exporting op cut for a later group first takes ready exporting tasks of its shape', () => {
  // The same squares and B, all exporting, ops up to 10 ms, no extension (the forward): B opens
  // the next op at 3 ms; A3, ready since group 0, completes the op's batch of four first.
  const input = {
    rank: new Int32Array(5),
    ready: Int32Array.from([0, 0, 0, 0, 1]),
    exported: new Uint8Array(5).fill(1),
    ms: new Float64Array(5).fill(1),
    key: Float64Array.from([10, 11, 12, 13, 0]),
  };
  const groupEnd = Float64Array.from([0, 2.5]);
  const plain = orderOps(input, groupEnd, 2, 1, 10, 0, true, false).compute;
  assert.deepEqual([...plain.taskIds], [0, 1, 2, 4, 3], 'by key alone, A3 runs after B');
  const shaped = orderOps(
    { ...input, shape: Float64Array.from([1, 1, 1, 1, 2]) },
    groupEnd,
    2,
    1,
    10,
    0,
    true,
    false,
  ).compute;
  assert.deepEqual([...shaped.taskIds], [0, 1, 2, 3, 4]);
  assert.deepEqual([...shaped.taskOffsets], [0, 4, 5]);
  // A3 that exports nothing does not join an exporting op (nor the reverse: the test above).
  const mixed = orderOps(
    { ...input, exported: Uint8Array.from([1, 1, 1, 0, 1]), shape: Float64Array.from([1, 1, 1, 1, 2]) },
    groupEnd,
    2,
    1,
    10,
    0,
    true,
    false,
  ).compute;
  assert.ok(mixed.taskIds.indexOf(3) > mixed.taskIds.indexOf(4), 'A3 still after B');
});

test('with launch shapes, ops hold every task once and wait for its data', () => {
  let changed = 0;
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          rank: fc.integer({ min: 0, max: 1 }),
          ready: fc.integer({ min: -1, max: 3 }),
          shape: fc.integer({ min: 0, max: 1 }),
          ms: fc.double({ min: 0.1, max: 1, noNaN: true }),
          key: fc.integer({ min: 0, max: 100 }),
          exported: fc.boolean(),
        }),
        { minLength: 20, maxLength: 80 },
      ),
      fc.double({ min: 0.2, max: 3, noNaN: true }),
      fc.boolean(),
      (ts, gap, exports) => {
        const W = 2;
        const G = 4;
        // Half the runs export nothing (the forward of a loader layout).
        const input = inputOf(ts.map((t) => ({ ...t, exported: exports && t.exported })));
        const groupEnd = groupEnds(G, W, gap, 0.1);
        const shaped = orderOps(
          { ...input, shape: Float64Array.from(ts, (t) => t.shape) },
          groupEnd,
          G,
          W,
          2,
          0,
        );
        const c = shaped.compute;
        const seen = new Uint8Array(ts.length);
        for (let op = 0; op < c.rank.length; op++)
          for (const i of tasksOfOp(c, op)) {
            assert.equal(seen[i], 0, 'a task in one op only');
            seen[i] = 1;
            assert.equal(shaped.opOfTask[i], op);
            assert.equal(c.rank[op], input.rank[i]);
            assert.ok(input.ready[i]! <= c.after[op]!, 'an op waits for its tasks data');
          }
        assert.equal(
          seen.reduce((a, b) => a + b, 0),
          ts.length,
          'every task in an op',
        );
        const plain = orderOps(input, groupEnd, G, W, 2, 0).compute;
        if (plain.taskIds.some((x, j) => x !== c.taskIds[j])) changed++;
      },
    ),
    { numRuns: 200 },
  );
  // The generator reaches the batch completion (else the properties above would hold vacuously).
  assert.ok(changed > 20, `only ${changed} of 200 runs took a task ahead`);
});

test('backward ops grow far from the rank end (a tenth of the work to come), never to wait for a later group', () => {
  // One rank, 60 exporting tiles of 0.5 ms each (30 ms), every one of another push unit, ops cut
  // at 2 ms: by time alone 15 ops of 4 tiles.
  const n = 60;
  const input = { ...oneRank(n, 0.5), unit: Int32Array.from({ length: n }, (_, i) => i) };
  const groupEnd = Float64Array.from([0, 50]);
  const forward = orderOps(input, groupEnd, 2, 1, 2, 0, true, false).compute;
  assert.deepEqual(sizes(forward), new Array(15).fill(4), 'without `extend` (the forward) by time alone');
  const backward = orderOps(input, groupEnd, 2, 1, 2, 0).compute;
  const s = sizes(backward);
  // The first op grows while it holds less than a tenth of the work still to come: 6 tiles (3 ms
  // against 30 - 2.5 = 27.5 ms to come after five); the last ops are back at the 2 ms cut.
  assert.equal(s[0], 6);
  assert.ok(s.length < 15, `${s.length} ops`);
  assert.deepEqual(s.slice(-3), [4, 4, 4]);
  // Tiles of a later group: the op that holds the first group's work does not grow to wait for it.
  const split = { ...input, ready: Int32Array.from({ length: n }, (_, i) => (i < 5 ? 0 : 1)) };
  const c = orderOps(split, groupEnd, 2, 1, 2, 0).compute;
  assert.deepEqual(Array.from(c.taskIds.subarray(c.taskOffsets[0]!, c.taskOffsets[1]!)), [0, 1, 2, 3, 4]);
  assert.equal(c.after[0], 0);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { evenUserLayout } from '../../src/plan/layout.ts';
import { partLength } from '../../src/plan/parts.ts';
import { emptyPhase, Kind, type Plan } from '../../src/plan/types.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import {
  congestionOf,
  lengthHistogram,
  placementOf,
  roundsOf,
  shortTokens,
} from '../../src/report/extract.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

/** A 3-rank plan by hand: sequences [10, 4, 2]; home rows chosen below. */
function handPlan(): Plan {
  const user = evenUserLayout([10, 4, 2], 3);
  const fwd = emptyPhase();
  // Round 0: 0->1, 2->1 (rank 1 receives twice); round 1: 1->0.
  fwd.transfers = {
    round: Int32Array.of(0, 0, 1),
    src: Int32Array.of(0, 2, 1),
    dst: Int32Array.of(1, 1, 0),
    kind: Uint8Array.of(Kind.kv, Kind.kv, Kind.in),
    seq: Int32Array.of(0, 0, 1),
    start: Int32Array.of(0, 5, 0),
    length: Int32Array.of(5, 5, 4),
  };
  fwd.groupOfRound = Int32Array.of(0, 0);
  return {
    format: 'fcp-plan/1',
    strategy: 'hand',
    world: 3,
    mask: 'causal',
    model: { qHeads: 2, kvHeads: 1, headDim: 4, bytesPerElement: 4 },
    sequences: Int32Array.of(10, 4, 2),
    userLayout: user,
    homeLayout: {
      rank: Int32Array.of(0, 1, 2, 2),
      seq: Int32Array.of(0, 0, 1, 2),
      start: Int32Array.of(0, 5, 0, 0),
      length: Int32Array.of(5, 5, 4, 2),
    },
    tasks: {
      rank: new Int32Array(0),
      seq: new Int32Array(0),
      qStart: new Int32Array(0),
      qLength: new Int32Array(0),
      kvStart: new Int32Array(0),
      kvLength: new Int32Array(0),
    },
    forward: fwd,
    backward: emptyPhase(),
  };
}

test('placementOf: one row per long sequence, short ones by length class, tokens per rank', () => {
  const p = placementOf(handPlan(), { topSequences: 1 });
  assert.deepEqual(
    p.rows.map((r) => r.label),
    ['#0 10', '4-8', '2-4'],
  );
  assert.deepEqual(p.cells, [
    { rank: 0, row: 0, tokens: 5 },
    { rank: 1, row: 0, tokens: 5 },
    { rank: 2, row: 1, tokens: 4 },
    { rank: 2, row: 2, tokens: 2 },
  ]);
});

test('placementOf counts every home token exactly once (simple fixture plans)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 6 }),
      fc.integer({ min: 0, max: 1000 }),
      fc.integer({ min: 0, max: 5 }),
      (world, seed, top) => {
        const plan = simplePlan(resolveProblem({ world, tokensPerRank: 300, seed, batch: 'uniform' }));
        const p = placementOf(plan, { topSequences: top });
        const total = plan.sequences.reduce((s, x) => s + x, 0);
        assert.equal(
          p.cells.reduce((s, c) => s + c.tokens, 0),
          total,
        );
        assert.equal(
          p.rows.reduce((s, r) => s + r.tokens, 0),
          total,
        );
        assert.equal(
          p.rows.reduce((s, r) => s + r.sequences, 0),
          plan.sequences.length,
        );
      },
    ),
    { seed: 42, numRuns: 30 },
  );
});

test('placementOf expands homeChunks per sequence of the set', () => {
  const plan = handPlan();
  plan.homeLayout = {
    rank: new Int32Array(0),
    seq: new Int32Array(0),
    start: new Int32Array(0),
    length: new Int32Array(0),
  };
  plan.seqSets = { offsets: Int32Array.of(0, 3), seqs: Int32Array.of(0, 1, 2) };
  // Every sequence cut in 3 parts; part p on rank p.
  plan.homeChunks = {
    rank: Int32Array.of(0, 1, 2),
    set: Int32Array.of(0, 0, 0),
    parts: Int32Array.of(3, 3, 3),
    part: Int32Array.of(0, 1, 2),
  };
  const p = placementOf(plan, { topSequences: 3 });
  // 10 -> 4,4,2; 4 -> 2,2,0; 2 -> 1,1,0.
  const at = (rank: number, row: number): number =>
    p.cells.find((c) => c.rank === rank && c.row === row)?.tokens ?? 0;
  assert.deepEqual([at(0, 0), at(1, 0), at(2, 0)], [4, 4, 2]);
  assert.deepEqual([at(0, 1), at(1, 1), at(2, 1)], [2, 2, 0]);
  assert.deepEqual([at(0, 2), at(1, 2), at(2, 2)], [1, 1, 0]);
});

test('partLength follows docs/design.md: part i of P is [i*c, min((i+1)*c, L)), c = ceil(L/P)', () => {
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => partLength(10, 4, i)),
    [3, 3, 3, 1],
  );
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => partLength(2, 4, i)),
    [1, 1, 0, 0],
  );
});

test('roundsOf counts sends and receives per rank per round; congestion is the worst cell', () => {
  const r = roundsOf(handPlan(), 'forward');
  assert.equal(r.rounds, 2);
  assert.deepEqual(r.cells, [
    { round: 0, rank: 0, sends: 1, receives: 0 },
    { round: 0, rank: 1, sends: 0, receives: 2 },
    { round: 0, rank: 2, sends: 1, receives: 0 },
    { round: 1, rank: 0, sends: 0, receives: 1 },
    { round: 1, rank: 1, sends: 1, receives: 0 },
  ]);
  assert.equal(congestionOf(r), 2);
  assert.equal(congestionOf(roundsOf(handPlan(), 'backward')), 0);
});

test('roundsOf of the fixture plan: every transfer counted once on each side', () => {
  const plan = simplePlan(resolveProblem({ world: 6, tokensPerRank: 400, seed: 3 }));
  const r = roundsOf(plan, 'backward');
  const n = plan.backward.transfers.round.length;
  assert.equal(
    r.cells.reduce((s, c) => s + c.sends, 0),
    n,
  );
  assert.equal(
    r.cells.reduce((s, c) => s + c.receives, 0),
    n,
  );
  assert.equal(congestionOf(r), 1); // the fixture's greedy rounds are matchings
});

test('lengthHistogram buckets by powers of two', () => {
  assert.deepEqual(lengthHistogram([1, 2, 3, 4, 7, 8, 100]), [
    { lo: 1, count: 1, tokens: 1 },
    { lo: 2, count: 2, tokens: 5 },
    { lo: 4, count: 2, tokens: 11 },
    { lo: 8, count: 1, tokens: 8 },
    { lo: 64, count: 1, tokens: 100 },
  ]);
});

test('shortTokens', () => {
  assert.deepEqual([512, 1024, 1536, 412 * 1024, 3 << 20].map(shortTokens), [
    '512',
    '1.0K',
    '1.5K',
    '412K',
    '3.0M',
  ]);
});

/**
 * Compact chunk rows: a hand-built 2-rank ring-like plan (DualChunkSwap: rank 0 holds parts 0 and
 * 3, rank 1 parts 1 and 2) for a set of 3 sequences cut into 4 parts, plus one sequence in
 * explicit rows. Checked directly, broken on purpose, and against its explicit expansion.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { expandChunks } from '../../src/plan/expand.ts';
import { planFromJson } from '../../src/plan/io.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { clonePlan, codes } from './mutate.ts';

const ct = (rows: number[][]) => ({
  rank: rows.map((r) => r[0]),
  set: rows.map(() => 0),
  parts: rows.map(() => 4),
  qPart: rows.map((r) => r[1]),
  kvPart: rows.map((r) => r[2]),
});
const ctr = (rows: [number, number, number, string, number][]) => ({
  round: rows.map((r) => r[0]),
  src: rows.map((r) => r[1]),
  dst: rows.map((r) => r[2]),
  kind: rows.map((r) => r[3]),
  set: rows.map(() => 0),
  parts: rows.map(() => 4),
  part: rows.map((r) => r[4]),
});
const compute = {
  rank: [0, 0, 0, 1, 1],
  after: [-1, 0, 1, -1, 0],
  taskOffsets: [0, 0, 0, 0, 1, 1],
  taskIds: [0],
  chunkTaskOffsets: [0, 3, 4, 5, 8, 10],
  chunkTaskIds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
};
const chunks = { rank: [0, 0, 1, 1], set: [0, 0, 0, 0], parts: [4, 4, 4, 4], part: [0, 3, 1, 2] };
const kvRing: [number, number, number, string, number][] = [
  [0, 0, 1, 'kv', 0],
  [0, 1, 0, 'kv', 1],
  [1, 1, 0, 'kv', 2],
];
const json = {
  format: 'fcp-plan/1',
  strategy: 'hand-ring',
  world: 2,
  mask: 'causal',
  model: { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 2 },
  // Sequence 3 (length 2) has only parts 0 and 1; sequence 2 is in explicit rows on rank 1.
  sequences: [10, 7, 5, 2],
  seqSets: { offsets: [0, 3], seqs: [0, 1, 3] },
  userLayout: { rank: [1], seq: [2], start: [0], length: [5] },
  homeLayout: { rank: [1], seq: [2], start: [0], length: [5] },
  userChunks: chunks,
  homeChunks: chunks,
  tasks: { rank: [1], seq: [2], qStart: [0], qLength: [5], kvStart: [0], kvLength: [5] },
  chunkTasks: ct([
    [0, 0, 0],
    [0, 3, 0],
    [0, 3, 3],
    [0, 3, 1],
    [0, 3, 2],
    [1, 1, 1],
    [1, 2, 1],
    [1, 2, 2],
    [1, 1, 0],
    [1, 2, 0],
  ]),
  forward: {
    transfers: { round: [], src: [], dst: [], kind: [], seq: [], start: [], length: [] },
    chunkTransfers: ctr(kvRing),
    groupOfRound: [0, 1],
    compute,
    sendAfter: { transfer: [], compute: [] },
  },
  backward: {
    transfers: { round: [], src: [], dst: [], kind: [], seq: [], start: [], length: [] },
    chunkTransfers: ctr([...kvRing, [2, 0, 1, 'dkv', 1], [2, 1, 0, 'dkv', 0], [3, 0, 1, 'dkv', 2]]),
    groupOfRound: [0, 1, 2, 3],
    compute,
    sendAfter: { transfer: [], compute: [], chunkTransfer: [3, 4, 5], chunkCompute: [1, 4, 2] },
  },
};
const base: Plan = planFromJson(json);

const has = (p: Plan, code: string): void => {
  const got = codes(validatePlan(p).issues);
  assert.ok(got.includes(code), `expected ${code}, got ${JSON.stringify(got)}`);
};

test('the hand-built chunk plan is valid, and so is its expansion', () => {
  const r = validatePlan(base);
  assert.deepEqual(r.issues, []);
  const x = validatePlan(expandChunks(base));
  assert.deepEqual(x.issues, []);
  // The report sums chunk rows over their set exactly as the expansion counts its rows.
  for (const k of [
    'attendedPairs',
    'expectedPairs',
    'tasks',
    'totalBytes',
    'peakResidentTokens',
    'computeImbalance',
    'commImbalance',
  ] as const)
    assert.equal(r.report[k], x.report[k], k);
  assert.deepEqual(r.report.backward.bytes, x.report.backward.bytes);
  assert.equal(r.report.forward.kvDelta, 2);
  assert.equal(r.report.forward.kvRounds, 2);
});

test('a missing chunk transfer leaves K/V missing, reported on the chunk task', () => {
  const p = clonePlan(base);
  const t = p.forward.chunkTransfers!;
  t.src[2] = 0; // rank 0 does not hold part 2: it is the sender's own fetch target
  t.dst[2] = 1;
  const r = validatePlan(p);
  assert.ok(codes(r.issues).includes('plan.rule3.senderMissing'));
  assert.ok(
    r.issues.some((i) => i.code === 'plan.rule3.kvMissing' && i.path === 'chunkTasks' && i.row === 4),
  );
});

test('a masked chunk task and the pairs it leaves are reported', () => {
  const p = clonePlan(base);
  p.chunkTasks!.kvPart[0] = 1; // rank 0: queries of part 0 against keys of part 1 (the future)
  has(p, 'plan.rule2.masked');
  has(p, 'plan.rule2.pairMissing');
});

test('a lost chunk dkv and a deadlocking chunk sendAfter are reported', () => {
  const p = clonePlan(base);
  p.backward.sendAfter.chunkTransfer = Int32Array.of(3, 5);
  p.backward.sendAfter.chunkCompute = Int32Array.of(1, 2);
  p.backward.chunkTransfers!.kind[4] = 1; // the dkv of part 0 becomes a kv: the partial stays on rank 1
  has(p, 'plan.rule4.dkvLost');
  const q = clonePlan(base);
  q.backward.compute.after[2] = 3;
  has(q, 'plan.rule5.deadlock');
});

/**
 * Property: random in-range edits of the compact plan give the same verdict (and the same rules
 * broken) as the same edits validated on the explicit expansion. This checks the representative
 * argument of validate-expand.ts on plans that break rules in every way the edits can.
 */
test('compact and expanded validation agree on randomly edited chunk plans', () => {
  type Edit = { table: number; row: number; col: number; value: number };
  const edit = fc.record({
    table: fc.integer({ min: 0, max: 4 }),
    row: fc.nat(),
    col: fc.nat(),
    value: fc.integer({ min: -1, max: 3 }),
  });
  const apply = (p: Plan, e: Edit): void => {
    const pick = <T>(xs: T[]): T => xs[e.col % xs.length]!;
    if (e.table === 0) {
      const col = pick(['rank', 'qPart', 'kvPart'] as const);
      p.chunkTasks![col][e.row % 10] = col === 'rank' ? e.value & 1 : Math.max(0, e.value);
    } else if (e.table === 1 || e.table === 2) {
      const ph = e.table === 1 ? p.forward : p.backward;
      const t = ph.chunkTransfers!;
      const r = e.row % t.round.length;
      const col = pick(['round', 'src', 'part', 'kind'] as const);
      if (col === 'round') t.round[r] = Math.max(0, e.value) % ph.groupOfRound.length;
      else if (col === 'src') {
        t.src[r] = e.value & 1;
        t.dst[r] = 1 - (e.value & 1);
      } else if (col === 'part') t.part[r] = Math.max(0, e.value);
      else t.kind[r] = e.table === 1 ? [0, 1, 2][Math.max(0, e.value) % 3]! : Math.max(0, e.value);
    } else if (e.table === 3) {
      const ph = e.col % 2 ? p.forward : p.backward;
      ph.compute.after[e.row % 5] = Math.min(e.value, ph.groupOfRound.length - 1);
    } else {
      const l = e.col % 2 ? p.userChunks! : p.homeChunks!;
      l.rank[e.row % 4] = e.value & 1;
    }
  };
  const rules = (p: Plan): string[] =>
    [
      ...new Set(
        codes(validatePlan(p, { maxIssues: 10000 }).issues).map((c) => c.split('.').slice(0, 2).join('.')),
      ),
    ].sort();
  fc.assert(
    fc.property(fc.array(edit, { minLength: 1, maxLength: 3 }), (edits) => {
      const p = clonePlan(base);
      for (const e of edits) apply(p, e);
      assert.deepEqual(rules(p), rules(expandChunks(p)));
    }),
    { seed: 42, numRuns: 300 },
  );
});

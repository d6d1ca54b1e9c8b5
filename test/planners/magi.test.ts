import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs } from '../../src/model/attention.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { defaultChunkSize, magiDispatch } from '../../src/planners/magi/dispatch.ts';
import { planMagi } from '../../src/planners/magi/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { codeOf } from '../helpers/errors.ts';

test('magi: every rank gets the same number of chunks (padding chunks included)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 20 }),
      fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 40 }),
      fc.option(fc.integer({ min: 1, max: 512 }), { nil: undefined }),
      fc.constantFrom('causal' as const, 'full' as const),
      (world, lens, chunkSize, mask) => {
        const d = magiDispatch(lens, world, mask, chunkSize);
        const total = lens.reduce((a, b) => a + b, 0);
        assert.equal(d.chunkSize, chunkSize ?? Math.ceil(total / (8 * world)));
        assert.equal(d.chunks % world, 0);
        assert.ok(d.chunks * d.chunkSize >= total && (d.chunks - world) * d.chunkSize < total);
        const count = new Int32Array(world);
        for (const r of d.owner) count[r]!++;
        for (let r = 0; r < world; r++) assert.equal(count[r], d.chunksPerRank);
        // Areas sum to the batch's attended pairs.
        const pairs = lens.reduce((a, l) => a + attendedPairs(mask === 'causal', 0, l, 0, l), 0);
        assert.equal(
          d.area.reduce((a, b) => a + b, 0),
          pairs,
        );
      },
    ),
    { seed: 42, numRuns: 200 },
  );
});

test('magi: chunks go largest area first to the least-loaded rank with a free slot', () => {
  // One causal sequence in 8 one-token chunks: chunk c attends c+1 keys; 2 ranks x 4 slots.
  const d = magiDispatch([8], 2, 'causal', 1);
  assert.deepEqual(Array.from(d.area), [1, 2, 3, 4, 5, 6, 7, 8]);
  // By area: 8->r0, 7->r1, 6->r1 (7 < 8), 5->r0, 4->r0 (13 = 13: lower rank), 3->r1, 2->r1 (full), 1->r0.
  assert.deepEqual(Array.from(d.owner), [0, 1, 1, 0, 0, 1, 1, 0]); // by chunk index
  assert.equal(defaultChunkSize(1000, 4), 32);
});

test('magi: overlapDegree stages become all-to-all-v groups; backward reduces dK/dV to owners', () => {
  const p = resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 2048, seed: 5 });
  for (const degree of [1, 2, 3]) {
    const plan = planMagi(p, { overlapDegree: degree });
    const fg = plan.forward.groupOfRound;
    const groups = fg.length ? fg[fg.length - 1]! + 1 : 0;
    assert.equal(groups, degree);
    // Backward: one K/V group per stage plus the last two reduces alone (one when a single stage).
    assert.equal(
      plan.backward.groupOfRound[plan.backward.groupOfRound.length - 1]! + 1,
      degree === 1 ? 2 : degree + 2,
    );
    // Every forward kv fetch has a dkv reply: same range, reversed direction.
    const key = (s: number, d: number, q: number, a: number, l: number) => `${s}>${d}:${q}@${a}+${l}`;
    const kv = new Set<string>();
    const f = plan.forward.transfers;
    for (let i = 0; i < f.round.length; i++)
      kv.add(key(f.src[i]!, f.dst[i]!, f.seq[i]!, f.start[i]!, f.length[i]!));
    const b = plan.backward.transfers;
    let dkv = 0;
    for (let i = 0; i < b.round.length; i++)
      if (b.kind[i] === Kind.dkv) {
        dkv++;
        assert.ok(kv.has(key(b.dst[i]!, b.src[i]!, b.seq[i]!, b.start[i]!, b.length[i]!)));
      }
    assert.equal(dkv, kv.size);
    assert.equal(plan.backward.sendAfter.transfer.length, dkv);
  }
});

test('magi: all-to-all-v rounds are not congestion-free (a receiver reached by several senders in one round)', () => {
  const plan = planMagi(resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 2 }));
  const t = plan.forward.transfers;
  const senders = new Map<string, Set<number>>();
  for (let i = 0; i < t.round.length; i++) {
    const k = `${t.round[i]}:${t.dst[i]}`;
    const s = senders.get(k) ?? new Set<number>();
    s.add(t.src[i]!);
    senders.set(k, s);
  }
  let worst = 0;
  for (const s of senders.values()) worst = Math.max(worst, s.size);
  assert.ok(worst > 1, `worst receive congestion ${worst}`);
  // ... while each sender sends one message per round.
  const msgs = new Map<string, Set<number>>();
  for (let i = 0; i < t.round.length; i++) {
    const k = `${t.round[i]}:${t.src[i]}`;
    const s = msgs.get(k) ?? new Set<number>();
    s.add(t.dst[i]!);
    msgs.set(k, s);
  }
  for (const s of msgs.values()) assert.equal(s.size, 1);
});

test('magi: user layout equals home layout; chunkSize option; bad options are user errors', () => {
  const p = resolveProblem({ batch: [5000, 300, 9000], world: 4, tokensPerRank: 4000 });
  const plan = planMagi(p, { chunkSize: 2048 });
  assert.deepEqual(plan.userLayout, plan.homeLayout);
  assert.equal((plan.meta as { chunkSize: number }).chunkSize, 2048);
  assert.equal((plan.meta as { chunks: number }).chunks, 8); // ceil(14300/2048) = 7 -> padded to 8
  assert.equal(
    codeOf(() => planMagi(p, { chunkSize: 0 })),
    'option.chunkSize',
  );
  assert.equal(
    codeOf(() => planMagi(p, { overlapDegree: 0 })),
    'option.overlapDegree',
  );
});

/** For every sendAfter pair of the backward: [rank, op index in rank order, next op's `after`, transfer group]. */
function reduceOverlaps(plan: Plan): { overlapped: number; waited: number } {
  const ph = plan.backward;
  const c = ph.compute;
  const next = new Int32Array(c.rank.length).fill(-2);
  for (let i = 0; i + 1 < c.rank.length; i++) if (c.rank[i + 1] === c.rank[i]) next[i] = c.after[i + 1]!;
  let overlapped = 0;
  let waited = 0;
  for (let i = 0; i < ph.sendAfter.transfer.length; i++) {
    const op = ph.sendAfter.compute[i]!;
    if (next[op] === -2) continue; // the rank's last op: nothing left to overlap with
    const g = ph.groupOfRound[ph.transfers.round[ph.sendAfter.transfer[i]!]!]!;
    if (g > next[op]!) overlapped++;
    else waited++;
  }
  return { overlapped, waited };
}

test('magi backward: the dK/dV reduce of a stage overlaps the next op (never waited for by it), as dist_attn.py does', () => {
  const p = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 3 });
  for (const o of [{ overlapDegree: 2 }, { overlapDegree: 4 }, { overlapDegree: 3, hideTailReduce: true }]) {
    const plan = planMagi(p, o);
    assert.deepEqual(validatePlan(plan).issues, []);
    const { overlapped, waited } = reduceOverlaps(plan);
    assert.equal(waited, 0, JSON.stringify(o));
    assert.ok(overlapped > 0);
  }
});

test('magi hideTailReduce: the host stage runs last in the backward, so the last reduce overlaps it', () => {
  const p = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 3 });
  const plan = planMagi(p, { hideTailReduce: true });
  const c = plan.backward.compute;
  // The last op of every rank that has remote stages waits for no group (the host stage).
  let ranksWithStages = 0;
  for (let i = 0; i < c.rank.length; i++) {
    const last = i + 1 === c.rank.length || c.rank[i + 1] !== c.rank[i];
    const first = i === 0 || c.rank[i - 1] !== c.rank[i];
    if (last && !first) {
      ranksWithStages++;
      assert.equal(c.after[i], -1);
    }
  }
  assert.ok(ranksWithStages > 0);
  // Without it, the rank's last op is a remote stage and its reduce has nothing to overlap.
  const d = planMagi(p).backward.compute;
  assert.equal(d.after[d.rank.length - 1]! >= 0, true);
});

test('magi native backend: one inter-node copy per (segment, destination node) per stage, NVLink fan-out', () => {
  const p = resolveProblem({ batch: 'longtail', world: 32, tokensPerRank: 4096, seed: 2, gpusPerNode: 8 });
  const node = (r: number) => Math.floor(r / 8);
  const a2av = planMagi(p);
  const native = planMagi(p, { magiBackend: 'native' });
  assert.deepEqual(validatePlan(native).issues, []);
  const interNode = (plan: Plan) => {
    const t = plan.forward.transfers;
    const seen = new Map<string, number>();
    let tokens = 0;
    for (let i = 0; i < t.round.length; i++) {
      if (node(t.src[i]!) === node(t.dst[i]!)) continue;
      tokens += t.length[i]!;
      const k = `${plan.forward.groupOfRound[t.round[i]!]}:${t.seq[i]}@${t.start[i]}:${node(t.dst[i]!)}`;
      seen.set(k, (seen.get(k) ?? 0) + 1);
    }
    return { tokens, maxCopies: Math.max(...seen.values()) };
  };
  const n = interNode(native);
  const a = interNode(a2av);
  assert.equal(n.maxCopies, 1);
  assert.ok(a.maxCopies > 1, 'the a2av backend sends duplicates to one node');
  assert.ok(n.tokens < a.tokens, `${n.tokens} < ${a.tokens}`);
  // Same total attention work, numerically the same tasks.
  assert.deepEqual(native.tasks, a2av.tasks);
  assert.equal(
    codeOf(() => planMagi(p, { magiBackend: 'deepep' as 'native' })),
    'option.magiBackend',
  );
});

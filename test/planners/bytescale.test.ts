import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { FcpError } from '../../src/core/issues.ts';
import { expandChunks } from '../../src/plan/expand.ts';
import { Kind } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { byteScaleAssign } from '../../src/planners/bytescale/assign.ts';
import { planByteScale } from '../../src/planners/bytescale/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** Ranks holding tokens of each sequence in the (expanded) home layout. */
function ranksOfSeq(plan: ReturnType<typeof planByteScale>): Set<number>[] {
  const flat = expandChunks(plan);
  const out = Array.from(plan.sequences, () => new Set<number>());
  for (let i = 0; i < flat.homeLayout.rank.length; i++)
    out[flat.homeLayout.seq[i]!]!.add(flat.homeLayout.rank[i]!);
  return out;
}

test('bytescale: never splits a sequence that fits one rank; a longer one gets ceil(L/C) ranks', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 12 }),
      fc.integer({ min: 16, max: 256 }),
      fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: 1, maxLength: 30 }),
      (world, budget, raw) => {
        // Keep the batch within world * budget tokens so that C is the per-rank budget.
        const lens: number[] = [];
        let total = 0;
        for (const l of raw) {
          const len = Math.min(l, world * budget - total);
          if (len <= 0) break;
          lens.push(len);
          total += len;
        }
        const p = resolveProblem({ batch: lens, world, memoryTokens: 4 * budget * world });
        const c = p.tokensPerRank;
        const owners = ranksOfSeq(planByteScale(p));
        lens.forEach((len, s) => {
          if (len <= c) assert.equal(owners[s]!.size, 1, `sequence ${s} (${len} <= ${c}) split`);
          else assert.equal(owners[s]!.size, Math.min(world, Math.ceil(len / c)), `sequence ${s}`);
        });
      },
    ),
    { seed: 42, numRuns: 150 },
  );
});

test('bytescale: short sequences are packed whole, longest first onto the rank with the fewest tokens', () => {
  const a = byteScaleAssign([10, 9, 8, 3, 2, 1], 3, 10, 100);
  assert.equal(a.groups.length, 0);
  assert.deepEqual(Array.from(a.single), [0, 1, 2, 2, 1, 0]);
  assert.deepEqual(Array.from(a.tokens), [11, 11, 11]);
});

test('bytescale: long sequences ring over the least-loaded ranks in rank order; equal rank lists share a ring', () => {
  // C = 10: 35 -> 4 ranks, 25 -> 3 ranks, 21 -> 3 ranks; world 10.
  const a = byteScaleAssign([35, 25, 21, 4], 10, 10, 100);
  assert.deepEqual(
    a.groups.map((g) => Array.from(g.ranks)),
    [
      [0, 1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
    ],
  );
  // 35 tokens in 8 parts of 5 leave part 7 empty, so rank 0 (parts 0 and 7) holds 5 tokens, the
  // fewest: the 4-token sequence goes there.
  assert.deepEqual(Array.from(a.tokens.subarray(0, 4)), [5 + 4, 10, 10, 10]);
  assert.equal(a.single[3], 0);
  // Two sequences landing on the same ranks share one ring group.
  const b = byteScaleAssign([20, 20], 2, 10, 100);
  assert.equal(b.groups.length, 1);
  assert.deepEqual(b.groups[0]!.seqs, [0, 1]);
});

test('bytescale: single-rank sequences move nothing; rings move K/V only inside their group', () => {
  const p = resolveProblem({ batch: [70, 5, 12, 30, 3], world: 6, tokensPerRank: 20, memoryTokens: 200 });
  const plan = planByteScale(p);
  const flat = expandChunks(plan);
  const owners = ranksOfSeq(plan);
  for (const ph of [flat.forward, flat.backward]) {
    const t = ph.transfers;
    for (let i = 0; i < t.round.length; i++) {
      assert.ok(t.kind[i] === Kind.kv || t.kind[i] === Kind.dkv);
      assert.ok(p.sequences[t.seq[i]!]! > p.tokensPerRank, 'only ring sequences communicate');
      assert.ok(owners[t.seq[i]!]!.has(t.src[i]!) && owners[t.seq[i]!]!.has(t.dst[i]!), 'inside the group');
    }
  }
  // The 70-token sequence rings over 4 ranks: 3 forward rounds.
  assert.equal(plan.forward.groupOfRound.length, 3);
  assert.deepEqual((plan.meta as { ringGroupSizes: number[] }).ringGroupSizes, [4, 2]);
});

test('bytescale: when groups ask for more than N ranks, rings share ranks (congestion 2) and the plan stays valid', () => {
  const p = resolveProblem({ batch: [11, 11, 11, 7], world: 4, memoryTokens: 1000 });
  assert.equal(p.tokensPerRank, 10);
  const plan = planByteScale(p);
  assert.deepEqual((plan.meta as { ringGroupSizes: number[] }).ringGroupSizes, [2, 2, 2]);
  const { issues, report } = validatePlan(plan);
  assert.deepEqual(issues, []);
  assert.equal(report.congestion, 2);
});

test('bytescale work sizing: k = max(ceil(L/C), round(N * pairs(L) / pairs(batch))); memory sizing keeps ceil(L/C)', () => {
  // C = 100, N = 10. 300 tokens: pairs 45150 of 45150 + 9 * 5050 = 90600 -> round(10 * 0.498) = 5 > 3.
  const lens = [300, ...Array(9).fill(100)];
  const byWork = byteScaleAssign(lens, 10, 100, 1000, {
    sizing: 'work',
    packing: 'tokens',
    powerOfTwo: false,
  });
  assert.equal(byWork.groups[0]!.ranks.length, 5);
  const byMemory = byteScaleAssign(lens, 10, 100, 1000);
  assert.equal(byMemory.groups[0]!.ranks.length, 3);
  // Power-of-two rounding (Megatron dynamic CP): 5 -> 8; 3 -> 4.
  const p2 = byteScaleAssign(lens, 10, 100, 1000, { sizing: 'work', packing: 'tokens', powerOfTwo: true });
  assert.equal(p2.groups[0]!.ranks.length, 8);
  const m2 = byteScaleAssign(lens, 10, 100, 1000, { sizing: 'memory', packing: 'tokens', powerOfTwo: true });
  assert.equal(m2.groups[0]!.ranks.length, 4);
});

test('bytescale work packing: least work first, never above memoryTokens while some rank has room', () => {
  // Two ranks, memory 12: 10 goes to rank 0; 4 and 4 both go to rank 1 (less work), 2 and 2 would
  // go to rank 1 by work (8 + 8 pairs < 55) but rank 1 holds 8 + 2 + 2 = 12 <= 12: allowed; a
  // third 2 finds rank 1 full and goes to rank 0 (12 <= 12).
  const a = byteScaleAssign(
    [10, 4, 4, 2, 2, 2],
    2,
    10,
    12,
    { sizing: 'memory', packing: 'work', powerOfTwo: false },
    true,
  );
  assert.deepEqual(Array.from(a.single), [0, 1, 1, 1, 1, 0]);
  assert.deepEqual(Array.from(a.tokens), [12, 12]);
  assert.equal(a.overCapacity, 0);
  // By tokens the same batch lands differently (the check that the rule is not a no-op).
  const t = byteScaleAssign([10, 4, 4, 2, 2, 2], 2, 10, 12);
  assert.notDeepEqual(Array.from(t.single), Array.from(a.single));
});

test('bytescale work rules: lower compute imbalance than memory-only on a long-tailed batch, still valid', () => {
  const p = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 2048, seed: 5 });
  const work = planByteScale(p, { bytescaleSizing: 'work', bytescalePacking: 'work' });
  const memory = planByteScale(p);
  const w = validatePlan(work);
  const m = validatePlan(memory);
  assert.deepEqual(w.issues, []);
  assert.ok(
    w.report.computeImbalance < m.report.computeImbalance,
    `${w.report.computeImbalance} vs ${m.report.computeImbalance}`,
  );
  assert.equal((work.meta as { overCapacityRanks: number }).overCapacityRanks, 0);
});

test('bytescale: bad rule values are FcpError option.bytescale', () => {
  const p = resolveProblem({ batch: [5, 5], world: 2 });
  assert.throws(
    () => planByteScale(p, { bytescaleSizing: 'flops' as 'work' }),
    (e: unknown) => e instanceof FcpError && e.code === 'option.bytescale',
  );
});

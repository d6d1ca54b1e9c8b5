import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs } from '../../src/model/attention.ts';
import { expandChunks } from '../../src/plan/expand.ts';
import { chunkTaskPairs, partLength, partStats } from '../../src/plan/parts.ts';
import type { Plan } from '../../src/plan/types.ts';
import { planByteScale } from '../../src/planners/bytescale/index.ts';
import { planRing } from '../../src/planners/ring/index.ts';
import { flopByteEstimate, partStatsCache, phaseLoad } from '../../src/planners/wlb/estimate.ts';
import { flopByteWlbEstimate, planWlb, simulatorEstimate } from '../../src/planners/wlb/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

test('partStats: O(1) chunk sums equal the per-sequence sums (causal and full, padded or not)', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 1, max: 24 }),
      fc.boolean(),
      (lens, parts, padded) => {
        const seqs = lens.map((_, i) => i);
        const st = partStats(lens, seqs, parts, padded);
        const len = (l: number, i: number) => (padded ? Math.ceil(l / parts) : partLength(l, parts, i));
        for (let q = 0; q < parts; q++) {
          assert.equal(
            st.tokens[q],
            lens.reduce((a, l) => a + len(l, q), 0),
          );
          for (let k = 0; k < parts; k++)
            for (const causal of [true, false]) {
              // Brute force on the part lengths: (q, k) pairs of a sequence whose parts are contiguous.
              let want = 0;
              for (const l of lens) {
                const c = Math.ceil(l / parts);
                want += attendedPairs(causal, q * c, len(l, q), k * c, len(l, k));
              }
              assert.equal(
                chunkTaskPairs(st, causal ? 'causal' : 'full', q, k),
                want,
                `q${q} k${k} ${causal}`,
              );
            }
        }
      },
    ),
    { seed: 42, numRuns: 150 },
  );
});

/** Per-rank pairs and bytes of a plan computed on its expansion (explicit rows only). */
function bruteLoad(plan: Plan, fwd: boolean) {
  const flat = expandChunks(plan);
  return phaseLoad(flat, fwd ? flat.forward : flat.backward, fwd, () => {
    throw new Error('no chunk rows after expansion');
  });
}

test('flop-byte estimate: chunk-row sums equal the expanded plan (ring and bytescale)', () => {
  const p = resolveProblem({ batch: 'longtail', world: 6, tokensPerRank: 3000, seed: 4 });
  for (const plan of [planRing(p), planByteScale(p)]) {
    // Padding is charged by the estimate only; compare on an unpadded copy.
    const unpadded: Plan = plan.seqSets
      ? { ...plan, seqSets: { offsets: plan.seqSets.offsets, seqs: plan.seqSets.seqs } }
      : plan;
    for (const fwd of [true, false]) {
      const a = phaseLoad(
        unpadded,
        fwd ? unpadded.forward : unpadded.backward,
        fwd,
        partStatsCache(unpadded),
      );
      const b = bruteLoad(plan, fwd);
      assert.deepEqual(Array.from(a.pairs), Array.from(b.pairs));
      assert.deepEqual(Array.from(a.sent), Array.from(b.sent));
      assert.deepEqual(Array.from(a.received), Array.from(b.received));
    }
  }
});

test('flop-byte estimate: charges TE padding and grows with bytes and FLOPs', () => {
  const p = resolveProblem({ batch: [33, 33, 33], world: 4 });
  const ring = planRing(p);
  const unpadded: Plan = { ...ring, seqSets: { offsets: ring.seqSets!.offsets, seqs: ring.seqSets!.seqs } };
  assert.ok(flopByteEstimate(ring) > flopByteEstimate(unpadded));
  assert.ok(flopByteEstimate(ring, { bandwidth: 1e6 }) > flopByteEstimate(ring));
});

test('wlb: picks the plan the estimator says is faster, relabelled, with the choice in meta', () => {
  const p = resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 4096, seed: 9 });
  const preferRing = planWlb(p, {}, (plan) => (plan.strategy === 'ring' ? 1 : 2), 'test');
  const preferByteScale = planWlb(p, {}, (plan) => (plan.strategy === 'ring' ? 2 : 1), 'test');
  assert.equal(preferRing.strategy, 'wlb');
  assert.equal(preferByteScale.strategy, 'wlb');
  assert.deepEqual((preferRing.meta as { wlb: unknown }).wlb, {
    estimator: 'test',
    estimateMs: { ring: 1, bytescale: 2 },
    chosen: 'ring',
  });
  assert.equal((preferByteScale.meta as { wlb: { chosen: string } }).wlb.chosen, 'bytescale');
  assert.deepEqual(preferRing.chunkTasks, planRing(p).chunkTasks);
  assert.deepEqual(preferByteScale.tasks, planByteScale(p).tasks);
  // The default estimator is the simulator; its numbers and name are recorded.
  const d = planWlb(p);
  const est = (
    d.meta as { wlb: { estimator: string; estimateMs: { ring: number; bytescale: number }; chosen: string } }
  ).wlb;
  assert.match(est.estimator, /^sim \(/);
  assert.equal(est.estimateMs.ring, simulatorEstimate(planRing(p)));
  assert.equal(est.estimateMs.bytescale, simulatorEstimate(planByteScale(p)));
  assert.equal(est.chosen, est.estimateMs.bytescale < est.estimateMs.ring ? 'bytescale' : 'ring');
  // The flop-byte stand-in still plugs into the same seam.
  const fb = (
    planWlb(p, {}, flopByteWlbEstimate).meta as { wlb: { estimator: string; estimateMs: { ring: number } } }
  ).wlb;
  assert.equal(fb.estimator, 'flop-byte');
  assert.equal(fb.estimateMs.ring, flopByteEstimate(planRing(p)));
});

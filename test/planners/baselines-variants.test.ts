/**
 * The baselines' tunable variants (ring a2a+p2p and all_gather, bytescale work rules, magi's
 * backend, tail reduce, degree and chunk size): valid under the validator on random batches at
 * worlds 1-64, and numerically right on the CPU runtime (O, dQ, dK, dV within 1e-5 of the float64
 * reference), causal and full.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { GENERATOR_NAMES } from '../../src/batch/generators.ts';
import { CpuWorkerPool } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { compareOutputs, referenceAttention } from '../../src/executors/reference.ts';
import { getExecutor } from '../../src/executors/registry.ts';
import { userTokenImbalance } from '../../src/plan/layout.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { planByteScale } from '../../src/planners/bytescale/index.ts';
import { planMagi } from '../../src/planners/magi/index.ts';
import { planPerDocumentAllGather, planRing } from '../../src/planners/ring/index.ts';
import type { PlannerOptions } from '../../src/planners/types.ts';
import { type Problem, resolveProblem } from '../../src/problem/problem.ts';
import { codeOf } from '../helpers/errors.ts';

type PlanFn = (p: Problem, o: PlannerOptions) => Plan;

/** Every variant, with the world sizes it accepts (a2a degree must divide the world). */
const VARIANTS: { name: string; plan: PlanFn; options: (world: number) => PlannerOptions | undefined }[] = [
  {
    name: 'ring a2a+p2p (node, every sequence split)',
    plan: planRing,
    options: () => ({ ringVariant: 'a2a+p2p' }),
  },
  {
    name: 'ring a2a+p2p (node, short sequences whole: non-TE ablation)',
    plan: planRing,
    options: () => ({ ringVariant: 'a2a+p2p', a2aSplitTokens: 1024 }),
  },
  {
    name: 'ring a2a+p2p (degree 2, split above 8 tokens)',
    plan: planRing,
    options: (w) => (w % 2 === 0 ? { ringVariant: 'a2a+p2p', a2aDegree: 2, a2aSplitTokens: 8 } : undefined),
  },
  { name: 'ring all_gather', plan: planRing, options: () => ({ ringVariant: 'all_gather' }) },
  { name: 'wlb per-document all-gather', plan: (p) => planPerDocumentAllGather(p), options: () => ({}) },
  {
    name: 'bytescale work/work',
    plan: planByteScale,
    options: () => ({ bytescaleSizing: 'work', bytescalePacking: 'work' }),
  },
  {
    name: 'bytescale work/tokens pow2',
    plan: planByteScale,
    options: () => ({ bytescaleSizing: 'work', bytescalePow2: true }),
  },
  {
    name: 'magi native + hidden tail',
    plan: planMagi,
    options: () => ({ magiBackend: 'native', hideTailReduce: true, overlapDegree: 3 }),
  },
  { name: 'magi degree 4, chunk 24', plan: planMagi, options: () => ({ overlapDegree: 4, chunkSize: 24 }) },
];

function assertValid(v: (typeof VARIANTS)[number], p: Problem, big = false): Plan | undefined {
  const base = v.options(p.world);
  if (!base) return undefined;
  // Tiny magi chunks on a big batch make millions of tasks; keep the chunk count modest there.
  const o = big && base.chunkSize !== undefined ? { ...base, chunkSize: 1024 } : base;
  const plan = v.plan(p, o);
  const { issues, report } = validatePlan(plan, { maxIssues: 3 });
  const what = `${v.name} world=${p.world} mask=${p.mask} gpn=${p.gpusPerNode} [${Array.from(p.sequences).slice(0, 10)}]`;
  assert.deepEqual(
    issues.map((i) => `${i.code} ${i.message}`),
    [],
    what,
  );
  assert.equal(report.attendedPairs, report.expectedPairs, what);
  return plan;
}

test('variants pass the validator on random batches, worlds 1-64, both masks, several node sizes', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(1, 2, 3, 4, 6, 8, 12, 16),
      fc.array(fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 400 })), {
        minLength: 1,
        maxLength: 16,
      }),
      fc.constantFrom('causal' as const, 'full' as const),
      fc.constantFrom(1, 2, 4),
      (w, lens, mask, gpusPerNode) => {
        const p = resolveProblem({ batch: lens, world: w, mask, gpusPerNode, memoryTokens: 100000 });
        for (const v of VARIANTS) {
          // The default a2a degree (a node) must divide the world and the 8 K/V heads.
          const a = Math.min(gpusPerNode, w);
          if (v.name.startsWith('ring a2a+p2p (node') && (w % a !== 0 || 8 % a !== 0)) continue;
          assertValid(v, p);
        }
      },
    ),
    { seed: 17, numRuns: 60 },
  );
});

test('variants pass the validator on generated batches at 32 and 64 ranks (long parts split, short whole)', () => {
  for (const [w, batch, mask] of [
    [32, 'longtail', 'causal'],
    [64, 'longtail', 'full'],
    [64, GENERATOR_NAMES[0]!, 'causal'],
  ] as const) {
    // Parts of 2N-way cuts reach the a2a split threshold only with long sequences: 32K per rank.
    const p = resolveProblem({ batch, world: w, mask, seed: 4, tokensPerRank: w === 32 ? 32768 : 2048 });
    for (const v of VARIANTS) assertValid(v, p, true);
  }
});

test('ring a2a+p2p: an a2a degree that does not divide the heads or the world is option.a2aDegree', () => {
  const p = resolveProblem({ batch: [100, 50], world: 8, qHeads: 64, kvHeads: 8 });
  assert.equal(
    codeOf(() => planRing(p, { ringVariant: 'a2a+p2p', a2aDegree: 3 })),
    'option.a2aDegree',
  );
  const q = resolveProblem({ batch: [100, 50], world: 16, qHeads: 64, kvHeads: 8 });
  assert.equal(
    codeOf(() => planRing(q, { ringVariant: 'a2a+p2p', a2aDegree: 16 })),
    'option.a2aDegree',
  );
  assert.equal(
    codeOf(() => planRing(p, { ringVariant: 'ulysses' as 'p2p' })),
    'option.ringVariant',
  );
});

const pool = new CpuWorkerPool();
after(async () => {
  await pool.close();
});

test('variants are numerically right on the CPU runtime (1e-5), causal and full', async () => {
  const cpu = getExecutor('cpu');
  const model = { qHeads: 8, kvHeads: 4, headDim: 8, bytesPerElement: 4 };
  let runs = 0;
  for (const [world, gpn, lens] of [
    [4, 2, [37, 5, 90, 3, 20]],
    [6, 2, [130, 1, 44, 9]],
    [8, 4, [300, 12, 7, 61]],
  ] as const)
    for (const mask of ['causal', 'full'] as const) {
      const p = resolveProblem({
        batch: [...lens],
        world,
        mask,
        model,
        gpusPerNode: gpn,
        memoryTokens: 100000,
      });
      for (const v of VARIANTS) {
        const o = v.options(world);
        if (!o) continue;
        const plan = assertValid(v, p)!;
        const inputs = randomInputsForPlan(plan, world);
        const res = await cpu.run(plan, inputs, { pool });
        const e = compareOutputs(res.outputs!, referenceAttention(plan.model, plan.mask, inputs));
        for (const k of ['o', 'dq', 'dk', 'dv'] as const)
          assert.ok(e[k] <= 1e-5, `${v.name} world ${world} ${mask}: ${k} error ${e[k]}`);
        runs++;
      }
    }
  assert.ok(runs >= 6 * VARIANTS.length);
});

// TE's loader cuts every sequence into 2N slices (get_batch_on_this_cp_rank), so a2a+p2p's layout
// holds 1/N of every padded sequence per rank: token imbalance within the padding. The old rule
// (short sequences whole on one group rank) is kept only as an ablation, and must be worse.
test('ring a2a+p2p: every sequence split over all ranks (TE layout), token imbalance within padding', () => {
  for (const world of [16, 64]) {
    const p = resolveProblem({ world, batch: 'longtail', tokensPerRank: 32768, seed: 3 });
    const te = planRing(p, { ringVariant: 'a2a+p2p', a2aDegree: 8 });
    assert.equal(te.meta?.a2aSplitTokens, 1);
    let total = 0;
    for (const l of p.sequences) total += l;
    // Padding each sequence to 2N adds at most 2N-1 tokens per sequence, at most 2 per rank each.
    const bound = (2 * p.sequences.length) / (total / world);
    const imb = userTokenImbalance(te);
    assert.ok(imb <= bound + 1e-12, `world ${world}: ${imb} > ${bound}`);
    const old = planRing(p, { ringVariant: 'a2a+p2p', a2aDegree: 8, a2aSplitTokens: 1024 });
    assert.ok(userTokenImbalance(old) > 0.05, `world ${world}: ablation ${userTokenImbalance(old)}`);
  }
});

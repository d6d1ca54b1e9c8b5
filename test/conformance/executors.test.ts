/**
 * Conformance suite, written once: every registered planner (plus the test fixtures' planners)
 * x every numeric executor, on seeded random batches: world sizes 1 to 8, causal and full masks,
 * block sizes that do and do not divide the sequence lengths, GQA/MQA/MHA shapes. Every plan must
 * validate and execute to O, dQ, dK, dV within 1e-5 relative error of the float64 reference.
 *
 * FCP_CONFORMANCE_CASES (default 50) sets the cases per registered planner (the fixtures run at
 * most 16); the summary line printed at the end gives the largest error of each output over the
 * whole suite.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Rng } from '../../src/core/rng.ts';
import { CpuWorkerPool } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { compareOutputs, referenceAttention } from '../../src/executors/reference.ts';
import { numericExecutors } from '../../src/executors/registry.ts';
import type { Mask, ModelShape } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { allPlanners } from '../../src/experiments/strategies.ts';
import type { Planner, PlannerOptions } from '../../src/planners/types.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { chunkPlan, shuffledPlan } from '../executors/cpu-plans.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

const MAX_ERROR = 1e-5;
const CASES = Number(process.env.FCP_CONFORMANCE_CASES ?? 50);
/** The test fixtures' planners get fewer cases: they are references, not products. */
const FIXTURE_CASES = Math.min(CASES, 16);

interface Case {
  id: number;
  world: number;
  mask: Mask;
  lengths: number[];
  blockSize: number;
  divides: boolean;
  coalesce: number;
  model: ModelShape;
}

const MODELS: ModelShape[] = [
  { qHeads: 4, kvHeads: 2, headDim: 16, bytesPerElement: 4 },
  { qHeads: 4, kvHeads: 1, headDim: 8, bytesPerElement: 4 },
  { qHeads: 2, kvHeads: 2, headDim: 12, bytesPerElement: 4 },
];

/**
 * Case i: world 1 + i mod 8, mask alternating every 8 cases, and lengths that are multiples of the
 * block size or a block size that divides few of them alternating so that every (world, mask)
 * sees both within 32 cases (and every world both within 16).
 */
function makeCase(i: number): Case {
  const rng = new Rng(1000 + i);
  const world = 1 + (i % 8);
  const mask: Mask = Math.floor(i / 8) % 2 === 0 ? 'causal' : 'full';
  const divides = (i + Math.floor(i / 8)) % 2 === 0;
  const blockSize = divides
    ? ([16, 32, 64] as const)[rng.int(0, 2)]!
    : ([17, 24, 50, 100] as const)[rng.int(0, 3)]!;
  const total = world * rng.int(32, 144);
  const lengths: number[] = [];
  let sum = 0;
  while (sum < total) {
    const u = rng.next();
    let len = u < 0.6 ? rng.int(1, 48) : u < 0.9 ? rng.int(49, 160) : rng.int(161, 320);
    if (divides) len = blockSize * Math.max(1, Math.round(len / blockSize));
    len = Math.min(len, Math.max(divides ? blockSize : 1, total - sum));
    lengths.push(len);
    sum += len;
  }
  return {
    id: i,
    world,
    mask,
    lengths,
    blockSize,
    divides,
    coalesce: 1 + (i % 3),
    model: MODELS[i % MODELS.length]!,
  };
}

/** The planners under test: every registered one, plus the fixtures (kept when planners change). */
function planners(): { planner: Planner; cases: number }[] {
  const fixtures: Planner[] = [
    {
      name: 'fixture:simple',
      description: 'test fixture',
      plan: (p, o) => simplePlan(p, { coalesce: o?.coalesce ?? 2 }),
    },
    {
      name: 'fixture:reshuffle',
      description: 'test fixture',
      plan: (p) => shuffledPlan(p, 1 + (p.sequences.length % 3)),
    },
    { name: 'fixture:chunks', description: 'test fixture', plan: (p) => chunkPlan(p) },
  ];
  return [
    ...allPlanners().map((planner) => ({ planner, cases: CASES })),
    ...fixtures.map((planner) => ({ planner, cases: FIXTURE_CASES })),
  ];
}

const worst = { o: 0, dq: 0, dk: 0, dv: 0 };
let runs = 0;
const pool = new CpuWorkerPool();
after(async () => {
  await pool.close();
  const f = (x: number) => x.toExponential(2);
  console.log(
    `conformance: ${runs} runs, max relative error o ${f(worst.o)}, dq ${f(worst.dq)}, dk ${f(worst.dk)}, dv ${f(worst.dv)} (limit ${MAX_ERROR})`,
  );
});

const cases = Array.from({ length: CASES }, (_, i) => makeCase(i));

for (const executor of numericExecutors())
  for (const { planner, cases: n } of planners())
    describe(`conformance: ${executor.name} executor x ${planner.name} planner`, () => {
      for (const c of cases.slice(0, n))
        it(`case ${c.id}: world ${c.world}, ${c.mask}, ${c.lengths.length} sequences, block ${c.blockSize}${c.divides ? ' (divides)' : ''}, ${c.model.qHeads}/${c.model.kvHeads}x${c.model.headDim}`, async () => {
          // Memory is not what this suite tests: room for a zig-zag pair of blocks beyond twice the even share.
          const total = c.lengths.reduce((a, b) => a + b, 0);
          const memoryTokens = 2 * Math.ceil(total / c.world) + 2 * c.blockSize;
          const problem = resolveProblem({
            batch: c.lengths,
            world: c.world,
            mask: c.mask,
            model: c.model,
            seed: c.id,
            memoryTokens,
          });
          const options: PlannerOptions = { blockSize: c.blockSize, coalesce: c.coalesce };
          const plan = planner.plan(problem, options);
          const { issues } = validatePlan(plan);
          assert.deepEqual(
            issues.map((x) => x.code),
            [],
            `invalid plan: ${issues
              .slice(0, 3)
              .map((x) => x.message)
              .join('; ')}`,
          );
          const inputs = randomInputsForPlan(plan, c.id);
          const res = await executor.run(plan, inputs, executor.name === 'cpu' ? { pool } : {});
          assert.ok(res.outputs, 'a numeric executor returns outputs');
          const e = compareOutputs(res.outputs, referenceAttention(plan.model, plan.mask, inputs));
          runs++;
          for (const k of ['o', 'dq', 'dk', 'dv'] as const) {
            worst[k] = Math.max(worst[k], e[k]);
            assert.ok(e[k] <= MAX_ERROR, `${k}: relative error ${e[k]} > ${MAX_ERROR}`);
          }
        });
    });

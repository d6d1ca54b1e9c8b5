/**
 * The torch runtime (python/fcp_torch through `runTorchMany`) on CPU with gloo, 2 and 4 processes:
 * every registered strategy's plans (causal and full batches) must give the CPU runtime's O, dQ,
 * dK, dV within 1e-5 relative error in float32, and the float64 reference's too. The 2-process
 * launch decomposes causal tasks into bottom-right pieces, the 4-process one into squares and
 * rectangles (the two kernel layouts of the GPU path), with two timed iterations after a warm-up.
 *
 * Skipped, with a message, only when no Python can `import torch` (CI installs python3-torch).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CpuWorkerPool } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { compareOutputs, referenceAttention, relativeError } from '../../src/executors/reference.ts';
import { getExecutor } from '../../src/executors/registry.ts';
import { runTorchMany, type TorchJob } from '../../src/executors/torch/index.ts';
import { torchSuiteSkip } from '../../src/executors/torch/python.ts';
import type { SequenceOutputs } from '../../src/executors/types.ts';
import { getPlanner, plannerNames } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import type { Mask, Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const MAX_ERROR = 1e-5;
// Under CI a missing torch fails the suite (torchSuiteSkip throws) instead of skipping it.
const skip = torchSuiteSkip();
if (skip) console.log(`# torch executor tests skipped: ${skip}`);

interface Case {
  name: string;
  strategy: string;
  plan: Plan;
}

const BATCHES: { lengths: number[]; mask: Mask }[] = [
  { lengths: [70, 9, 33, 120, 4, 60, 1, 47], mask: 'causal' },
  { lengths: [150, 21, 64, 5], mask: 'full' },
];

function cases(world: number): Case[] {
  const out: Case[] = [];
  for (const strategy of plannerNames())
    BATCHES.forEach((b, i) => {
      const problem = resolveProblem({ batch: b.lengths, world, mask: b.mask, model: SMALL_MODEL });
      const plan = getPlanner(strategy).plan(problem, { blockSize: 16, coalesce: 2 });
      out.push({ name: `${strategy} batch ${i} (${b.mask})`, strategy, plan });
    });
  return out;
}

const err = (a: SequenceOutputs, b: SequenceOutputs) => ({
  o: relativeError(a.o, b.o),
  dq: relativeError(a.dq, b.dq),
  dk: relativeError(a.dk, b.dk),
  dv: relativeError(a.dv, b.dv),
});

const pool = new CpuWorkerPool();
after(async () => {
  await pool.close();
});

for (const [world, mode] of [
  [2, 'br'],
  [4, 'square'],
] as const)
  describe(`torch executor (gloo, ${world} processes, ${mode} pieces) against the cpu runtime`, {
    skip,
  }, () => {
    const list = cases(world);
    const results = new Map<string, SequenceOutputs>();
    const inputs = list.map((c, i) => randomInputsForPlan(c.plan, 100 + i));
    const worst = { o: 0, dq: 0, dk: 0, dv: 0 };
    before(async () => {
      for (const c of list) assert.deepEqual(validatePlan(c.plan).issues, [], `${c.name}: invalid plan`);
      const jobs: TorchJob[] = list.map((c, i) => ({ plan: c.plan, inputs: inputs[i] }));
      const iters = world === 4 ? 2 : 1;
      const res = await runTorchMany(jobs, {
        device: 'cpu',
        kernel: 'math',
        mode,
        iters,
        warmup: iters - 1,
        timeoutMs: 120000,
      });
      res.forEach((r, i) => {
        assert.ok(r.outputs, 'torch run returned outputs');
        results.set(list[i]!.name, r.outputs);
        assert.equal(r.perRank.forward.length, world);
        assert.ok(r.forwardMs > 0 && r.backwardMs > 0);
        assert.equal(((r.details?.forwardIterationsMs ?? []) as number[]).length, iters);
        assert.equal(r.details?.mode, mode);
      });
    });
    after(() => {
      const f = (x: number) => x.toExponential(2);
      console.log(
        `# torch gloo x${world}: ${list.length} plans, max relative error vs cpu runtime o ${f(worst.o)} dq ${f(worst.dq)} dk ${f(worst.dk)} dv ${f(worst.dv)}`,
      );
    });
    list.forEach((c, i) => {
      it(`${c.name}: outputs match the cpu runtime and the float64 reference`, async () => {
        const torchOut = results.get(c.name);
        assert.ok(torchOut);
        const cpu = await getExecutor('cpu').run(c.plan, inputs[i], { pool });
        assert.ok(cpu.outputs);
        const e = err(torchOut, cpu.outputs);
        for (const k of ['o', 'dq', 'dk', 'dv'] as const) {
          worst[k] = Math.max(worst[k], e[k]);
          assert.ok(e[k] <= MAX_ERROR, `${k}: relative error ${e[k]} vs cpu runtime > ${MAX_ERROR}`);
        }
        const ref = compareOutputs(torchOut, referenceAttention(c.plan.model, c.plan.mask, inputs[i]!));
        for (const k of ['o', 'dq', 'dk', 'dv'] as const)
          assert.ok(ref[k] <= MAX_ERROR, `${k}: relative error ${ref[k]} vs reference > ${MAX_ERROR}`);
      });
    });
  });

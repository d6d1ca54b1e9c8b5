import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { cpuExecutor } from '../../src/executors/cpu/executor.ts';
import { CpuWorkerPool, liveWorkers } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { compareOutputs, referenceAttention } from '../../src/executors/reference.ts';
import { executorNames, getExecutor, numericExecutors } from '../../src/executors/registry.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import type { Plan } from '../../src/plan/types.ts';
import { type Problem, resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
import { chunkPlan, shuffledPlan } from './cpu-plans.ts';

const pool = new CpuWorkerPool();
after(() => pool.close());

const problem = (world: number, mask: 'causal' | 'full', batch: number[], model = SMALL_MODEL): Problem =>
  resolveProblem({ batch, world, mask, model, seed: 1 });

async function maxError(plan: Plan, seed = 1): Promise<number> {
  const inputs = randomInputsForPlan(plan, seed);
  const res = await cpuExecutor.run(plan, inputs, { pool });
  const e = compareOutputs(res.outputs!, referenceAttention(plan.model, plan.mask, inputs));
  return Math.max(e.o, e.dq, e.dk, e.dv);
}

describe('cpu executor', () => {
  it('is registered as a numeric executor', () => {
    assert.ok(executorNames().includes('cpu'));
    assert.equal(getExecutor('cpu'), cpuExecutor);
    assert.ok(numericExecutors().includes(cpuExecutor));
    assert.throws(
      () => getExecutor('nope'),
      (e: unknown) => e instanceof FcpError && e.code === 'executor.unknown',
    );
  });

  for (const [name, build] of [
    ['simplePlan (kv, dkv)', (p: Problem) => simplePlan(p)],
    ['reshuffle (in, kv from home, out, sendAfter)', (p: Problem) => shuffledPlan(p, 1)],
    ['reshuffle by 3 ranks', (p: Problem) => shuffledPlan(p, 3)],
    ['chunk rows (userChunks, homeChunks, chunkTasks, chunkTransfers)', (p: Problem) => chunkPlan(p)],
  ] as const)
    for (const mask of ['causal', 'full'] as const)
      it(`matches the float64 reference: ${name}, ${mask}`, async () => {
        const plan = build(problem(4, mask, [70, 3, 150, 33, 1, 99]));
        const err = await maxError(plan);
        assert.ok(err <= 1e-6, `max relative error ${err}`);
      });

  it('handles MHA, MQA and odd head dims', async () => {
    for (const model of [
      { qHeads: 2, kvHeads: 2, headDim: 8, bytesPerElement: 4 },
      { qHeads: 3, kvHeads: 1, headDim: 5, bytesPerElement: 4 },
    ]) {
      const err = await maxError(shuffledPlan(problem(3, 'causal', [40, 17, 60], model), 2));
      assert.ok(err <= 1e-6, `${JSON.stringify(model)}: ${err}`);
    }
  });

  it('is deterministic: the same plan and inputs give byte-identical outputs', async () => {
    const plan = shuffledPlan(problem(4, 'causal', [120, 64, 80]), 1);
    const inputs = randomInputsForPlan(plan, 9);
    const a = await cpuExecutor.run(plan, inputs, { pool });
    const b = await cpuExecutor.run(plan, inputs, { pool });
    for (const k of ['o', 'dq', 'dk', 'dv'] as const)
      for (let s = 0; s < plan.sequences.length; s++)
        assert.deepEqual(Buffer.from(a.outputs![k][s]!.buffer), Buffer.from(b.outputs![k][s]!.buffer));
  });

  it('reports per-rank timings of both phases', async () => {
    const plan = simplePlan(problem(3, 'causal', [90, 40]));
    const res = await cpuExecutor.run(plan, randomInputsForPlan(plan, 1), { pool });
    assert.equal(res.executor, 'cpu');
    assert.equal(res.perRank.forward.length, 3);
    assert.equal(res.perRank.backward.length, 3);
    for (const t of [...res.perRank.forward, ...res.perRank.backward]) {
      assert.ok(t.computeMs >= 0 && t.commMs >= 0 && t.idleMs >= 0);
    }
    assert.ok(res.forwardMs > 0 && res.backwardMs > 0);
  });

  it('refuses bad inputs with FcpError codes (exit 2 in the CLI)', async () => {
    const plan = simplePlan(problem(2, 'causal', [30, 20]));
    const inputs = randomInputsForPlan(plan, 1);
    const code = async (p: Plan, i: unknown) => {
      try {
        await cpuExecutor.run(p, i as never, { pool });
      } catch (e) {
        assert.ok(e instanceof FcpError, String(e));
        return e.code;
      }
      return 'none';
    };
    assert.equal(await code(plan, undefined), 'exec.input.missing');
    assert.equal(await code(plan, { ...inputs, q: inputs.q.slice(0, 1) }), 'exec.input.sequences');
    assert.equal(
      await code(plan, { ...inputs, k: [inputs.k[0]!.subarray(1), inputs.k[1]!] }),
      'exec.input.length',
    );
    assert.equal(
      // Heads that do not divide: the plan itself is refused (validated before the inputs).
      await code({ ...plan, model: { ...plan.model, qHeads: 3, kvHeads: 2 } }, inputs),
      'plan.structure.model',
    );
  });

  it('refuses an invalid plan with the validator issues before starting any worker', async () => {
    const plan = simplePlan(problem(2, 'causal', [30, 20]));
    const broken = { ...plan, tasks: { ...plan.tasks, qLength: plan.tasks.qLength.map((x) => x - 1) } };
    const before = liveWorkers();
    await assert.rejects(
      cpuExecutor.run(broken, randomInputsForPlan(plan, 1)),
      (e: unknown) => e instanceof FcpError && e.issues.every((i) => i.code.startsWith('plan.')),
    );
    assert.equal(liveWorkers(), before);
  });

  it('terminates its workers after a run without a pool', async () => {
    const plan = simplePlan(problem(2, 'full', [20, 10]));
    await cpuExecutor.run(plan, randomInputsForPlan(plan, 1));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(liveWorkers(), pool.size);
  });
});

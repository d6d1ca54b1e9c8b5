/**
 * The laws catch broken executors: a CPU runtime that loses one dK/dV push (the plan it runs has a
 * `dkv` transfer dropped, validation bypassed) fails the numeric law, and a simulator result that
 * loses bytes or busy time fails the simulator's law.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CpuWorkerPool } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { getExecutor } from '../../src/executors/registry.ts';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { clonePlan, removeTransfer } from '../plan/mutate.ts';
import { numericLaw, simLaw } from './laws.ts';

const pool = new CpuWorkerPool();
after(async () => {
  await pool.close();
});

function fcpPlan(): Plan {
  const problem = resolveProblem({
    batch: [90, 40, 130, 17, 64],
    world: 4,
    mask: 'causal',
    model: { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 4 },
  });
  return getPlanner('fcp').plan(problem, { blockSize: 16, coalesce: 2 });
}

describe('the laws reject broken executors', () => {
  it('a cpu runtime that drops a dkv push fails the numeric law; the intact one passes', async () => {
    const plan = fcpPlan();
    const inputs = randomInputsForPlan(plan, 3);
    const good = await getExecutor('cpu').run(plan, inputs, { pool });
    numericLaw(plan, inputs, good.outputs);
    const t = plan.backward.transfers;
    const dkv = Array.from(t.kind).indexOf(Kind.dkv);
    assert.ok(dkv >= 0, 'the plan has a dkv push');
    const broken = clonePlan(plan);
    removeTransfer(broken.backward, dkv);
    const bad = await getExecutor('cpu').run(broken, inputs, { pool, skipValidation: true });
    assert.throws(() => numericLaw(plan, inputs, bad.outputs), /relative error/);
  });

  it('a simulator result that loses bytes or busy time fails the simulator law', () => {
    const plan = fcpPlan();
    const r = simulatePlan(plan, { cluster: resolveCluster('hopper-ib'), padding: false });
    simLaw(plan, r);
    const lostBytes = {
      ...r,
      backward: { ...r.backward, bytes: { ...r.backward.bytes, dkv: r.backward.bytes.dkv / 2 } },
    };
    assert.throws(() => simLaw(plan, lostBytes), /dkv bytes moved/);
    const computeMs = [...r.forward.computeMs];
    computeMs[1] = computeMs[1]! * 0.9;
    const lostBusy = { ...r, forward: { ...r.forward, computeMs } };
    assert.throws(() => simLaw(plan, lostBusy), /rank 1 busy/);
  });
});

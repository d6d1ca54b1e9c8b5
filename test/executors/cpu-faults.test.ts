import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { type CpuRunOptions, cpuExecutor } from '../../src/executors/cpu/executor.ts';
import { CpuWorkerPool, liveWorkers } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { compareOutputs, referenceAttention } from '../../src/executors/reference.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { Kind, type Phase, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
import { shuffledPlan } from './cpu-plans.ts';

const pool = new CpuWorkerPool();
after(() => pool.close());

const problem = (world: number) =>
  resolveProblem({ batch: [90, 41, 77, 12], world, mask: 'causal', model: SMALL_MODEL, seed: 1 });

/** Runs and returns the FcpError it fails with, and how long it took. */
async function failure(plan: Plan, options: CpuRunOptions): Promise<{ error: FcpError; ms: number }> {
  const t0 = performance.now();
  try {
    await cpuExecutor.run(plan, randomInputsForPlan(plan, 1), options);
  } catch (e) {
    assert.ok(e instanceof FcpError, `expected FcpError, got ${String(e)}`);
    return { error: e, ms: performance.now() - t0 };
  }
  assert.fail('the run should have failed');
}

async function noWorkerLeft(): Promise<void> {
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(liveWorkers(), pool.size, 'every worker of a failed run is terminated');
}

/** Max relative error of a run (validation skipped) against the reference. */
async function runError(plan: Plan): Promise<number> {
  const inputs = randomInputsForPlan(plan, 1);
  const res = await cpuExecutor.run(plan, inputs, { pool, skipValidation: true });
  const e = compareOutputs(res.outputs!, referenceAttention(plan.model, plan.mask, inputs));
  return Math.max(e.o, e.dq, e.dk, e.dv);
}

/** A copy of `ph` with transfer row `t` appended again (same round), with its sendAfter pairs. */
function duplicateTransfer(ph: Phase, t: number): Phase {
  const T = ph.transfers;
  const add = <A extends Int32Array | Uint8Array>(a: A): A => {
    const out = new (a.constructor as { new (n: number): A })(a.length + 1);
    out.set(a);
    out[a.length] = a[t]!;
    return out;
  };
  const n = T.round.length;
  const pairs: [number, number][] = [];
  for (let i = 0; i < ph.sendAfter.transfer.length; i++) {
    pairs.push([ph.sendAfter.transfer[i]!, ph.sendAfter.compute[i]!]);
    if (ph.sendAfter.transfer[i] === t) pairs.push([n, ph.sendAfter.compute[i]!]);
  }
  return {
    ...ph,
    transfers: {
      round: add(T.round),
      src: add(T.src),
      dst: add(T.dst),
      kind: add(T.kind),
      seq: add(T.seq),
      start: add(T.start),
      length: add(T.length),
    },
    sendAfter: {
      transfer: Int32Array.from(pairs, (p) => p[0]),
      compute: Int32Array.from(pairs, (p) => p[1]),
    },
  };
}

/** A copy of `ph` whose compute ops no longer run task `task`. */
function dropTask(ph: Phase, task: number): Phase {
  const c = ph.compute;
  const offsets = new Int32Array(c.taskOffsets.length);
  const ids: number[] = [];
  for (let op = 0; op < c.rank.length; op++) {
    for (let i = c.taskOffsets[op]!; i < c.taskOffsets[op + 1]!; i++)
      if (c.taskIds[i] !== task) ids.push(c.taskIds[i]!);
    offsets[op + 1] = ids.length;
  }
  return { ...ph, compute: { ...c, taskOffsets: offsets, taskIds: Int32Array.from(ids) } };
}

describe('cpu executor faults', () => {
  it('a worker that throws stops the run within 10 s, naming the rank and the op', async () => {
    const plan = simplePlan(problem(4));
    const { error, ms } = await failure(plan, { inject: { rank: 2, phase: 0, op: 1, action: 'throw' } });
    assert.equal(error.code, 'exec.worker');
    assert.match(error.message, /rank 2 failed in forward compute op \d+/);
    // Rank, phase and op are fields of the error, not only words in its message.
    assert.equal(error.issues[0]?.rank, 2);
    assert.equal(error.issues[0]?.phase, 'forward');
    assert.equal(typeof error.issues[0]?.op, 'number');
    assert.ok(ms < 10000, `took ${ms} ms`);
    await noWorkerLeft();
  });

  it('a worker that exits stops the run within 10 s, naming the rank and the op', async () => {
    const plan = simplePlan(problem(4));
    const { error, ms } = await failure(plan, { inject: { rank: 1, phase: 1, op: 0, action: 'exit' } });
    assert.equal(error.code, 'exec.exit');
    assert.match(error.message, /rank 1's worker exited \(code 7\) during backward compute op \d+/);
    assert.equal(error.issues[0]?.rank, 1);
    assert.equal(error.issues[0]?.phase, 'backward');
    assert.equal(typeof error.issues[0]?.op, 'number');
    assert.ok(ms < 10000, `took ${ms} ms`);
    await noWorkerLeft();
  });

  it('a hung worker is reported by the watchdog and terminated', async () => {
    const plan = simplePlan(problem(3));
    const { error, ms } = await failure(plan, {
      stallTimeoutMs: 400,
      inject: { rank: 0, phase: 0, op: 0, action: 'hang' },
    });
    assert.equal(error.code, 'exec.stall');
    assert.match(error.message, /rank 0: forward compute op/);
    assert.ok(ms < 10000, `took ${ms} ms`);
    await noWorkerLeft();
  });

  it('a receive with no matching send: refused by the validator; with validation skipped the watchdog reports the stall', async () => {
    const plan = simplePlan(problem(4));
    const t = plan.forward.transfers.kind.indexOf(Kind.kv);
    assert.ok(t >= 0);
    const src = plan.forward.transfers.src.slice();
    src[t] = plan.world; // a rank that does not exist: nobody sends transfer t
    const bad: Plan = {
      ...plan,
      forward: { ...plan.forward, transfers: { ...plan.forward.transfers, src } },
    };
    assert.ok(validatePlan(bad).issues.length > 0);
    const refused = await failure(bad, { pool });
    assert.ok(refused.error.code.startsWith('plan.'), refused.error.code);
    const { error, ms } = await failure(bad, { pool, skipValidation: true, stallTimeoutMs: 400 });
    assert.equal(error.code, 'exec.stall');
    assert.match(
      error.message,
      new RegExp(`rank ${plan.forward.transfers.dst[t]}: forward group \\d+, waiting for transfer ${t}\\b`),
    );
    assert.ok(ms < 10000, `took ${ms} ms`);
    await noWorkerLeft();
  });

  it('data missing at a task (validation skipped) fails naming the rank, the op and the tokens', async () => {
    const plan = shuffledPlan(problem(4), 1);
    const T = plan.forward.transfers;
    const t = T.kind.indexOf(Kind.in);
    const start = T.start.slice();
    const length = T.length.slice();
    start[t]! += 1; // the first token of the row never reaches its home
    length[t]! -= 1;
    const bad: Plan = { ...plan, forward: { ...plan.forward, transfers: { ...T, start, length } } };
    const { error } = await failure(bad, { skipValidation: true });
    assert.equal(error.code, 'exec.worker');
    assert.match(
      error.message,
      new RegExp(
        `rank ${T.dst[t]} failed in forward compute op \\d+ \\(task \\d+.*lacks Q\\b.* of token ${T.start[t]}\\b`,
      ),
    );
    await noWorkerLeft();
  });

  it('a sendAfter that cannot be honoured (rule 5) fails instead of deadlocking', async () => {
    const plan = simplePlan(problem(4));
    const b = plan.backward;
    const i = 0; // first sendAfter pair: make its op wait for the transfer's own group
    const t = b.sendAfter.transfer[i]!;
    const op = b.sendAfter.compute[i]!;
    const afterCol = b.compute.after.slice();
    afterCol[op] = b.groupOfRound[b.transfers.round[t]!]!;
    const bad: Plan = { ...plan, backward: { ...b, compute: { ...b.compute, after: afterCol } } };
    assert.ok(validatePlan(bad).issues.some((x) => x.code.startsWith('plan.rule5')));
    const { error } = await failure(bad, { skipValidation: true, stallTimeoutMs: 5000 });
    assert.equal(error.code, 'exec.worker');
    assert.match(error.message, /deadlocks \(rule 5\)/);
  });

  it('a dropped task makes the comparison fail (and the validator refuses the plan)', async () => {
    const plan = simplePlan(problem(4));
    const bad: Plan = { ...plan, forward: dropTask(plan.forward, 3), backward: dropTask(plan.backward, 3) };
    assert.ok(validatePlan(bad).issues.length > 0);
    assert.ok((await runError(plan)) < 1e-6);
    const err = await runError(bad);
    assert.ok(err > 1e-3, `error ${err}`);
  });

  it('a dkv delivered twice makes the comparison fail (and the validator refuses the plan)', async () => {
    const plan = simplePlan(problem(4));
    const t = plan.backward.transfers.kind.indexOf(Kind.dkv);
    assert.ok(t >= 0);
    const bad: Plan = { ...plan, backward: duplicateTransfer(plan.backward, t) };
    assert.ok(validatePlan(bad).issues.length > 0);
    const err = await runError(bad);
    assert.ok(err > 1e-3, `error ${err}`);
  });

  it('an aborted run stops and terminates its workers', async () => {
    const plan = simplePlan(problem(3));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const { error } = await failure(plan, {
      signal: ac.signal,
      inject: { rank: 1, phase: 0, op: 0, action: 'hang' },
    });
    assert.equal(error.code, 'exec.aborted');
    await noWorkerLeft();
  });
});

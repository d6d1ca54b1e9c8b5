/**
 * Chained rounds (`--comm-coalesce`, `Phase.commGroupOfRound`): compute coalescing and
 * communication grouping are independent. A plan with comm groups of k rounds is valid, keeps
 * congestion 1 and Δ `kv` rounds, has at most k rounds in flight per comm group, survives the plan
 * file, and the CPU runtime computes the same attention with it; the validator rejects broken
 * chains; without chaining the plan carries no comm groups at all.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { formatIssue } from '../../src/core/issues.ts';
import { cpuExecutor } from '../../src/executors/cpu/executor.ts';
import { CpuWorkerPool } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { compareOutputs, referenceAttention } from '../../src/executors/reference.ts';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { chainsAsGroups, planChainsAsGroups } from '../../src/plan/chains.ts';
import { planFromJson, planToJson } from '../../src/plan/io.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { codeOf } from '../helpers/errors.ts';

const problem = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 7 });

function check(plan: Plan, label: string): void {
  const { issues, report } = validatePlan(plan);
  assert.deepEqual(issues.slice(0, 3).map(formatIssue), [], `${label}: plan breaks a rule`);
  for (const ph of ['forward', 'backward'] as const) {
    assert.equal(report[ph].congestion, 1, `${label}: ${ph} congestion`);
    assert.equal(report[ph].kvRounds, report[ph].kvDirectDelta, `${label}: ${ph} kv rounds = Δ`);
  }
}

test('comm groups hold at most k rounds of one group, numbered in round order', () => {
  for (const k of [1, 3, 8]) {
    const plan = fcpPlanner.plan(problem, { coalesce: 8, commCoalesce: k, blockSize: 1024 });
    check(plan, `k=${k}`);
    for (const ph of [plan.forward, plan.backward]) {
      const c = ph.commGroupOfRound;
      if (k >= 8) {
        assert.equal(c, undefined, 'no chains when a comm group is a whole group');
        continue;
      }
      assert.ok(c, `k=${k}: chained plan carries comm groups`);
      const size = new Map<number, number>();
      for (let r = 0; r < c.length; r++) size.set(c[r]!, (size.get(c[r]!) ?? 0) + 1);
      assert.ok(Math.max(...size.values()) <= k, `k=${k}: a comm group has more than k rounds`);
      assert.ok(size.size > 1 + Math.max(...ph.groupOfRound), `k=${k}: groups are split`);
      // The executors' view: comm groups as groups, still a valid plan.
      const flat = chainsAsGroups(ph);
      assert.equal(flat.commGroupOfRound, undefined);
      assert.deepEqual(flat.groupOfRound, c);
    }
    check(planChainsAsGroups(plan), `k=${k} as groups`);
  }
});

test('compute coalescing is unchanged by comm grouping: same tasks and ops', () => {
  const a = fcpPlanner.plan(problem, { coalesce: 8, blockSize: 1024 });
  const b = fcpPlanner.plan(problem, { coalesce: 8, commCoalesce: 1, blockSize: 1024 });
  assert.deepEqual(b.tasks, a.tasks);
  assert.deepEqual(b.homeLayout, a.homeLayout);
  // Comm grouping changes the estimated timeline, so pushes may move, but ops stay per group.
  assert.ok(b.forward.compute.rank.length > 0);
});

test('comm groups survive the plan file and the plan stays byte-identical per input', () => {
  const plan = fcpPlanner.plan(problem, { commCoalesce: 2 });
  const text = planToJson(plan);
  assert.equal(planToJson(fcpPlanner.plan(problem, { commCoalesce: 2 })), text);
  const back = planFromJson(JSON.parse(text));
  assert.ok(back.forward.commGroupOfRound instanceof Int32Array);
  assert.deepEqual(back.forward.commGroupOfRound, plan.forward.commGroupOfRound);
  assert.equal(planToJson(back), text);
});

test('the validator rejects broken chains', () => {
  const plan = fcpPlanner.plan(problem, { coalesce: 8, commCoalesce: 2, blockSize: 1024 });
  const c = plan.forward.commGroupOfRound!;
  const g = plan.forward.groupOfRound;
  const codes = (mut: (x: Int32Array) => Int32Array): string[] => {
    const bad = { ...plan, forward: { ...plan.forward, commGroupOfRound: mut(c.slice()) } };
    return [...new Set(validatePlan(bad).issues.map((i) => i.code))];
  };
  assert.deepEqual(
    codes((x) => x.subarray(1)),
    ['plan.rule5.chain'],
    'wrong length',
  );
  assert.deepEqual(
    codes((x) => x.map((v) => v + 1)),
    ['plan.rule5.chain'],
    'does not start at 0',
  );
  assert.deepEqual(
    codes((x) => {
      x[x.length - 1] = x[x.length - 1]! + 2;
      return x;
    }),
    ['plan.rule5.chain'],
    'skips a number',
  );
  // A comm group spanning two groups: the first round of group 1 joins the last comm group of group 0.
  const firstOf1 = g.indexOf(1);
  assert.ok(firstOf1 > 0);
  assert.deepEqual(
    codes((x) => {
      const d = x[firstOf1]! - x[firstOf1 - 1]!;
      for (let r = firstOf1; r < x.length; r++) x[r] = x[r]! - d;
      return x;
    }),
    ['plan.rule5.chain'],
    'spans two groups',
  );
});

test('a bad --comm-coalesce is an option error', () => {
  assert.equal(
    codeOf(() => resolveFcpOptions({ commCoalesce: 0 })),
    'option.commCoalesce',
  );
  assert.equal(
    codeOf(() => resolveFcpOptions({ commCoalesce: 1.5 })),
    'option.commCoalesce',
  );
});

const pool = new CpuWorkerPool();
after(() => pool.close());

test('the CPU runtime computes the same attention from a chained plan', async () => {
  const model = { qHeads: 4, kvHeads: 2, headDim: 16, bytesPerElement: 4 };
  const small = resolveProblem({
    batch: [200, 64, 33, 120, 17, 90],
    world: 4,
    model,
    seed: 3,
    memoryTokens: 1000,
  });
  for (const mask of ['causal', 'full'] as const) {
    const p = { ...small, mask };
    const plan = fcpPlanner.plan(p, { blockSize: 32, coalesce: 4, commCoalesce: 1 });
    assert.ok(plan.forward.commGroupOfRound, 'the plan is chained');
    check(plan, mask);
    const inputs = randomInputsForPlan(plan, 5);
    const res = await cpuExecutor.run(plan, inputs, { pool });
    assert.ok(res.outputs);
    const e = compareOutputs(res.outputs, referenceAttention(plan.model, plan.mask, inputs));
    for (const k of ['o', 'dq', 'dk', 'dv'] as const) assert.ok(e[k] <= 1e-5, `${mask} ${k}: ${e[k]}`);
  }
});

test('the simulator runs comm groups one after another', () => {
  const p = resolveProblem({ batch: 'longtail', world: 32, tokensPerRank: 8192, seed: 2 });
  const plan = fcpPlanner.plan(p, { commCoalesce: 1 });
  assert.ok(plan.forward.commGroupOfRound);
  const chained = simulatePlan(plan);
  const asGroups = simulatePlan(planChainsAsGroups(plan));
  const { commGroupOfRound: _f, ...fwd } = plan.forward;
  const { commGroupOfRound: _b, ...bwd } = plan.backward;
  const ignored = simulatePlan({ ...plan, forward: fwd, backward: bwd });
  assert.equal(chained.forward.makespanMs, asGroups.forward.makespanMs);
  assert.equal(chained.backward.makespanMs, asGroups.backward.makespanMs);
  assert.ok(Number.isFinite(chained.forward.makespanMs) && chained.forward.makespanMs > 0);
  // Ignoring the chains runs every round of a group at once: a different (simulated) timeline.
  assert.notEqual(
    chained.forward.makespanMs + chained.backward.makespanMs,
    ignored.forward.makespanMs + ignored.backward.makespanMs,
  );
});

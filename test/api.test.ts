/** The public library entry point: the documented example runs end to end. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  getPlanner,
  planFromJson,
  planToJson,
  resolveCluster,
  resolveProblem,
  simulatePlan,
  validatePlan,
} from '../src/index.ts';

test('library example: plan, validate, round-trip and simulate a small batch', () => {
  const problem = resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 4096, seed: 3 });
  const plan = getPlanner('fcp').plan(problem);
  const { issues, report } = validatePlan(plan);
  assert.deepEqual(issues, []);
  assert.equal(report.forward.congestion, 1);
  const again = planFromJson(JSON.parse(planToJson(plan)));
  assert.equal(planToJson(again), planToJson(plan));
  const sim = simulatePlan(plan, { cluster: resolveCluster('hopper-ib') });
  assert.ok(sim.forward.makespanMs > 0 && sim.forward.mfu > 0 && sim.forward.mfu < 1);
});

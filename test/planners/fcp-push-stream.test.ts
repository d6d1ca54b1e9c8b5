/**
 * Mode (a)'s backward runs its pushes on a second comm stream (Phase.pushStream, backward.ts):
 * which plans carry the flag, and that a plan made for one stream runs to the end with two (no op
 * reads what a push brings, so the second stream only relaxes the order) and is valid either way.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const fcp = getPlanner('fcp');

test('mode (a) runs its backward pushes on a second stream; the forward, mode (b) and the ablation do not', () => {
  const problem = resolveProblem({ batch: 'longtail', world: 16, seed: 1 });
  const a = fcp.plan(problem);
  assert.equal(a.backward.pushStream, true);
  assert.equal(a.forward.pushStream, undefined);
  assert.equal(fcp.plan(problem, { loaderLayout: true }).backward.pushStream, undefined);
  const off = fcp.plan(problem, { noPushStream: true });
  assert.equal(off.backward.pushStream, undefined);
  // The flag is all the ablation changes.
  delete a.backward.pushStream;
  assert.deepEqual(off.backward, a.backward);
});

test('a phase with no reshuffle has no pushes of its own to move: one rank keeps one stream', () => {
  const one = fcp.plan(resolveProblem({ batch: 'longtail', world: 1, seed: 1 }));
  assert.equal(one.backward.pushStream, undefined);
});

test('over random batches, mode (a) plans are valid and finish with one stream and with two', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(4, 8, 16),
      fc.constantFrom('longtail', 'magi', 'bimodal'),
      fc.integer({ min: 1, max: 1000 }),
      (world, batch, seed) => {
        const plan = fcp.plan(resolveProblem({ batch, world, seed, tokensPerRank: 8192 }));
        assert.deepEqual(validatePlan(plan).issues, []);
        const two = simulatePlan(plan, { skipValidation: true });
        assert.ok(Number.isFinite(two.backward.makespanMs) && two.backward.makespanMs > 0);
        const one = simulatePlan(
          { ...plan, backward: { ...plan.backward, pushStream: false } },
          { skipValidation: true },
        );
        assert.ok(Number.isFinite(one.backward.makespanMs));
        // The forward is the same phase either way.
        assert.equal(one.forward.makespanMs, two.forward.makespanMs);
      },
    ),
    { numRuns: 12, seed: 46 },
  );
});

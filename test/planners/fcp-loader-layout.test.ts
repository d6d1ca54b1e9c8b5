/**
 * `loaderLayout`: FCP planned as if the loader delivered its home layout. The second planning sees a
 * user layout with several rows of one sequence on one rank, which the even split never produces.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

test('loaderLayout plans are valid, congestion-free and move fewer in/out bytes (property)', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(2, 3, 8, 16),
      fc.integer({ min: 0, max: 1000 }),
      fc.constantFrom('causal', 'full'),
      fc.constantFrom(128, 512, 1024),
      (world, seed, mask, blockSize) => {
        const problem = resolveProblem({ batch: 'longtail', world, tokensPerRank: 4096, seed, mask });
        const base = validatePlan(fcpPlanner.plan(problem, { blockSize }));
        const loaded = validatePlan(fcpPlanner.plan(problem, { blockSize, loaderLayout: true }));
        assert.deepEqual(loaded.issues.slice(0, 3).map(formatIssue), []);
        for (const ph of ['forward', 'backward'] as const) {
          assert.ok(loaded.report[ph].congestion <= 1);
          assert.equal(loaded.report[ph].kvRounds, loaded.report[ph].kvDelta);
        }
        const inOut = (r: typeof base.report): number => r.forward.bytes.in + r.forward.bytes.out;
        assert.ok(inOut(loaded.report) <= inOut(base.report) * 1.05 + 1, `world ${world} seed ${seed}`);
      },
    ),
    { seed: 5, numRuns: 30 },
  );
});

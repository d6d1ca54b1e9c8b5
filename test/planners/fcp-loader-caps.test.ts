/**
 * Mode (b)'s token-cap search never keeps a cap whose memory fallback shrank the blocks
 * (loader-caps.ts, capKept): its cost leaves launch overheads out, so it cannot see what smaller
 * blocks cost. The regression case is a real one: under the H100 calibration of GPU run 17a
 * (docs/results-gpu/h100-run17a-calibrate.json, launch overhead about twice the shipped H200
 * table's), `longtail` 16 seed 3 used to keep cap 1.02 with 1024-token blocks.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { calibrationFromOption } from '../../src/cost/calibration.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { capKept, LOADER_CAPS, layoutAtCap, shrinksBlocks } from '../../src/planners/fcp/loader-caps.ts';
import { resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const RUN17A = 'docs/results-gpu/h100-run17a-calibrate.json';

test('shrinksBlocks: true exactly when some sequence has a smaller block than the reference', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(512, 1024, 2048, 4096), fc.constantFrom(512, 1024, 2048, 4096)), {
        minLength: 1,
        maxLength: 12,
      }),
      (pairs) => {
        const a = Int32Array.from(pairs.map((p) => p[0]));
        const ref = Int32Array.from(pairs.map((p) => p[1]));
        assert.equal(
          shrinksBlocks(a, ref),
          pairs.some(([x, r]) => x < r),
        );
        assert.equal(capKept(a, ref), !shrinksBlocks(a, ref));
        assert.equal(capKept(a, null), true);
      },
    ),
    { seed: 37, numRuns: 200 },
  );
});

test('the cap search keeps no cap whose blocks shrank, where the least cost is such a cap', () => {
  const calibration = calibrationFromOption(RUN17A);
  const problem = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 32768, seed: 3 });
  const o = resolveFcpOptions({ calibration });
  const kernel = new KernelTime(problem.model, calibration);
  const layouts = LOADER_CAPS.map((cap) => layoutAtCap(problem, o, kernel, cap));
  const reference = layouts[0]!.blockSize;
  const cheapest = layouts.reduce((m, c) => (c.cost < m.cost ? c : m));
  // The case is exercised: the cheapest cap by the search's cost shrank the blocks.
  assert.ok(shrinksBlocks(cheapest.blockSize, reference), `cheapest cap ${cheapest.cap} kept its blocks`);
  // Given the reference, the search does not score that cap (it could not keep it): same layout.
  const skipped = layoutAtCap(problem, o, kernel, cheapest.cap, true, reference);
  assert.deepEqual(skipped.layout, cheapest.layout);
  assert.ok(Number.isNaN(skipped.cost));
  const plan = fcpPlanner.plan(problem, { loaderLayout: true, calibration });
  const meta = plan.meta as {
    loaderLayout: { tokenCap: number | null };
    stats: { blockSize: { min: number } };
  };
  const kept = layouts.find((c) => (Number.isFinite(c.cap) ? c.cap : null) === meta.loaderLayout.tokenCap);
  assert.ok(kept !== undefined);
  assert.ok(!shrinksBlocks(kept.blockSize, reference), `kept cap ${kept.cap} shrank the blocks`);
  assert.equal(meta.stats.blockSize.min, Math.min(...reference));
});

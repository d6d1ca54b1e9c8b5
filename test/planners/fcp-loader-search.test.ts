/**
 * Mode (b)'s planning budget (loader-search.ts): no budget runs the full search (one token cap
 * from ONE_CAP_FROM ranks); a budget picks
 * the richest level whose modelled time fits (never a poorer one for a larger budget), and the
 * plan records the level and plans only what the level allows.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { planToJson } from '../../src/plan/io.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import {
  LOADER_SEARCHES,
  loaderSearch,
  loaderSearchMs,
  ONE_CAP_FROM,
} from '../../src/planners/fcp/loader-search.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const index = (world: number, budget: number | undefined): number =>
  LOADER_SEARCHES.indexOf(loaderSearch(world, budget));

test('loaderSearch: full without a budget (one cap from ONE_CAP_FROM ranks); a larger budget never buys a poorer level; the level fits', () => {
  assert.equal(loaderSearch(ONE_CAP_FROM - 1, undefined).name, 'full');
  assert.equal(loaderSearch(128, undefined).name, 'full');
  assert.equal(loaderSearch(ONE_CAP_FROM, undefined).name, 'one-cap');
  assert.equal(loaderSearch(4096, undefined).name, 'one-cap');
  // A budget still buys whatever fits, the full search included.
  assert.equal(loaderSearch(256, 1e9).name, 'full');
  assert.equal(loaderSearch(256, 0).name, 'least');
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8192 }),
      fc.double({ min: 0, max: 20000, noNaN: true }),
      fc.double({ min: 0, max: 20000, noNaN: true }),
      (world, a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        assert.ok(index(world, lo) <= index(world, hi), `world ${world}: budget ${lo} vs ${hi}`);
        const level = loaderSearch(world, hi);
        if (level.name !== 'least') assert.ok(loaderSearchMs(level, world) <= hi);
        // No richer level that fits is passed over.
        for (let i = index(world, hi) + 1; i < LOADER_SEARCHES.length; i++)
          assert.ok(loaderSearchMs(LOADER_SEARCHES[i]!, world) > hi);
      },
    ),
    { seed: 3, numRuns: 200 },
  );
});

test('loaderSearchMs: the measured times at the measured worlds, growing beyond 1024 ranks', () => {
  for (const level of LOADER_SEARCHES) {
    [16, 64, 256, 1024].forEach((w, i) => {
      assert.ok(
        Math.abs(loaderSearchMs(level, w) - level.ms[i]!) < 1e-6 * level.ms[i]!,
        `${level.name} ${w}`,
      );
    });
    assert.ok(loaderSearchMs(level, 4096) > level.ms[3]!);
  }
});

test('mode (b) plans only what the budget buys and records the level', () => {
  const problem = resolveProblem({ batch: 'longtail', world: 32, tokensPerRank: 4096, seed: 2 });
  type Meta = {
    loaderLayout: { search: string; swaps: string };
    tuning: { candidates: { fanOut: boolean }[] };
  };
  const metaOf = (o: object): [Meta, string] => {
    const plan = fcpPlanner.plan(problem, { loaderLayout: true, ...o });
    assert.deepEqual(validatePlan(plan).issues.slice(0, 3).map(formatIssue), []);
    return [plan.meta as unknown as Meta, planToJson(plan)];
  };
  const [least, bytes] = metaOf({ planBudgetMs: 0 });
  assert.equal(least.loaderLayout.search, 'least');
  assert.equal(least.loaderLayout.swaps, 'node');
  assert.equal(least.tuning.candidates.length, 1, 'one group size, no relay candidate');
  assert.equal(metaOf({ planBudgetMs: 0 })[1], bytes, 'same budget, same bytes');
  const [full] = metaOf({});
  assert.equal(full.loaderLayout.search, 'full');
  assert.ok(
    full.tuning.candidates.some((c) => c.fanOut),
    'across nodes the full search tries relays',
  );
  assert.ok(full.tuning.candidates.length >= 3);
  // Swaps anywhere, when pinned, are planned whatever the level.
  assert.equal(metaOf({ planBudgetMs: 0, loaderSwaps: 'any' })[0].loaderLayout.swaps, 'any');
});

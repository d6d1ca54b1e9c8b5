/**
 * Every baseline planner passes the validator on a seeded battery of random batches: several
 * generators and explicit random lengths, world sizes 1, 2, 3, 8, 16 (and a few larger), causal and
 * full masks, small tokens per rank; and it is deterministic.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { GENERATOR_NAMES } from '../../src/batch/generators.ts';
import { comparePlans, formatCompareTable } from '../../src/cli/compare-plans.ts';
import { FcpError } from '../../src/core/issues.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { planToJson } from '../../src/plan/io.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { planByteScale } from '../../src/planners/bytescale/index.ts';
import { planMagi } from '../../src/planners/magi/index.ts';
import { planRing } from '../../src/planners/ring/index.ts';
import type { PlannerOptions } from '../../src/planners/types.ts';
import { type Problem, resolveProblem } from '../../src/problem/problem.ts';

const BASELINES = {
  ring: planRing,
  bytescale: planByteScale,
  wlb: (p: Problem, o: PlannerOptions) => getPlanner('wlb').plan(p, o),
  magi: planMagi,
} as const;

function assertValid(name: string, problem: Problem, options: PlannerOptions = {}): void {
  const plan = BASELINES[name as keyof typeof BASELINES](problem, options);
  const { issues, report } = validatePlan(plan, { maxIssues: 5 });
  const what = `${name} world=${problem.world} mask=${problem.mask} batch=[${Array.from(problem.sequences).slice(0, 12)}${problem.sequences.length > 12 ? ',...' : ''}] ${JSON.stringify(options)}`;
  assert.deepEqual(
    issues.map((i) => `${i.code} ${i.path ?? ''}[${i.row ?? ''}]`),
    [],
    what,
  );
  assert.equal(report.attendedPairs, report.expectedPairs, what);
  assert.equal(plan.strategy, name);
}

const world = fc.constantFrom(1, 2, 3, 8, 16);
const mask = fc.constantFrom('causal', 'full');
const magiOptions = fc.record(
  { chunkSize: fc.integer({ min: 1, max: 300 }), overlapDegree: fc.integer({ min: 1, max: 4 }) },
  { requiredKeys: [] },
);

test('baselines pass the validator on generated batches (every generator, small tokens per rank)', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(...GENERATOR_NAMES),
      world,
      fc.integer({ min: 16, max: 400 }),
      mask,
      fc.integer({ min: 0, max: 1000 }),
      magiOptions,
      (batch, w, tokensPerRank, m, seed, magi) => {
        const p = resolveProblem({ batch, world: w, tokensPerRank, mask: m, seed });
        for (const name of Object.keys(BASELINES)) assertValid(name, p, name === 'magi' ? magi : {});
      },
    ),
    { seed: 42, numRuns: 60 },
  );
});

test('baselines pass the validator on explicit random batches (tiny and odd lengths)', () => {
  fc.assert(
    fc.property(
      world,
      fc.array(fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 300 })), {
        minLength: 1,
        maxLength: 14,
      }),
      mask,
      magiOptions,
      (w, lens, m, magi) => {
        const p = resolveProblem({ batch: lens, world: w, mask: m, memoryTokens: 100000 });
        for (const name of Object.keys(BASELINES)) assertValid(name, p, name === 'magi' ? magi : {});
      },
    ),
    { seed: 7, numRuns: 80 },
  );
});

test('baselines pass the validator at larger world sizes', () => {
  for (const [w, batch, m] of [
    [32, 'longtail', 'causal'],
    [48, 'bimodal', 'full'],
    [64, 'magi', 'causal'],
  ] as const) {
    const p = resolveProblem({ batch, world: w, tokensPerRank: 256, mask: m, seed: 3 });
    for (const name of Object.keys(BASELINES)) assertValid(name, p);
  }
});

test('baselines are deterministic: same problem, same bytes', () => {
  const p = resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 1024, seed: 11 });
  for (const f of Object.values(BASELINES)) assert.equal(planToJson(f(p, {})), planToJson(f(p, {})));
});

test('compare-plans: one valid row per (world, strategy) with the validator metrics and the wlb choice', () => {
  const rows = comparePlans({
    problem: { batch: 'longtail', tokensPerRank: 512, seed: 2 },
    worlds: [4, 8],
    strategies: ['ring', 'bytescale', 'wlb', 'magi'],
    planner: {},
  });
  assert.deepEqual(
    rows.map((r) => `${r.world}:${r.strategy}`),
    ['4:ring', '4:bytescale', '4:wlb', '4:magi', '8:ring', '8:bytescale', '8:wlb', '8:magi'],
  );
  for (const r of rows) {
    assert.ok(r.valid, `${r.strategy} ${r.issueCodes}`);
    assert.equal(r.bytes.in + r.bytes.out, 0, 'baselines move no reshuffle bytes');
    assert.equal(r.bytes.total, r.bytes.kv + r.bytes.dkv);
  }
  const ring8 = rows.find((r) => r.world === 8 && r.strategy === 'ring')!;
  assert.deepEqual(ring8.rounds, { forward: 7, backward: 8 });
  assert.deepEqual(ring8.congestion, { forward: 1, backward: 1 });
  assert.match(rows.find((r) => r.strategy === 'wlb')!.note, /^chose (ring|bytescale)$/);
  const table = formatCompareTable(rows);
  assert.equal(table.split('\n').length, rows.length + 1);
  assert.throws(
    () => comparePlans({ problem: {}, worlds: [2], strategies: ['ring', 'nope'], planner: {} }),
    (e: unknown) => e instanceof FcpError && e.code === 'strategy.unknown',
  );
});

test('fcp compare-plans CLI prints the table and writes -o rows atomically', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-compare-'));
  const file = join(dir, 'rows.json');
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const args = ['--world', '2,4', '--tokens-per-rank', '256', '--strategies', 'ring,magi', '-o', file];
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(root, 'src/cli.ts'), 'compare-plans', ...args],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim().split('\n').length, 5);
  const rows = JSON.parse(readFileSync(file, 'utf8')) as { strategy: string; valid: boolean }[];
  assert.deepEqual(
    rows.map((x) => x.strategy),
    ['ring', 'magi', 'ring', 'magi'],
  );
  const bad = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(root, 'src/cli.ts'), 'compare-plans', '--strategies', 'nope'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /strategy\.unknown/);
});

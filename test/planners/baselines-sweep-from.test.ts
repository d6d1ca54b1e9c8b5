/**
 * `fcp compare --baselines best --sweep-from FILE` (the headline at 4096 ranks): each baseline's
 * sweep screens only its default and its winners in an earlier run of the same batch and setting
 * (experiments/sweep-from.ts, docs/baselines.md "At 1024 ranks and more").
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { COMPARE_FORMAT, runCompare } from '../../src/cli/compare.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { sweepCandidatesFrom, unionCandidates } from '../../src/experiments/sweep-from.ts';
import { defaultConfig, tuneStrategy } from '../../src/experiments/tune.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { codeOf } from '../helpers/errors.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const problems = [1, 2].map((seed) =>
  resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed, gpusPerNode: 8 }),
);

test('tune with candidates: screens only the default and the candidates; the full sweep winner as candidate gives the full sweep result', () => {
  for (const name of ['bytescale', 'magi']) {
    const planner = getPlanner(name);
    const full = tuneStrategy(planner, problems, {}, {});
    const dflt = defaultConfig(name, problems[0]!);
    const restricted = tuneStrategy(planner, problems, {}, {}, undefined, undefined, [full.config]);
    assert.deepEqual(restricted.config, full.config, name);
    assert.equal(restricted.totalMs, full.totalMs, name);
    assert.deepEqual(
      restricted.results.map((r) => r.forward.makespanMs),
      full.results.map((r) => r.forward.makespanMs),
    );
    for (const t of restricted.trials)
      assert.ok(
        [JSON.stringify(dflt), JSON.stringify(full.config)].includes(JSON.stringify(t.config)),
        `${name}: screened ${JSON.stringify(t.config)}, not a candidate`,
      );
    assert.ok(restricted.trials.length <= 2 && restricted.trials.length < full.trials.length, name);
    // A candidate slower than the default loses to it: the result is never worse than the default.
    const worst = full.trials.reduce((x, y) => (y.totalMs > x.totalMs ? y : x));
    const r2 = tuneStrategy(planner, problems, {}, {}, undefined, undefined, [worst.config]);
    const d = tuneStrategy(planner, problems, {}, {}, undefined, undefined, []);
    assert.deepEqual(d.config, dflt);
    assert.ok(r2.totalMs <= d.totalMs + 1e-9, `${name}: ${r2.totalMs} > default ${d.totalMs}`);
  }
});

const doc = (over: Record<string, unknown> = {}) => ({
  format: COMPARE_FORMAT,
  baselines: 'best',
  batch: 'longtail',
  cluster: { name: 'hopper-ib' },
  network: 'fluid',
  rows: [
    { strategy: 'magi', world: 256, config: { overlapDegree: 1 } },
    { strategy: 'magi', world: 1024, config: { overlapDegree: 3 } },
    { strategy: 'magi', world: 1024, config: { overlapDegree: 3 } },
    { strategy: 'bytescale', world: 1024, config: { bytescalePow2: true } },
  ],
  ...over,
});
const want = { batch: 'longtail', cluster: 'hopper-ib', network: 'fluid' };

test('sweep-from: the winners at the largest world, once each; another batch, setting or untuned run is option.sweepFrom', () => {
  assert.deepEqual(sweepCandidatesFrom(doc(), COMPARE_FORMAT, want), {
    magi: [{ overlapDegree: 3 }],
    bytescale: [{ bytescalePow2: true }],
  });
  for (const bad of [
    { batch: 'magi' },
    { network: 'contention' },
    { cluster: { name: 'ratio-5920' } },
    { baselines: 'default' },
    { format: 'fcp-plan/1' },
    { rows: 'none' },
  ])
    assert.equal(
      codeOf(() => sweepCandidatesFrom(doc(bad), COMPARE_FORMAT, want)),
      'option.sweepFrom',
      JSON.stringify(bad),
    );
});

test('sweep-from with several files: each configuration once, in the order of the files', () => {
  const a = { magi: [{ overlapDegree: 3 }], bytescale: [{ bytescalePow2: true }] };
  const b = {
    magi: [{ overlapDegree: 4, chunkSize: 2048 }, { overlapDegree: 3 }],
    ring: [{ ringVariant: 'p2p' as const }],
  };
  assert.deepEqual(unionCandidates([a, b]), {
    magi: [{ overlapDegree: 3 }, { overlapDegree: 4, chunkSize: 2048 }],
    bytescale: [{ bytescalePow2: true }],
    ring: [{ ringVariant: 'p2p' }],
  });
  assert.deepEqual(unionCandidates([a, a]), a);
  assert.deepEqual(unionCandidates([]), {});
});

const cli = (args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', join(root, 'src/cli.ts'), 'compare', ...args], {
    cwd: root,
    encoding: 'utf8',
  });

test('compare --sweep-from its own output reproduces it; a mismatched file exits 2 and writes nothing', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-sweep-from-'));
  const common = [
    '--strategies',
    'bytescale,magi',
    '--world',
    '16',
    '--tokens-per-rank',
    '4096',
    '--batches',
    '2',
  ];
  const a = join(dir, 'a');
  const r1 = cli([...common, '--baselines', 'best', '--out', a]);
  assert.equal(r1.status, 0, r1.stderr);
  const b = join(dir, 'b');
  const r2 = cli([...common, '--baselines', 'best', '--sweep-from', join(a, 'compare.json'), '--out', b]);
  assert.equal(r2.status, 0, r2.stderr);
  const rows = (d: string) => JSON.parse(readFileSync(join(d, 'compare.json'), 'utf8')).rows;
  assert.deepEqual(rows(b), rows(a));
  // Several files: the union of their winners (here one winner each, twice: the same rows).
  const c = join(dir, 'c');
  const twice = `${join(a, 'compare.json')},${join(b, 'compare.json')}`;
  const r3 = cli([...common, '--baselines', 'best', '--sweep-from', twice, '--out', c]);
  assert.equal(r3.status, 0, r3.stderr);
  assert.deepEqual(rows(c), rows(a));
  const notJson = join(dir, 'not.json');
  writeFileSync(notJson, '{"format": ');
  for (const args of [
    ['--network', 'contention', '--baselines', 'best', '--sweep-from', join(a, 'compare.json')],
    ['--baselines', 'default', '--sweep-from', join(a, 'compare.json')],
    ['--baselines', 'best', '--sweep-from', join(dir, 'missing.json')],
    ['--baselines', 'best', '--sweep-from', `${join(a, 'compare.json')},${join(dir, 'missing.json')}`],
    ['--baselines', 'best', '--sweep-from', `${join(a, 'compare.json')},${notJson}`],
  ]) {
    const out = join(dir, 'bad');
    const r = cli([...common, ...args, '--out', out]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /^fcp: error: option\.sweepFrom/);
    assert.equal(existsSync(out), false);
  }
  // In-process: the same restriction through runCompare.
  const sweepFrom = sweepCandidatesFrom(
    JSON.parse(readFileSync(join(a, 'compare.json'), 'utf8')),
    COMPARE_FORMAT,
    want,
  );
  const inproc = runCompare({
    strategies: ['bytescale', 'magi'],
    worlds: [16],
    batch: 'longtail',
    batches: 2,
    seed: 1,
    tokensPerRank: 4096,
    mask: 'causal',
    gpusPerNode: 8,
    planner: {},
    sim: {},
    baselines: 'best',
    sweepFrom,
  });
  assert.deepEqual(
    inproc.map((r) => r.config),
    rows(a).map((r: { config: unknown }) => r.config),
  );
});

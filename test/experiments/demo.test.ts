import assert from 'node:assert/strict';
import { test } from 'node:test';
import { demoOptionsFrom } from '../../src/cli/demo.ts';
import { runDemo } from '../../src/experiments/demo.ts';
import { ABLATION, demoSteps, resolveDemoOptions } from '../../src/experiments/demo-options.ts';
import { plannerNames } from '../../src/experiments/strategies.ts';
import { resultsToJson } from '../../src/report/results.ts';
import { codeOf } from '../helpers/errors.ts';

const PROV = { command: 'fcp demo', fcpVersion: '0', node: 'v20', gitCommit: null, platform: 'x' };

test('resolveDemoOptions: defaults are 64 ranks x 32K of longtail, every strategy, sweep world/4..world', () => {
  const o = resolveDemoOptions();
  assert.equal(o.problem.world, 64);
  assert.equal(o.problem.tokensPerRank, 32768);
  assert.equal(o.problem.batch, 'longtail');
  assert.deepEqual(o.strategies, plannerNames());
  assert.deepEqual(o.scaling, [16, 32, 64]);
  assert.equal(o.cluster, 'hopper-ib');
  assert.deepEqual(o.numerics, { world: 8, tokensPerRank: 512 });
  assert.equal(o.ablation, true);
  assert.deepEqual(o.timeline, o.strategies);
  assert.equal(demoSteps(o), o.strategies.length * 4 + ABLATION.length);
  assert.equal(resolveDemoOptions({ strategies: ['ring'] }).ablation, false, 'no fcp, no ablation');
});

test('resolveDemoOptions rejects bad input before any work, with codes', () => {
  assert.equal(
    codeOf(() => resolveDemoOptions({ problem: { world: 0 } })),
    'option.world',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ strategies: ['fcp', 'nope'] })),
    'strategy.unknown',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ strategies: ['fcp', 'fcp'] })),
    'option.strategies',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ strategies: [] })),
    'option.strategies',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ cluster: 'abacus' })),
    'cluster.unknown',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ scaling: [8, 0] })),
    'option.scaling',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ numerics: { world: -1 } })),
    'option.numericsWorld',
  );
  assert.equal(
    codeOf(() => resolveDemoOptions({ problem: { batch: 'nope' } })),
    'batch.unknown',
  );
  assert.equal(
    codeOf(() => demoOptionsFrom({ scaling: '2,x' })),
    'option.scaling',
  );
  assert.equal(
    codeOf(() => demoOptionsFrom({ strategies: ' , ' })),
    'option.strategies',
  );
  assert.deepEqual(demoOptionsFrom({ scaling: 'none', numerics: false }).scaling, []);
  assert.equal(demoOptionsFrom({ numerics: false }).numerics, null);
});

test('runDemo: every strategy planned, validated and simulated; same options, same bytes', async () => {
  const o = resolveDemoOptions({
    problem: { world: 4, tokensPerRank: 4096, seed: 3 },
    scaling: [2, 4],
    numerics: null,
  });
  const r = await runDemo(o, PROV);
  assert.deepEqual(
    r.runs.map((x) => x.strategy),
    o.strategies,
  );
  for (const x of r.runs) {
    assert.equal(x.error, undefined, `${x.strategy}: ${x.error}`);
    assert.ok(x.valid, `${x.strategy}: ${x.issueCodes.join(', ')}`);
    assert.ok(x.mfuForward > 0 && x.mfuForward <= 1 && x.mfuBackward > 0 && x.mfuBackward <= 1, x.strategy);
  }
  assert.equal(r.scaling.length, 2 * o.strategies.length);
  // A timeline per strategy and phase, and a busy profile of all ranks for each.
  assert.deepEqual(
    r.timelines.map((t) => `${t.strategy}/${t.phase}`),
    o.strategies.flatMap((s) => [`${s}/forward`, `${s}/backward`]),
  );
  for (const t of r.timelines) assert.ok(t.events.length >= 4, t.strategy);
  assert.equal(r.busy?.length, r.timelines.length);
  for (const b of r.busy!) {
    const mean = b.compute.reduce((s, x) => s + x, 0) / b.compute.length;
    assert.ok(mean > 0 && mean <= 1 + 1e-9, `${b.strategy} ${b.phase}: mean busy share ${mean}`);
  }
  // Configuration, planning time, per-rank memory agreeing with the validator's peak.
  for (const x of r.runs) {
    assert.ok(x.config && x.config.length > 0, x.strategy);
    assert.ok(x.planMs !== undefined && x.planMs >= 0, x.strategy);
    const m = r.memory!.find((y) => y.strategy === x.strategy)!;
    assert.equal(m.peak.length, 4);
    assert.equal(Math.max(...m.peak), x.peakResidentTokens, x.strategy);
    assert.equal(
      m.home.reduce((s, t) => s + t, 0),
      r.problem.totalTokens,
      x.strategy,
    );
  }
  assert.match(r.runs.find((x) => x.strategy === 'wlb')!.config!, /^chose (ring|bytescale) \(sim estimate/);
  assert.deepEqual(
    r.ablation?.steps.map((s) => s.step),
    ABLATION.map((a) => a.step),
  );
  for (const s of r.ablation!.steps) assert.ok(s.mfuForward > 0 && s.mfuBackward > 0, s.step);
  assert.equal(r.placement?.strategy, 'fcp');
  assert.equal(
    r.placement!.cells.reduce((s, c) => s + c.tokens, 0),
    r.problem.totalTokens,
  );
  assert.equal(r.rounds[0]?.strategy, 'fcp');
  assert.equal(r.numerics.skipped !== undefined, true);
  assert.equal(r.problem.totalTokens, 4 * 4096);
  const again = await runDemo(o, PROV);
  // Planning time is a wall-clock measurement; everything else is deterministic.
  const untimed = (x: typeof r) => resultsToJson({ ...x, runs: x.runs.map(({ planMs: _, ...y }) => y) });
  assert.equal(untimed(again), untimed(r));
});

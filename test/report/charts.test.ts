import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compile, type TopLevelSpec } from 'vega-lite';
import { ablationSpec } from '../../src/report/charts/ablation.ts';
import { busySpec } from '../../src/report/charts/busy.ts';
import { bytesSpec } from '../../src/report/charts/bytes.ts';
import { imbalanceSpec } from '../../src/report/charts/imbalance.ts';
import { lengthsSpec } from '../../src/report/charts/lengths.ts';
import { memorySpec } from '../../src/report/charts/memory.ts';
import { mfuSpec } from '../../src/report/charts/mfu.ts';
import { placementSpec } from '../../src/report/charts/placement.ts';
import { roundSegments, roundsSpec } from '../../src/report/charts/rounds.ts';
import { scalingSpec } from '../../src/report/charts/scaling.ts';
import { KIND_COLORS, kindScale, strategyScale } from '../../src/report/charts/style.ts';
import { timelineSpec } from '../../src/report/charts/timeline.ts';
import { figuresOf, ranksCaption } from '../../src/report/figures.ts';
import { run, smallResults } from './fixtures.ts';

type Row = Record<string, unknown>;
const values = (spec: TopLevelSpec): Row[] => (spec as { data: { values: Row[] } }).data.values;

/** Compiles to Vega, failing on any vega-lite warning (a warning means a dropped encoding). */
function compiles(spec: TopLevelSpec): void {
  const warnings: string[] = [];
  const logger = {
    level: () => logger,
    error: (...a: unknown[]) => {
      warnings.push(a.join(' '));
      return logger;
    },
    warn: (...a: unknown[]) => {
      warnings.push(a.join(' '));
      return logger;
    },
    info: () => logger,
    debug: () => logger,
  };
  const out = compile(spec, { logger: logger as never });
  assert.ok(out.spec.marks && out.spec.marks.length > 0, 'no marks');
  assert.deepEqual(warnings, []);
  assert.ok(!JSON.stringify(spec).includes('http'), 'a spec must not reference URLs');
}

test('mfuSpec: a forward and a backward bar per strategy that ran, failed runs left out', () => {
  const failed = { ...run('magi', 2), error: 'planning failed' };
  const spec = mfuSpec([run('fcp', 0), run('ring', 1), failed]);
  assert.deepEqual(values(spec), [
    { strategy: 'fcp', label: 'fcp', phase: 'forward', mfu: 0.5 },
    { strategy: 'fcp', label: 'fcp', phase: 'backward', mfu: 0.45 },
    { strategy: 'ring', label: 'ring', phase: 'forward', mfu: 0.45 },
    { strategy: 'ring', label: 'ring', phase: 'backward', mfu: 0.41000000000000003 },
  ]);
  compiles(spec);
});

test('imbalanceSpec and bytesSpec carry the run numbers; zero-byte kinds are dropped', () => {
  const runs = [run('fcp', 0), run('ring', 1)];
  const imb = imbalanceSpec(runs);
  assert.deepEqual(
    values(imb).map((v) => [v.strategy, v.metric, v.imbalance]),
    [
      ['fcp', 'compute', 0.01],
      ['fcp', 'communication', 0.02],
      ['ring', 'compute', 0.11],
      ['ring', 'communication', 0.07],
    ],
  );
  compiles(imb);
  const b = bytesSpec(runs);
  assert.equal(values(b).length, 6); // 3 non-zero kinds x 2 strategies
  assert.deepEqual(values(b)[1], { strategy: 'fcp', phase: 'forward', kind: 'kv', gb: 2 });
  compiles(b);
});

test('scalingSpec: one point per (strategy, world, phase) on a log2 axis of the worlds', () => {
  const r = smallResults();
  const spec = scalingSpec(r.scaling, 1024);
  assert.equal(values(spec).length, 2 * 3 * 2);
  const x = (spec as { spec: { layer: { encoding: { x: { axis: { values: number[] } } } }[] } }).spec
    .layer[0]!.encoding.x;
  assert.deepEqual(x.axis.values, [2, 4, 8]);
  compiles(spec);
});

test('timelineSpec: one panel per strategy of the phase, two lanes per rank, own time axis each', () => {
  const r = smallResults();
  for (const phase of ['forward', 'backward'] as const) {
    const spec = timelineSpec(r.timelines, phase, { ring: 'running x' });
    const v = values(spec);
    assert.equal(v.length, 2 * 16); // 2 strategies x 8 ranks x 2 bars, this phase only
    assert.deepEqual([...new Set(v.map((x) => x.lane))], ['compute', 'communication']);
    const panels = [...new Set(v.map((x) => x.panel as string))];
    assert.equal(panels.length, 2);
    assert.match(panels[0]!, /^fcp: makespan 4\.00 ms \(simulated\), every rank$/);
    assert.match(panels[1]!, /^ring \(running x\): /);
    const res = (spec as { resolve: { scale: { x: string } } }).resolve.scale.x;
    assert.equal(res, 'independent');
    compiles(spec);
  }
  assert.equal(
    values(
      timelineSpec(
        r.timelines.filter((t) => t.phase === 'forward'),
        'backward',
      ),
    ).length,
    0,
  );
});

test('kind colours: compute is distinct from every transfer kind and combination', () => {
  const kinds = ['compute', 'in', 'kv', 'out', 'dkv', 'kv+out', 'in+kv', 'in+kv+out', 'weird'];
  const s = kindScale(kinds);
  assert.equal(new Set(s.range).size, kinds.length);
  assert.equal(s.range[0], KIND_COLORS.compute);
});

test('busySpec, memorySpec, lengthsSpec and ablationSpec carry the data and compile', () => {
  const r = smallResults();
  const busy = busySpec(r.busy!);
  assert.equal(values(busy).length, 2 * 2 * 2 * 5); // strategies x phases x activities x bins
  compiles(busy);
  const mem = memorySpec(r.memory!);
  assert.equal(values(mem).length, 2 * 8 * 2);
  assert.ok(values(mem).every((v) => v.limit === 1536));
  compiles(mem);
  const len = lengthsSpec(r.problem);
  assert.deepEqual(
    values(len).map((v) => [v.bucket, v.measure, v.value]),
    [
      ['512-1.0K', 'sequences', 3],
      ['512-1.0K', 'share of tokens', 2000 / 8192],
    ],
  );
  compiles(len);
  const abl = ablationSpec(r.ablation!, 'hopper-ib');
  const rows = values(abl);
  // Ours for every step; the paper's for the steps of its Table 2 (both steps here).
  assert.equal(rows.length, 2 * 2 * 2);
  assert.ok(rows.some((v) => String(v.source).startsWith('paper') && v.mfu === 0.29));
  assert.ok(rows.some((v) => String(v.source).startsWith('ours') && v.mfu === 0.5));
  compiles(abl);
});

test('mfu and scaling say which plan wlb ran; MFU axes are fractions, not percent', () => {
  const runs = [run('fcp', 0), { ...run('wlb', 1), config: 'chose bytescale (sim estimate: ...)' }];
  const m = mfuSpec(runs);
  assert.deepEqual([...new Set(values(m).map((v) => v.label))], ['fcp', 'wlb = bytescale']);
  assert.ok(!JSON.stringify(m).includes('%'));
  compiles(m);
  const pts = [4, 8, 16].flatMap((w, i) => [
    { strategy: 'fcp', world: w, mfuForward: 0.5, mfuBackward: 0.4, valid: true },
    {
      strategy: 'wlb',
      world: w,
      mfuForward: 0.3,
      mfuBackward: 0.2,
      valid: true,
      config: `chose ${i < 2 ? 'ring' : 'bytescale'}`,
    },
  ]);
  const sc = scalingSpec(pts, 1024);
  // Labelled where the pick changes: 4 (first) and 16, in both phases.
  assert.deepEqual(
    values(sc)
      .filter((v) => v.note !== '')
      .map((v) => [v.world, v.note]),
    [
      [4, 'wlb = ring'],
      [4, 'wlb = ring'],
      [16, 'wlb = bytescale'],
      [16, 'wlb = bytescale'],
    ],
  );
  assert.ok(!JSON.stringify(sc).includes('%'));
  compiles(sc);
});

test('placementSpec and roundsSpec draw the non-zero cells', () => {
  const r = smallResults();
  const p = placementSpec(r.placement!);
  assert.equal(values(p).length, r.placement!.cells.length);
  compiles(p);
  const rs = r.rounds[0]!;
  const spec = roundsSpec(rs);
  // Segments cover exactly the non-zero cells of each direction.
  for (const dir of ['sends', 'receives'] as const) {
    const covered = values(spec)
      .filter((v) => v.direction === dir)
      .reduce((s, v) => s + (v.roundEnd as number) - (v.round as number), 0);
    assert.equal(covered, rs.cells.filter((c) => c[dir] > 0).length, dir);
  }
  compiles(spec);
});

test('roundSegments merges consecutive rounds of equal count, per rank and direction', () => {
  const segs = roundSegments({
    strategy: 'x',
    phase: 'forward',
    world: 2,
    rounds: 5,
    cells: [
      { round: 0, rank: 0, sends: 1, receives: 0 },
      { round: 1, rank: 0, sends: 1, receives: 2 },
      { round: 2, rank: 0, sends: 2, receives: 0 },
      { round: 4, rank: 0, sends: 2, receives: 0 },
      { round: 0, rank: 1, sends: 0, receives: 1 },
      { round: 1, rank: 1, sends: 0, receives: 1 },
    ],
  });
  assert.deepEqual(
    segs.map((s) => [s.direction, s.rank, s.round, s.roundEnd, s.messages]),
    [
      ['sends', 0, 0, 2, 1],
      ['sends', 0, 2, 3, 2],
      ['sends', 0, 4, 5, 2],
      ['receives', 0, 1, 2, 2],
      ['receives', 1, 0, 2, 1],
    ],
  );
});

test('strategyScale: fcp keeps its colour wherever it is listed; unknown strategies get distinct colours', () => {
  const a = strategyScale(['fcp', 'ring']);
  const b = strategyScale(['ring', 'x', 'fcp', 'y']);
  assert.equal(a.range[0], b.range[2]);
  assert.equal(new Set(b.range).size, 4);
});

test('figuresOf: every figure of complete results, each compiling; empty parts are left out', () => {
  const r = smallResults();
  const figs = figuresOf(r);
  assert.deepEqual(
    figs.map((f) => f.id),
    [
      'mfu',
      'scaling',
      'ablation',
      'imbalance',
      'bytes',
      'timeline-forward',
      'timeline-backward',
      'busy',
      'memory',
      'placement',
      'rounds-fcp-forward',
      'lengths',
    ],
  );
  assert.deepEqual(
    figs.filter((f) => f.tabs).map((f) => [f.tabs!.group, f.tabs!.tab]),
    [
      ['timeline', 'forward'],
      ['timeline', 'backward'],
    ],
  );
  for (const f of figs) compiles(f.spec);
  const bare = {
    ...r,
    scaling: [],
    timelines: [],
    busy: [],
    memory: [],
    ablation: null,
    placement: null,
    rounds: [],
    problem: { ...r.problem, lengthHistogram: [] },
  };
  assert.deepEqual(
    figuresOf(bare).map((f) => f.id),
    ['mfu', 'imbalance', 'bytes'],
  );
});

test('ranksCaption says which ranks a sampled timeline draws', () => {
  const r = smallResults();
  assert.equal(ranksCaption(r.timelines), 'Every rank (8) is drawn.');
  const sampled = r.timelines.map((t) => ({ ...t, world: 256, sample: '24 of 256 ranks: every 11th rank' }));
  assert.match(ranksCaption(sampled), /^Drawn: 24 of 256 ranks: every 11th rank\./);
});

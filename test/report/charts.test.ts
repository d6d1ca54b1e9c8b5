import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compile, type TopLevelSpec } from 'vega-lite';
import { bytesSpec } from '../../src/report/charts/bytes.ts';
import { imbalanceSpec } from '../../src/report/charts/imbalance.ts';
import { mfuSpec } from '../../src/report/charts/mfu.ts';
import { placementSpec } from '../../src/report/charts/placement.ts';
import { roundSegments, roundsSpec } from '../../src/report/charts/rounds.ts';
import { scalingSpec } from '../../src/report/charts/scaling.ts';
import { strategyScale } from '../../src/report/charts/style.ts';
import { timelineSpec } from '../../src/report/charts/timeline.ts';
import { figuresOf } from '../../src/report/figures.ts';
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
    { strategy: 'fcp', phase: 'forward', mfu: 0.5 },
    { strategy: 'fcp', phase: 'backward', mfu: 0.45 },
    { strategy: 'ring', phase: 'forward', mfu: 0.45 },
    { strategy: 'ring', phase: 'backward', mfu: 0.41000000000000003 },
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
  const x = (spec as { spec: { encoding: { x: { axis: { values: number[] } } } } }).spec.encoding.x;
  assert.deepEqual(x.axis.values, [2, 4, 8]);
  compiles(spec);
});

test('timelineSpec: lanes stacked inside each rank, one panel per strategy', () => {
  const r = smallResults();
  const spec = timelineSpec(r.timelines);
  const v = values(spec);
  assert.equal(v.length, 2 * 16);
  const first = v[0]!;
  const comm = v[1]!;
  assert.equal(first.y0, 0);
  assert.equal(comm.lane, 'comm');
  assert.ok((comm.y0 as number) >= (first.y1 as number), 'the comm lane starts below the compute lane');
  assert.ok((comm.y1 as number) < 1, 'both lanes stay inside the rank');
  compiles(spec);
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
    ['mfu', 'scaling', 'imbalance', 'bytes', 'timeline', 'placement', 'rounds-fcp-forward'],
  );
  for (const f of figs) compiles(f.spec);
  const bare = { ...r, scaling: [], timelines: [], placement: null, rounds: [] };
  assert.deepEqual(
    figuresOf(bare).map((f) => f.id),
    ['mfu', 'imbalance', 'bytes'],
  );
});

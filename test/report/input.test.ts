/**
 * `fcp report`'s inputs: demo results and compare.json (converted), folders holding either, and
 * refusals with codes; large inputs (thousands of runs or rows) do not overflow the stack.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { figuresOf } from '../../src/report/figures.ts';
import { reportHtml } from '../../src/report/html.ts';
import {
  COMPARE_FORMAT,
  compareFromJson,
  compareToResults,
  readReportInput,
} from '../../src/report/input.ts';
import { resultsToJson } from '../../src/report/results.ts';
import { summaryText } from '../../src/report/summary.ts';
import { codeOf } from '../helpers/errors.ts';
import { run, smallResults } from './fixtures.ts';

/** A compare.json document as `fcp compare` writes it (only the fields the report reads, plus extras). */
function compareDoc(
  strategies: string[],
  worlds: number[],
  batches: number,
  config?: (s: string, w: number, b: number) => unknown,
) {
  const rows = worlds.flatMap((world) =>
    Array.from({ length: batches }, (_, batch) =>
      strategies.map((strategy, i) => ({
        strategy,
        world,
        batch,
        seed: 1 + batch,
        mfuForward: 0.5 - 0.1 * i + 0.01 * batch,
        mfuBackward: 0.4 - 0.1 * i,
        mfu: 0.45,
        makespans: { forwardMs: 10 + i, backwardMs: 20 + i },
        imbalances: { computeForward: 0.01 * (i + 1), commForward: 0.1, computeBackward: 0, commBackward: 0 },
        bytes: { forward: 1e9, backward: 2e9 },
        kernelMfu: { forward: 0.6, backward: 0.5 },
        exposedCommMs: { forward: 1, backward: 2 },
        ...(config ? { config: config(strategy, world, batch) } : {}),
      })),
    ).flat(),
  );
  return {
    format: COMPARE_FORMAT,
    strategies,
    worlds,
    batch: 'longtail',
    batches,
    seed: 1,
    tokensPerRank: 32768,
    mask: 'causal',
    cluster: { name: 'hopper-ib', peakTflops: 989 },
    kernel: 'auto',
    summary: [],
    rows,
  };
}

test('compareToResults: means over batches; the largest world is the summary, every world a scaling point', () => {
  const doc = compareDoc(['fcp', 'wlb'], [16, 64], 2, (s, w, b) =>
    s === 'wlb' ? { chosen: w === 16 ? 'ring' : b === 0 ? 'ring' : 'bytescale' } : undefined,
  );
  const r = compareToResults(compareFromJson(doc));
  assert.equal(r.origin, 'compare');
  assert.equal(r.problem.world, 64);
  assert.equal(r.problem.cluster, 'hopper-ib');
  assert.deepEqual(
    r.runs.map((x) => [x.strategy, x.world]),
    [
      ['fcp', 64],
      ['wlb', 64],
    ],
  );
  assert.ok(Math.abs(r.runs[0]!.mfuForward - 0.505) < 1e-12);
  assert.equal(r.runs[1]!.config, 'chose ring/bytescale (differs by batch)');
  assert.deepEqual(
    r.scaling.map((p) => [p.strategy, p.world, p.config]),
    [
      ['fcp', 16, undefined],
      ['wlb', 16, 'chose ring'],
      ['fcp', 64, undefined],
      ['wlb', 64, 'chose ring/bytescale (differs by batch)'],
    ],
  );
  // Figures compare.json has data for, and a page that says where it came from.
  assert.deepEqual(
    figuresOf(r).map((f) => f.id),
    ['mfu', 'scaling'],
  );
  const html = reportHtml(r, []);
  assert.ok(html.includes('Drawn from compare.json'));
  assert.ok(!html.includes('Numerical check'));
  assert.match(summaryText(r).split('\n')[2]!, /^fcp +n\/a +0\.505/);
});

test('readReportInput: results.json, compare.json, a folder of either; anything else refused with a code', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-input-'));
  const results = join(dir, 'results.json');
  writeFileSync(results, resultsToJson(smallResults()));
  assert.deepEqual(readReportInput(results), smallResults());
  const cmp = join(dir, 'cmp');
  mkdirSync(cmp);
  writeFileSync(join(cmp, 'compare.json'), JSON.stringify(compareDoc(['fcp', 'ring'], [8], 1)));
  assert.equal(readReportInput(join(cmp, 'compare.json')).origin, 'compare');
  assert.equal(readReportInput(cmp).origin, 'compare');
  assert.equal(readReportInput(dir).origin, 'demo');
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  assert.equal(
    codeOf(() => readReportInput(empty)),
    'results.format',
  );
  const plan = join(dir, 'plan.json');
  writeFileSync(plan, JSON.stringify({ format: 'fcp-plan/1' }));
  assert.equal(
    codeOf(() => readReportInput(plan)),
    'results.format',
  );
  writeFileSync(plan, '{');
  assert.equal(
    codeOf(() => readReportInput(plan)),
    'results.json',
  );
  const broken = compareDoc(['fcp'], [8], 1) as Record<string, unknown>;
  (broken.rows as Record<string, unknown>[])[0]!.mfuForward = 'fast';
  writeFileSync(plan, JSON.stringify(broken));
  assert.equal(
    codeOf(() => readReportInput(plan)),
    'results.schema',
  );
  assert.equal(
    codeOf(() => readReportInput(join(dir, 'missing.json'))),
    'io.read',
  );
});

test('large inputs do not overflow the stack: 6000 compare rows, 150k runs, 200k timeline bars', () => {
  const worlds = Array.from({ length: 40 }, (_, i) => 8 * (i + 1));
  const big = compareToResults(
    compareFromJson(compareDoc(['fcp', 'ring', 'bytescale', 'wlb', 'magi'], worlds, 30)),
  );
  assert.equal(big.scaling.length, 5 * 40);
  for (const f of figuresOf(big)) assert.ok(f.spec);
  assert.ok(reportHtml(big, []).length > 0);
  const r = smallResults();
  // Beyond the ~120k arguments a spread (Math.max(...xs)) can take.
  const runs = Array.from({ length: 150_000 }, (_, i) => run(`s${i}`, i % 5));
  const events = Array.from({ length: 200_000 }, (_, i) => ({
    rank: i % 8,
    lane: (i % 2) as 0 | 1,
    start: i,
    end: i + 0.5,
    kind: 'compute',
  }));
  const huge = { ...r, runs, timelines: [{ ...r.timelines[0]!, events }] };
  const figs = figuresOf(huge);
  assert.ok(figs.some((f) => f.id === 'timeline-forward'));
  assert.equal(summaryText(huge).split('\n').length, 150_002);
  assert.ok(reportHtml(huge, []).length > 0);
});

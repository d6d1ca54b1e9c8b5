/**
 * `--calibration` reaches FCP's planner as well as the simulator (`fcp plan`, `fcp compare`): a
 * plan is made for the kernel tables it is simulated with, and records which ones in
 * `meta.options.calibration`.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { calibrationNote } from '../../src/cli/simulate.ts';
import { dataPath } from '../../src/core/data-dir.ts';
import { cli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-cli-calib-'));
/** `fcp ...` in-process (test/helpers/cli.ts): its exit code and what it wrote. */
const fcp = async (args: string[]) => {
  const r = await cli(args);
  return { status: r.code, stdout: r.out, stderr: r.err };
};
const codeLine = (stderr: string): string | undefined => /^fcp: error: ([\w.]+)/m.exec(stderr)?.[1];

/** The default tables with every dense row 1.5x slower: a GPU unlike the H200 in its dense kernels. */
const slowDense = join(dir, 'slow-dense.json');
{
  const doc = JSON.parse(readFileSync(dataPath('calibration/h200-measured.json'), 'utf8'));
  for (const r of doc.rows)
    if (r.segments === undefined) {
      r.fwd_ms *= 1.5;
      if (r.bwd_ms !== undefined) r.bwd_ms *= 1.5;
    }
  writeFileSync(slowDense, JSON.stringify(doc));
}
const small = ['--world', '8', '--batch', 'longtail', '--tokens-per-rank', '8192', '--seed', '2'];
/** `fcp plan` of the small batch into `file`, quietly, with `extra` options. */
const planTo = (file: string, ...extra: string[]) =>
  fcp(['plan', ...small, '--no-compare-locality', '-q', ...extra, '-o', file]);

test('fcp plan --calibration plans with those tables and records them', async () => {
  const a = join(dir, 'default.json');
  const b = join(dir, 'slow.json');
  const ra = await planTo(a);
  assert.equal(ra.status, 0, ra.stderr);
  const rb = await planTo(b, '--calibration', slowDense);
  assert.equal(rb.status, 0, rb.stderr);
  const pa = JSON.parse(readFileSync(a, 'utf8'));
  const pb = JSON.parse(readFileSync(b, 'utf8'));
  assert.equal(pa.meta.options.calibration, 'default');
  assert.deepEqual(pb.meta.options.calibration, ['slow-dense.json']);
  // The planner's estimates read the tables: slower dense kernels, a longer estimate.
  const est = (p: { meta: { tuning: { candidates: { estimateMs: number }[]; chosen: number } } }) =>
    p.meta.tuning.candidates[p.meta.tuning.chosen]!.estimateMs;
  assert.ok(est(pb) > est(pa), `${est(pb)} > ${est(pa)}`);
});

test('fcp plan --calibration with an unreadable file: one line, exit 2, no plan file', async () => {
  const out = join(dir, 'never.json');
  const r = await fcp(['plan', ...small, '--calibration', join(dir, 'missing.json'), '-o', out]);
  assert.equal(r.status, 2);
  assert.equal(codeLine(r.stderr), 'io.read');
  assert.equal(r.stderr.trim().split('\n').length, 1);
  assert.equal(existsSync(out), false);
});

test('fcp compare --calibration: FCP is planned and simulated with the same tables', async () => {
  const planFile = join(dir, 'for-compare.json');
  const rp = await planTo(planFile, '--calibration', slowDense);
  assert.equal(rp.status, 0, rp.stderr);
  const sim = await fcp(['simulate', planFile, '--calibration', slowDense, '--json']);
  assert.equal(sim.status, 0, sim.stderr);
  const s = JSON.parse(sim.stdout);
  const cmp = await fcp([
    'compare',
    '--strategies',
    'fcp',
    ...small,
    '--calibration',
    slowDense,
    '--json',
    '-q',
  ]);
  assert.equal(cmp.status, 0, cmp.stderr);
  const doc = JSON.parse(cmp.stdout);
  // The tables are named once, not copied into the planner options.
  assert.deepEqual(doc.calibration, [slowDense]);
  assert.equal(doc.plannerOptions.calibration, undefined);
  const row = doc.rows[0];
  assert.equal(row.mfuForward, s.forward.mfu);
  assert.equal(row.mfuBackward, s.backward.mfu);
});

test('fcp simulate notes an FCP plan made with other kernel tables than it is simulated with', async () => {
  const fcpPlan = (calibration: unknown) => ({ strategy: 'fcp', meta: { options: { calibration } } });
  assert.equal(calibrationNote(fcpPlan('default'), undefined), '');
  assert.equal(calibrationNote(fcpPlan(['slow-dense.json']), [slowDense]), '');
  assert.match(
    calibrationNote(fcpPlan('default'), [slowDense]),
    /made for --calibration default, simulated under --calibration slow-dense.json/,
  );
  assert.match(
    calibrationNote(fcpPlan(['slow-dense.json']), undefined),
    /made for --calibration slow-dense.json, simulated under --calibration default/,
  );
  // The baselines' plans read no kernel tables.
  assert.equal(calibrationNote({ strategy: 'magi' }, [slowDense]), '');
  const planFile = join(dir, 'noted.json');
  assert.equal((await planTo(planFile)).status, 0);
  const r = await fcp(['simulate', planFile, '--calibration', slowDense]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /note: the plan was made for --calibration default/);
});

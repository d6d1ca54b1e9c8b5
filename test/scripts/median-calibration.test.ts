import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadCalibration } from '../../src/cost/calibration.ts';

const dir = mkdtempSync(join(tmpdir(), 'median-cal-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A run of the calibration: one dense square, one varlen row and the launch floor, at scale `s`. */
const run = (name: string, device: string, square: [number, number], rows = 3): string => {
  const all = [
    {
      kernel: 'flash',
      lq: 1024,
      lk: 1024,
      causal: true,
      segments: 32,
      fwd_ms: 2,
      bwd_ms: 5,
      fwd_mfu: 0.3,
      bwd_mfu: 0.24,
    },
    {
      kernel: 'flash',
      lq: 1024,
      lk: 1024,
      causal: false,
      segments: 32,
      fwd_ms: 3,
      bwd_ms: 7,
      fwd_mfu: 0.4,
      bwd_mfu: 0.34,
    },
    {
      kernel: 'flash',
      lq: 64,
      lk: 64,
      causal: true,
      segments: 1,
      fwd_ms: 0.03,
      bwd_ms: 0.06,
      fwd_mfu: 0,
      bwd_mfu: 0,
    },
    {
      name: 'sdpa-cudnn',
      kind: 'batch',
      causal: false,
      pairs: 8,
      lq: 4096,
      lk: 4096,
      fwd_ms: square[0],
      bwd_ms: square[1],
      fwd_mfu: 6 / square[0],
      bwd_mfu: 15 / square[1],
    },
  ];
  const path = join(dir, `${name}.json`);
  writeFileSync(
    path,
    JSON.stringify({ device, note: 'test', peak_tflops: 989, rows: all.slice(all.length - rows - 1) }),
  );
  return path;
};

const cli = (args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'scripts/gpu/median-calibration.ts', ...args], {
    encoding: 'utf8',
  });

test('median-calibration: each row takes the median time of the runs, its MFU scaled with it', () => {
  const a = run('a', 'GPU X', [10, 30]);
  const b = run('b', 'GPU X', [12, 24]);
  const c = run('c', 'GPU X', [11, 40]);
  const out = join(dir, 'out.json');
  const r = cli([a, b, c, '-o', out, '--against', a]);
  assert.equal(r.status, 0, r.stderr);
  const rows = JSON.parse(readFileSync(out, 'utf8')).rows as {
    name?: string;
    fwd_ms: number;
    bwd_ms: number;
    fwd_mfu: number;
    bwd_mfu: number;
  }[];
  const sq = rows.find((x) => x.name === 'sdpa-cudnn')!;
  assert.equal(sq.fwd_ms, 11);
  assert.equal(sq.bwd_ms, 30);
  assert.ok(Math.abs(sq.fwd_mfu - 6 / 11) < 1e-12);
  assert.ok(Math.abs(sq.bwd_mfu - 15 / 30) < 1e-12);
  assert.match(r.stdout, /sdpa-cudnn full 4096x4096/);
  // The merged table is a calibration the simulator loads.
  const cal = loadCalibration([out]);
  assert.equal(cal.dense.length, 1);
  assert.equal(cal.dense[0]!.fwdMs, 11);
});

test('median-calibration: refuses runs of other devices, other rows, or a single run (exit 2, no file)', () => {
  const a = run('a2', 'GPU X', [10, 30]);
  const out = join(dir, 'never.json');
  for (const args of [
    [a, run('d2', 'GPU Y', [10, 30]), '-o', out],
    [a, run('e2', 'GPU X', [10, 30], 2), '-o', out],
    [a, '-o', out],
    [a, run('f2', 'GPU X', [10, 30])],
    [a, join(dir, 'missing.json'), '-o', out],
  ]) {
    const r = cli(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.match(r.stderr, /^median-calibration: /);
    assert.throws(() => readFileSync(out));
  }
});

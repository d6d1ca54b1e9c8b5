import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { dataPath } from '../../src/core/data-dir.ts';
import { FcpError } from '../../src/core/issues.ts';
import { calibrationFromJson, calibrationFromOption, loadCalibration } from '../../src/cost/calibration.ts';
import { KernelModel } from '../../src/cost/kernel.ts';
import { LLAMA3_70B } from '../../src/model/attention.ts';

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    if (e instanceof FcpError) return e.code;
    throw e;
  }
  return 'none';
};

const gridRow = (lq: number, lk: number, causal: boolean, fwd: number, bwd?: number) => ({
  kernel: 'flash',
  lq,
  lk,
  causal,
  segments: 8,
  fwd_ms: fwd,
  ...(bwd === undefined ? {} : { bwd_ms: bwd }),
});

test('both shipped formats load, alone or together', () => {
  const grid = loadCalibration([dataPath('calibration/h200-torch2.11-flash-varlen.json')]);
  assert.equal(grid.dense.length, 0);
  assert.equal(grid.denseBackend, undefined);
  const both = calibrationFromOption(
    `${dataPath('calibration/h200-torch2.11-sdpa.json')},${dataPath('calibration/h200-torch2.11-flash-varlen.json')}`,
  );
  assert.equal(both.denseBackend, 'cudnn');
  assert.equal(both.dense.length, 14); // sdpa-cudnn squares; sdpa-flash and flash-rect-single rows are not dense cuDNN
  assert.equal(both.varlen.length, 68);
  // A varlen-only calibration runs everything on the varlen path.
  const k = new KernelModel(LLAMA3_70B, { calibration: grid });
  assert.ok(Number.isNaN(k.denseMs('forward', 4096, 4096, true)));
  assert.ok(!k.isDense(4096, 4096, true));
});

test('an SDPA file alone lacks varlen backward timings', () => {
  assert.equal(
    codeOf(() => loadCalibration([dataPath('calibration/h200-torch2.11-sdpa.json')])),
    'calibration.incomplete',
  );
});

test('bad files and rows are reported with stable codes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-cal-'));
  try {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{not json');
    assert.equal(
      codeOf(() => loadCalibration([bad])),
      'calibration.json',
    );
    assert.equal(
      codeOf(() => loadCalibration([join(dir, 'missing.json')])),
      'io.read',
    );
    assert.equal(
      codeOf(() => calibrationFromJson([{ path: 'x', json: { rows: 3 } }])),
      'calibration.json',
    );
    assert.equal(
      codeOf(() => calibrationFromJson([{ path: 'x', json: { rows: [gridRow(128, 128, true, -1, 1)] } }])),
      'calibration.row',
    );
    assert.equal(
      codeOf(() =>
        calibrationFromJson([
          {
            path: 'x',
            json: { rows: [{ kind: 'batch', lq: 512, lk: 1024, causal: true, pairs: 2, fwd_ms: 1 }] },
          },
        ]),
      ),
      'calibration.row',
    );
    assert.equal(
      codeOf(() => calibrationFromJson([{ path: 'x', json: { rows: [gridRow(128, 128, true, 1)] } }])),
      'calibration.incomplete',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a custom grid with a launch floor: overhead and efficiency come out as constructed', () => {
  // Every grid point runs at 0.5 of peak plus a 0.01 ms launch; the floor probe is 64 x 64 causal.
  const peak = 989;
  const launch = 0.01;
  const ms = (lq: number, lk: number, causal: boolean, dir: 1 | 2.5): number => {
    const pairs = causal ? lq * (lk - lq) + (lq * (lq + 1)) / 2 : lq * lk;
    return (8 * pairs * 4 * 64 * 128 * dir) / (peak * 1e9 * 0.5) + launch;
  };
  const rows = [];
  for (const lq of [128, 1024])
    for (const r of [1, 4])
      for (const c of [true, false])
        rows.push(gridRow(lq, lq * r, c, ms(lq, lq * r, c, 1), ms(lq, lq * r, c, 2.5)));
  // Floor: one 64 x 64 causal segment, which computes a whole 128 x 128 causal tile at 0.5 of peak.
  const tilePairs = 128 * 129 * 0.5;
  const floorMs = (d: number): number => (tilePairs * 4 * 64 * 128 * d) / (peak * 1e9 * 0.5) + launch;
  rows.push({
    kernel: 'flash',
    lq: 64,
    lk: 64,
    causal: true,
    segments: 1,
    fwd_ms: floorMs(1),
    bwd_ms: floorMs(2.5),
  });
  const cal = calibrationFromJson([{ path: 'synthetic', json: { peak_tflops: peak, rows } }]);
  const k = new KernelModel(LLAMA3_70B, { calibration: cal, tileFloor: 1 });
  assert.ok(Math.abs(k.launchMs('forward') - launch) < 1e-9, `${k.launchMs('forward')}`);
  assert.ok(Math.abs(k.launchMs('backward') - launch) < 1e-9);
  for (const [lq, lk] of [
    [128, 128],
    [300, 700],
    [1024, 4096],
    [5000, 90000],
  ] as const)
    assert.ok(Math.abs(k.varlenEfficiency('forward', lq, lk, true) - 0.5) < 1e-9);
});

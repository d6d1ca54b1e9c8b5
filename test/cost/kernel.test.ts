import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs, LLAMA3_70B } from '../../src/cluster/model.ts';
import { defaultCalibration } from '../../src/cost/calibration.ts';
import { KernelModel, type SegmentShape, segmentShape } from '../../src/cost/kernel.ts';
import { OpCost } from '../../src/cost/op-cost.ts';

const cal = defaultCalibration();

test('the kernel model reproduces every point of the shipped calibration within 3%', () => {
  const k = new KernelModel(LLAMA3_70B, { calibration: cal, slowdown: 1, peakTflops: cal.peakTflops });
  let checked = 0;
  let worst = 0;
  for (const dir of ['forward', 'backward'] as const) {
    const ms = (p: { fwdMs: number; bwdMs?: number }): number | undefined =>
      dir === 'forward' ? p.fwdMs : p.bwdMs;
    for (const p of cal.varlen) {
      const want = ms(p);
      if (want === undefined) continue;
      worst = Math.max(worst, Math.abs(k.pointMs(dir, 'varlen', p) / want - 1));
      checked++;
    }
    for (const p of cal.dense) {
      const want = ms(p);
      if (want === undefined) continue;
      worst = Math.max(worst, Math.abs(k.pointMs(dir, 'dense', p) / want - 1));
      checked++;
    }
    if (cal.floor) {
      const want = ms(cal.floor)!;
      worst = Math.max(worst, Math.abs(k.pointMs(dir, 'varlen', cal.floor) / want - 1));
      checked++;
    }
  }
  // 68 varlen grid points and 14 dense (cuDNN) points, forward and backward, plus the launch floor.
  assert.equal(checked, 2 * (68 + 14 + 1));
  assert.ok(worst < 0.03, `worst relative error ${worst}`);
});

test('the default calibration uses the varlen grid and the cuDNN dense rows', () => {
  assert.equal(cal.denseBackend, 'sdpa-cudnn');
  assert.equal(cal.varlen.length, 68);
  assert.equal(cal.dense.length, 14);
  assert.deepEqual([cal.floor?.lq, cal.floor?.lk, cal.floor?.count], [64, 64, 1]);
});

test('efficiency between grid points lies between its neighbours', () => {
  const k = new KernelModel(LLAMA3_70B);
  const a = k.varlenEfficiency('forward', 1024, 1024, true);
  const b = k.varlenEfficiency('forward', 2048, 2048, true);
  const mid = k.varlenEfficiency('forward', 1448, 1448, true);
  assert.ok(mid > Math.min(a, b) && mid < Math.max(a, b));
  // Below the grid: a 64-row query tile is half used; a 2 x 2 segment costs a whole 128 x 128 tile.
  const e128 = k.varlenEfficiency('forward', 128, 1024, false);
  assert.ok(Math.abs(k.varlenEfficiency('forward', 64, 1024, false) - e128 / 2) < 1e-12);
  const tile = k.varlenMs('forward', 128, 128, true, (128 * 129) / 2);
  assert.ok(Math.abs(k.varlenMs('forward', 2, 2, true, 3) / tile - 1) < 1e-12);
  const wide = k.varlenMs('forward', 128, 300, true, 128 * 172 + (128 * 129) / 2);
  assert.ok(Math.abs(k.varlenMs('forward', 2, 300, true, 2 * 298 + 3) / wide - 1) < 1e-12);
  // Dense path only from its smallest measured side on.
  assert.ok(Number.isNaN(k.denseEfficiency('forward', 256, true)));
  assert.ok(k.denseEfficiency('forward', 4096, false) > 0.6);
});

test('the dense what-if lifts segments of 512 and more to the dense efficiency of their shorter side', () => {
  const v = new KernelModel(LLAMA3_70B, { policy: 'varlen' });
  const d = new KernelModel(LLAMA3_70B, { policy: 'dense' });
  assert.equal(d.varlenEfficiency('forward', 4096, 20000, false), d.denseEfficiency('forward', 4096, false));
  assert.ok(
    d.varlenEfficiency('backward', 1024, 8192, true) > v.varlenEfficiency('backward', 1024, 8192, true),
  );
  assert.equal(
    d.varlenEfficiency('forward', 256, 4096, false),
    v.varlenEfficiency('forward', 256, 4096, false),
  );
});

test('compute is slowed by the SMs reserved for communication', () => {
  const base = new KernelModel(LLAMA3_70B, { slowdown: 1 });
  const slow = new KernelModel(LLAMA3_70B, { slowdown: 132 / 126 });
  const a = base.varlenMs('forward', 4096, 4096, false, 4096 * 4096);
  const b = slow.varlenMs('forward', 4096, 4096, false, 4096 * 4096);
  assert.ok(Math.abs(b / a - 132 / 126) < 1e-12);
  // The launch overhead is not SM-bound.
  assert.equal(slow.launchMs('forward'), base.launchMs('forward'));
});

test('segmentShape counts the attended pairs of any query and key range', () => {
  const sh: SegmentShape = { lq: 0, lk: 0, causal: false, pairs: 0 };
  fc.assert(
    fc.property(
      fc.boolean(),
      fc.nat(300),
      fc.integer({ min: 1, max: 300 }),
      fc.nat(300),
      fc.integer({ min: 1, max: 300 }),
      (causal, qs, ql, ks, kl) => {
        segmentShape(causal, qs, ql, ks, kl, sh);
        assert.equal(sh.pairs, attendedPairs(causal, qs, ql, ks, kl));
        if (sh.pairs > 0) assert.ok(sh.lq >= 1 && sh.lk >= 1 && sh.lq * sh.lk >= sh.pairs);
      },
    ),
    { seed: 42, numRuns: 400 },
  );
});

test('an op merges a query range with contiguous keys into one segment and pays one launch', () => {
  const k = new KernelModel(LLAMA3_70B, { policy: 'varlen' });
  const op = new OpCost(k, 'causal');
  op.reset('forward');
  // Query block [8192, 12288) against keys [0, 4096), [4096, 8192), [8192, 12288): one 4K x 12K causal segment.
  op.addTask(0, 8192, 4096, 0, 4096);
  op.addTask(0, 8192, 4096, 8192, 4096);
  op.addTask(0, 8192, 4096, 4096, 4096);
  const got = op.finish();
  const pairs = attendedPairs(true, 8192, 4096, 0, 12288);
  const want = k.varlenMs('forward', 4096, 12288, true, pairs) + k.launchMs('forward');
  assert.ok(Math.abs(got - want) < 1e-9, `${got} vs ${want}`);
});

test('visible key pieces join the diagonal in one bottom-right segment, wherever they lie', () => {
  const k = new KernelModel(LLAMA3_70B, { policy: 'varlen' });
  const op = new OpCost(k, 'causal');
  op.reset('backward');
  op.addTask(3, 8192, 4096, 5000, 1000);
  op.addTask(3, 8192, 4096, 8192, 4096);
  op.addTask(3, 8192, 4096, 0, 1000);
  const pairs = 4096 * 2000 + (4096 * 4097) / 2;
  const want = k.varlenMs('backward', 4096, 6096, true, pairs) + k.launchMs('backward');
  assert.ok(Math.abs(op.finish() - want) < 1e-9);
  // Without the diagonal the visible pieces make one full segment; another query range is apart.
  op.reset('forward');
  op.addTask(3, 8192, 4096, 5000, 1000);
  op.addTask(3, 8192, 4096, 0, 1000);
  op.addTask(4, 8192, 4096, 0, 1000);
  const full =
    k.varlenMs('forward', 4096, 2000, false, 4096 * 2000) +
    k.varlenMs('forward', 4096, 1000, false, 4096 * 1000);
  assert.ok(Math.abs(op.finish() - full - k.launchMs('forward')) < 1e-9);
});

test('auto policy runs equal square blocks densely when that is cheaper', () => {
  const auto = new KernelModel(LLAMA3_70B, { policy: 'auto' });
  const op = new OpCost(auto, 'causal');
  op.reset('forward');
  // Eight diagonal 4K blocks of different sequences: one dense causal launch.
  for (let s = 0; s < 8; s++) op.addTask(s, 0, 4096, 0, 4096);
  const got = op.finish();
  const want = auto.denseMs('forward', 4096, true, 8) + auto.launchMs('forward');
  assert.ok(Math.abs(got - want) < 1e-9);
  // Measured: 8 causal 4K squares take 3.950 ms with cuDNN (the calibration point itself).
  assert.ok(Math.abs(got / 3.95 - 1) < 0.03, `${got}`);
  // Tiny squares stay on the varlen path (no dense data below 512).
  op.reset('forward');
  op.addTask(0, 0, 100, 0, 100);
  assert.ok(
    Math.abs(op.finish() - (auto.varlenMs('forward', 100, 100, true, 5050) + auto.launchMs('forward'))) <
      1e-12,
  );
});

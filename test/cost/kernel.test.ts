import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { dataPath } from '../../src/core/data-dir.ts';
import {
  defaultCalibration,
  loadCalibration,
  SHIPPED_CALIBRATION_FILES,
} from '../../src/cost/calibration.ts';
import { KernelModel } from '../../src/cost/kernel.ts';
import { OpCost } from '../../src/cost/op-cost.ts';
import { decompose, type PieceMode, piecePairs } from '../../src/cost/pieces.ts';
import { attendedPairs, LLAMA3_70B } from '../../src/model/attention.ts';

const cal = defaultCalibration();
const near = (a: number, b: number, what = ''): void =>
  assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

for (const [name, c] of [
  ['measured (default)', cal],
  ['shipped', loadCalibration(SHIPPED_CALIBRATION_FILES.map((f) => dataPath(f)))],
] as const)
  test(`the kernel model reproduces every point of the ${name} calibration within 3%`, () => {
    const k = new KernelModel(LLAMA3_70B, { calibration: c, slowdown: 1, peakTflops: c.peakTflops });
    let checked = 0;
    let worst = 0;
    for (const dir of ['forward', 'backward'] as const) {
      const ms = (p: { fwdMs: number; bwdMs?: number }): number | undefined =>
        dir === 'forward' ? p.fwdMs : p.bwdMs;
      for (const [path, list] of [
        ['varlen', c.varlen],
        ['dense', c.dense],
      ] as const)
        for (const p of list) {
          const want = ms(p);
          if (want === undefined) continue;
          worst = Math.max(worst, Math.abs(k.pointMs(dir, path, p) / want - 1));
          checked++;
        }
      if (c.floor) {
        worst = Math.max(worst, Math.abs(k.pointMs(dir, 'varlen', c.floor) / ms(c.floor)! - 1));
        checked++;
      }
    }
    assert.equal(checked, 2 * (c.varlen.length + c.dense.length + 1));
    assert.ok(worst < 0.03, `worst relative error ${worst}`);
  });

test('the default calibration is the runtime measurement: varlen grid, cuDNN squares and rectangles', () => {
  assert.deepEqual(
    cal.sources.map((s) => s.split('/').pop()),
    ['h200-measured.json'],
  );
  assert.equal(cal.denseBackend, 'cudnn');
  assert.equal(cal.varlen.length, 68);
  assert.equal(cal.dense.length, 28); // 18 squares + 10 full rectangles
  assert.ok(cal.dense.some((p) => p.lq !== p.lk && !p.causal));
  assert.deepEqual([cal.floor?.lq, cal.floor?.lk, cal.floor?.count], [64, 64, 1]);
});

test('efficiency between grid points lies between its neighbours; tiny pieces pay a whole tile', () => {
  const k = new KernelModel(LLAMA3_70B);
  const a = k.varlenEfficiency('forward', 1024, 1024, true);
  const b = k.varlenEfficiency('forward', 2048, 2048, true);
  const mid = k.varlenEfficiency('forward', 1448, 1448, true);
  assert.ok(mid > Math.min(a, b) && mid < Math.max(a, b));
  // With a full tile floor a 64-row query tile is half used and a 2 x 2 piece costs a whole
  // 128 x 128 tile; the default floor (0.6) pays 60% of the tile plus the rest in proportion.
  const whole = new KernelModel(LLAMA3_70B, { tileFloor: 1 });
  near(
    whole.varlenEfficiency('forward', 64, 1024, false),
    whole.varlenEfficiency('forward', 128, 1024, false) / 2,
  );
  near(whole.varlenMs('forward', 2, 2, true), whole.varlenMs('forward', 128, 128, true));
  near(whole.varlenMs('backward', 2, 300, true), whole.varlenMs('backward', 128, 300, true));
  const tile = k.varlenMs('forward', 128, 128, true);
  near(k.varlenMs('forward', 2, 2, true), tile * (0.6 + (0.4 * 3) / (128 * 129 * 0.5)));
  // Dense rectangles are measured: a 4K x 16K full piece runs at cuDNN's 0.70, not varlen's 0.35.
  assert.ok(k.denseEfficiency('forward', 4096, 16384, false) > 0.65);
  assert.ok(k.varlenEfficiency('forward', 4096, 16384, false) < 0.4);
});

test('compute is slowed by the SMs reserved for communication', () => {
  const base = new KernelModel(LLAMA3_70B, { slowdown: 1 });
  const slow = new KernelModel(LLAMA3_70B, { slowdown: 132 / 126 });
  near(slow.varlenMs('forward', 4096, 4096, false) / base.varlenMs('forward', 4096, 4096, false), 132 / 126);
  near(slow.denseMs('backward', 4096, 8192, false) / base.denseMs('backward', 4096, 8192, false), 132 / 126);
  assert.equal(slow.launchMs('forward'), base.launchMs('forward')); // launch overhead is not SM-bound
});

test('pieces: the runtime decomposition covers exactly the attended pairs', () => {
  fc.assert(
    fc.property(
      fc.boolean(),
      fc.constantFrom<PieceMode>('br', 'square'),
      fc.nat(300),
      fc.integer({ min: 1, max: 300 }),
      fc.nat(300),
      fc.integer({ min: 1, max: 300 }),
      (causal, mode, qs, ql, ks, kl) => {
        let pairs = 0;
        decompose(causal, mode, qs, ql, ks, kl, (lq, lk, c) => {
          assert.ok(lq >= 1 && lk >= 1);
          if (c) assert.ok(lk >= lq);
          if (c && mode === 'square') assert.equal(lq, lk);
          pairs += piecePairs(lq, lk, c);
        });
        assert.equal(pairs, attendedPairs(causal, qs, ql, ks, kl));
      },
    ),
    { seed: 42, numRuns: 500 },
  );
});

test('auto: pieces >= 512 batch densely per shape in power-of-two launches, the rest run varlen', () => {
  const k = new KernelModel(LLAMA3_70B, { policy: 'auto' });
  const op = new OpCost(k, 'causal');
  const L = k.launchMs('forward');
  op.reset('forward');
  // Seven diagonal 4K blocks: one shape, 7 = 4 + 2 + 1 -> three cuDNN launches.
  for (let s = 0; s < 7; s++) op.addTask(0, 4096, 0, 4096);
  near(op.finish(), k.denseMs('forward', 4096, 4096, true, 7) + 3 * L);
  // A 4K query block against 12K earlier keys and itself: a full 4K x 12K rectangle and a causal square.
  op.reset('forward');
  op.addTask(12288, 4096, 0, 16384);
  near(
    op.finish(),
    k.denseMs('forward', 4096, 12288, false) + k.denseMs('forward', 4096, 4096, true) + 2 * L,
  );
  // A 300-token causal square and a 4K x 300 full piece: both varlen, two launches (causal, full).
  op.reset('forward');
  op.addTask(0, 300, 0, 300);
  op.addTask(5000, 4096, 0, 300);
  near(op.finish(), k.varlenMs('forward', 300, 300, true) + k.varlenMs('forward', 4096, 300, false) + 2 * L);
  // The measured point itself: 8 causal 4K squares in one launch.
  op.reset('forward');
  for (let s = 0; s < 8; s++) op.addTask(0, 4096, 0, 4096);
  const p = cal.dense.find((x) => x.causal && x.lq === 4096)!;
  assert.ok(Math.abs(op.finish() / p.fwdMs - 1) < 0.03);
});

test('varlen (flash): bottom-right causal pieces, one launch per mask kind; cudnn: everything dense', () => {
  const v = new KernelModel(LLAMA3_70B, { policy: 'varlen', emptyTileMs: 0 });
  assert.equal(v.pieceMode, 'br');
  const op = new OpCost(v, 'causal');
  op.reset('backward');
  op.addTask(12288, 4096, 0, 16384); // one bottom-right causal 4K x 16K piece
  op.addTask(0, 512, 0, 512);
  near(
    op.finish(),
    v.varlenMs('backward', 4096, 16384, true) +
      v.varlenMs('backward', 512, 512, true) +
      v.launchMs('backward'),
  );
  const d = new KernelModel(LLAMA3_70B, { policy: 'cudnn' });
  assert.ok(d.isDense(100, 100, true) && d.isDense(100, 3000, false) && !d.isDense(100, 200, true));
});

test('a varlen launch pays for the empty tiles of its grid, sized by the longest segment', () => {
  const k = new KernelModel(LLAMA3_70B, { policy: 'varlen', emptyTileMs: 1e-6 });
  const op = new OpCost(k, 'full');
  op.reset('forward');
  op.addTask(0, 4096, 0, 4096); // 32 query tiles
  for (let i = 0; i < 10; i++) op.addTask(0, 100, 0, 100); // 1 query tile each, 31 empty
  const compute = k.varlenMs('forward', 4096, 4096, false) + k.varlenMs('forward', 100, 100, false, 10);
  near(op.finish(), compute + k.launchMs('forward') + 10 * 31 * 64 * 1e-6);
  near(k.emptyTilesMs('backward', 11, 0, 32 + 10, 4096, 4096), 10 * 31 * 64 * 1e-6);
});

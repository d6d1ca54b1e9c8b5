/** core/log-log.ts: the size models' interpolation through measured planning times. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { logLogInterpolate } from '../../src/core/log-log.ts';

const close = (a: number, b: number, msg: string): void =>
  assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, b), `${msg}: ${a} vs ${b}`);

test('passes through the points, is a power law between and beyond them', () => {
  const xs = [16, 64, 256, 1024];
  const ys = [39, 43, 104, 772];
  for (let i = 0; i < xs.length; i++) close(logLogInterpolate(xs, ys, xs[i]!), ys[i]!, `point ${i}`);
  // Between 64 and 256 the exponent is log(104/43)/log(4): at 128 the geometric mean.
  close(logLogInterpolate(xs, ys, 128), Math.sqrt(43 * 104), 'midpoint');
  // Beyond 1024 the last segment's exponent; below 16 the first's.
  close(logLogInterpolate(xs, ys, 4096), 772 * (772 / 104), 'extended up');
  close(logLogInterpolate(xs, ys, 4), 39 / (43 / 39), 'extended down');
  // Below 1 reads as 1.
  close(logLogInterpolate(xs, ys, 0), logLogInterpolate(xs, ys, 1), 'x < 1');
});

test('monotone where the points are', () => {
  const xs = [16, 64, 256, 1024];
  const ys = [30, 34, 140, 605];
  let last = 0;
  for (let x = 1; x <= 8192; x *= 2) {
    const y = logLogInterpolate(xs, ys, x);
    assert.ok(y > last, `${x}`);
    last = y;
  }
  // Falling points give a falling curve (no clamping hides a wrong table).
  assert.ok(logLogInterpolate([1, 2], [10, 5], 4) < 5);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Rng } from '../../src/core/rng.ts';

test('Rng(seed) repeats the same stream for the same seed and differs across seeds', () => {
  const a = new Rng(42);
  const b = new Rng(42);
  const c = new Rng(43);
  const xa = Array.from({ length: 8 }, () => a.nextU32());
  const xb = Array.from({ length: 8 }, () => b.nextU32());
  const xc = Array.from({ length: 8 }, () => c.nextU32());
  assert.deepEqual(xa, xb);
  assert.notDeepEqual(xa, xc);
});

test('Rng.next() is uniform in [0, 1): mean and bounds over 100k draws', () => {
  const r = new Rng(7);
  let sum = 0;
  for (let i = 0; i < 100000; i++) {
    const x = r.next();
    assert.ok(x >= 0 && x < 1);
    sum += x;
  }
  assert.ok(Math.abs(sum / 100000 - 0.5) < 0.01);
});

test('Rng.lognormal(median, sigma) has the requested median', () => {
  const r = new Rng(3);
  const xs = Array.from({ length: 20001 }, () => r.lognormal(800, 1.1)).sort((p, q) => p - q);
  const median = xs[10000]!;
  assert.ok(median > 760 && median < 840, `median ${median}`);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { GENERATOR_NAMES, generateBatch, MAX_SEQUENCE_LENGTH } from '../../src/batch/generators.ts';

const sum = (a: Int32Array): number => a.reduce((s, x) => s + x, 0);

test('every generator fills exactly world * tokensPerRank tokens with positive lengths (property)', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(...GENERATOR_NAMES),
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 40000 }),
      fc.integer({ min: 0, max: 1e6 }),
      (name, world, tpr, seed) => {
        const b = generateBatch(name, world, tpr, seed);
        assert.equal(sum(b), world * tpr);
        for (const x of b) assert.ok(x >= 1 && x <= MAX_SEQUENCE_LENGTH);
      },
    ),
    { seed: 42, numRuns: 200 },
  );
});

test('generateBatch is deterministic for a seed and changes with the seed', () => {
  assert.deepEqual(generateBatch('longtail', 16, 32768, 5), generateBatch('longtail', 16, 32768, 5));
  assert.notDeepEqual(generateBatch('longtail', 16, 32768, 5), generateBatch('longtail', 16, 32768, 6));
});

test('longtail: about 40% of tokens in sequences of 4K or less, tail beyond 100K', () => {
  const b = generateBatch('longtail', 1024, 32768, 1);
  let short = 0;
  let max = 0;
  for (const x of b) {
    if (x <= 4096) short += x;
    max = Math.max(max, x);
  }
  const frac = short / sum(b);
  assert.ok(frac > 0.3 && frac < 0.5, `short-token fraction ${frac}`);
  assert.ok(max > 100000, `longest ${max}`);
});

test('magi: follows the corpus bins (about 43% of tokens in documents of 4K or less)', () => {
  const b = generateBatch('magi', 1024, 32768, 1);
  let short = 0;
  for (const x of b) if (x <= 4096) short += x;
  const frac = short / sum(b);
  assert.ok(frac > 0.33 && frac < 0.53, `short-token fraction ${frac}`);
  assert.ok(Math.max(...b) <= 196608);
});

test('fixed: every sequence is tokensPerRank long', () => {
  assert.deepEqual([...generateBatch('fixed', 4, 1000, 1)], [1000, 1000, 1000, 1000]);
});

/**
 * TripleIds (core/triple-ids.ts): ids by first use, exactly as a Map from the triple to its first
 * index would give them, through growth and after clear.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { TripleIds } from '../../src/core/triple-ids.ts';

const triple = fc.tuple(
  fc.integer({ min: -3, max: 40 }),
  fc.integer({ min: 0, max: 1 << 30 }),
  fc.integer({ min: 0, max: 3 }),
);

test('TripleIds numbers triples by first use, as a Map does, across growth', () => {
  fc.assert(
    fc.property(fc.array(triple, { maxLength: 600 }), fc.integer({ min: 1, max: 64 }), (keys, expected) => {
      const ids = new TripleIds(expected);
      const ref = new Map<string, number>();
      for (const [a, b, c] of keys) {
        const k = `${a},${b},${c}`;
        const before = ref.get(k) ?? -1;
        assert.equal(ids.get(a, b, c), before);
        if (before < 0) ref.set(k, ref.size);
        assert.equal(ids.intern(a, b, c), ref.get(k));
        assert.equal(ids.size, ref.size);
      }
      for (const [k, v] of ref) {
        const [a, b, c] = k.split(',').map(Number) as [number, number, number];
        assert.equal(ids.get(a, b, c), v);
      }
    }),
    { seed: 7, numRuns: 100 },
  );
});

test('TripleIds: the third key defaults to 0; clear forgets every triple', () => {
  const ids = new TripleIds();
  assert.equal(ids.intern(5, 9), 0);
  assert.equal(ids.get(5, 9, 0), 0);
  assert.equal(ids.get(5, 9, 1), -1);
  assert.equal(ids.intern(5, 9, 1), 1);
  ids.clear();
  assert.equal(ids.size, 0);
  assert.equal(ids.get(5, 9), -1);
  assert.equal(ids.intern(5, 9, 1), 0);
});

/**
 * core/stats.ts `median`, shared by the torch executor's timings, the demo and the benches: the
 * middle value of an odd count, the mean of the two middle values of an even one, 0 for none, and
 * independent of the input order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { median } from '../../src/core/stats.ts';

test('median: middle of the sorted values, the mean of the two middles for an even count, 0 for none', () => {
  assert.equal(median([]), 0);
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median(Float64Array.from([5])), 5);
  fc.assert(
    fc.property(fc.array(fc.integer({ min: -1000, max: 1000 }), { minLength: 1, maxLength: 40 }), (xs) => {
      const m = median(xs);
      // As many values strictly below the median as strictly above it, up to the ties at it.
      const below = xs.filter((x) => x < m).length;
      const above = xs.filter((x) => x > m).length;
      assert.ok(below <= xs.length / 2 && above <= xs.length / 2, `${xs} -> ${m}`);
      assert.equal(median([...xs].reverse()), m);
    }),
    { seed: 11, numRuns: 200 },
  );
});

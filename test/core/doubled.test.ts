/** core/doubled.ts: growing directly indexed typed arrays. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { doubled } from '../../src/core/doubled.ts';

test('twice as long, same type, contents first and zeros after, the input untouched', () => {
  for (const a of [Int32Array.of(3, -1, 7), Uint8Array.of(1, 2, 255), Float64Array.of(0.5, -2, 1e9)]) {
    const b = doubled(a);
    assert.equal(b.constructor, a.constructor);
    assert.equal(b.length, 2 * a.length);
    assert.deepEqual([...b.subarray(0, a.length)], [...a]);
    assert.deepEqual([...b.subarray(a.length)], [0, 0, 0]);
    b[0] = 42;
    assert.notEqual(a[0], 42, 'a copy, not a view');
  }
});

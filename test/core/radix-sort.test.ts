/**
 * The radix sort gives the order of a stable comparator sort, for keys below and above 2^16 and
 * chained over several keys (least significant first), as forward-tree.ts uses it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { iota } from '../../src/core/gather.ts';
import { radixSortBy } from '../../src/core/radix-sort.ts';
import { Rng } from '../../src/core/rng.ts';

describe('radixSortBy', () => {
  it('matches a stable comparator sort, small and large keys', () => {
    const r = new Rng(7);
    const rng = (): number => r.next();
    for (const range of [1, 5, 1000, 70000, 2 ** 31 - 1]) {
      const n = 500;
      const key = new Int32Array(n);
      for (let i = 0; i < n; i++) key[i] = Math.floor(rng() * range);
      const want = Array.from(iota(n)).sort((a, b) => key[a]! - key[b]! || a - b);
      assert.deepEqual(Array.from(radixSortBy(iota(n), key)), want, `range ${range}`);
    }
  });

  it('chained passes sort by several keys, ties by id', () => {
    const r = new Rng(11);
    const rng = (): number => r.next();
    const n = 800;
    const seq = new Int32Array(n);
    const start = new Int32Array(n);
    const length = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      seq[i] = Math.floor(rng() * 4);
      start[i] = Math.floor(rng() * 8) * 100000;
      length[i] = 1 + Math.floor(rng() * 3);
    }
    const shorter = Int32Array.from(length, (l) => 3 - l);
    const got = radixSortBy(radixSortBy(radixSortBy(iota(n), shorter), start), seq);
    const want = Array.from(iota(n)).sort(
      (a, b) => seq[a]! - seq[b]! || start[a]! - start[b]! || length[b]! - length[a]! || a - b,
    );
    assert.deepEqual(Array.from(got), want);
  });

  it('leaves the input alone and handles no ids', () => {
    const ids = Int32Array.from([2, 0, 1]);
    radixSortBy(ids, [3, 2, 1]);
    assert.deepEqual(Array.from(ids), [2, 0, 1]);
    assert.equal(radixSortBy(new Int32Array(0), []).length, 0);
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freezeColumns, IntColumn, intColumns } from '../../src/core/int-column.ts';
import { Rng } from '../../src/core/rng.ts';

test('IntColumn keeps every pushed value across chunk boundaries (first chunk doubling, then 2^16 chunks)', () => {
  for (const capacity of [undefined, 1, 100, 70000]) {
    const col = new IntColumn(capacity);
    const ref: number[] = [];
    const rng = new Rng(7);
    for (let i = 0; i < 200_003; i++) {
      const v = Math.floor(rng.next() * 2 ** 31) - 2 ** 30;
      col.push(v);
      ref.push(v);
    }
    assert.equal(col.length, ref.length);
    for (const i of [0, 3, 4, 63, 64, 65535, 65536, 65537, 131071, 131072, 200_002])
      assert.equal(col.get(i), ref[i]);
    col.set(65536, 42);
    ref[65536] = 42;
    col.set(5, -1);
    ref[5] = -1;
    assert.deepEqual(Array.from(col.toArray()), ref);
  }
});

test('IntColumn.toArray is exactly sized, also empty and at a chunk boundary', () => {
  assert.equal(new IntColumn().toArray().length, 0);
  const col = new IntColumn();
  for (let i = 0; i < 65536; i++) col.push(i);
  const a = col.toArray();
  assert.equal(a.length, 65536);
  assert.equal(a[65535], 65535);
  const cols = freezeColumns(intColumns(['x', 'y'] as const));
  assert.equal(cols.x.length, 0);
});

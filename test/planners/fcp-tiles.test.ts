/**
 * Square tiles for dense kernels (tiles.ts): the tiles of a task partition its attended pairs,
 * squares are fully visible or exactly on the causal diagonal, and ops expand to the tiles.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs } from '../../src/cluster/model.ts';
import type { TaskTable } from '../../src/plan/types.ts';
import { expandCompute, tileTasks } from '../../src/planners/fcp/tiles.ts';

const one = (qs: number, ql: number, ks: number, kl: number): TaskTable => ({
  rank: Int32Array.of(0),
  seq: Int32Array.of(0),
  qStart: Int32Array.of(qs),
  qLength: Int32Array.of(ql),
  kvStart: Int32Array.of(ks),
  kvLength: Int32Array.of(kl),
});

test('tiles partition every task: same attended pairs, no pair twice, squares visible or diagonal', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 3000 }),
      fc.integer({ min: 1, max: 3000 }),
      fc.integer({ min: 0, max: 3000 }),
      fc.integer({ min: 1, max: 3000 }),
      fc.boolean(),
      fc.constantFrom(0, 64, 256, 1024),
      fc.constantFrom(16, 64, 512),
      (qs, ql, ksRaw, kl, causal, tile, minTile) => {
        // Causal tasks attend keys up to their last query.
        const ks = causal ? Math.min(ksRaw, qs + ql - 1) : ksRaw;
        const t = one(qs, ql, ks, causal ? Math.min(kl, qs + ql - ks) : kl);
        const { table, offsets } = tileTasks(t, causal ? 'causal' : 'full', tile, minTile);
        assert.equal(offsets[1], table.rank.length);
        if (tile === 0) assert.equal(table.rank.length, 1);
        // Exact cover on a grid of (query, key) cells small enough to enumerate.
        const want = attendedPairs(causal, qs, ql, ks, t.kvLength[0]!);
        let got = 0;
        const seen = new Set<number>();
        for (let i = 0; i < table.rank.length; i++) {
          const a = table.qStart[i]!;
          const b = table.kvStart[i]!;
          const lq = table.qLength[i]!;
          const lk = table.kvLength[i]!;
          assert.ok(a >= qs && a + lq <= qs + ql && b >= ks && b + lk <= ks + t.kvLength[0]!);
          const p = attendedPairs(causal, a, lq, b, lk);
          assert.ok(p > 0, 'no tile is entirely masked');
          got += p;
          if (lq === lk && tile > 0 && lq >= minTile && causal)
            assert.ok(
              b === a || b + lk <= a,
              `square ${a}+${lq} x ${b}+${lk} is neither diagonal nor visible`,
            );
          if (ql * t.kvLength[0]! <= 400_000)
            for (let q = a; q < a + lq; q++)
              for (let k = b; k < b + lk; k++)
                if (!causal || k <= q) {
                  const key = q * 8192 + k;
                  assert.ok(!seen.has(key), `pair (${q}, ${k}) twice`);
                  seen.add(key);
                }
        }
        assert.equal(got, want);
      },
    ),
    { seed: 21, numRuns: 300 },
  );
});

test('a long visible rectangle becomes squares; its strips halve down to the minimum side', () => {
  const { table } = tileTasks(one(10000, 5000, 0, 9216), 'causal', 4096, 1024);
  const sides = new Map<number, number>();
  for (let i = 0; i < table.rank.length; i++)
    if (table.qLength[i] === table.kvLength[i])
      sides.set(table.qLength[i]!, (sides.get(table.qLength[i]!) ?? 0) + 1);
  assert.equal(sides.get(4096), 2); // 1 x 2 grid of 4096
  assert.equal(sides.get(1024), 4); // the 1024-wide key strip: 2048 finds no key tile, 1024 does
  // A diagonal query range of 2 tiles: 2 causal squares on the diagonal, 1 full below.
  const d = tileTasks(one(8192, 2048, 8192, 2048), 'causal', 1024, 1024).table;
  assert.equal(d.rank.length, 3);
});

test('ops expand to the tiles of their tasks, in order', () => {
  const tasks: TaskTable = {
    rank: Int32Array.of(0, 0),
    seq: Int32Array.of(0, 0),
    qStart: Int32Array.of(4096, 0),
    qLength: Int32Array.of(2048, 100),
    kvStart: Int32Array.of(0, 0),
    kvLength: Int32Array.of(2048, 100),
  };
  const tiling = tileTasks(tasks, 'causal', 1024, 1024);
  assert.deepEqual([...tiling.offsets], [0, 4, 5]);
  const c = expandCompute(
    {
      rank: Int32Array.of(0, 0),
      after: Int32Array.of(-1, 2),
      taskOffsets: Int32Array.of(0, 1, 2),
      taskIds: Int32Array.of(1, 0),
    },
    tiling,
  );
  assert.deepEqual([...c.taskOffsets], [0, 1, 5]);
  assert.deepEqual([...c.taskIds], [4, 0, 1, 2, 3]);
});

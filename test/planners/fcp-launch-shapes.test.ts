/**
 * Launch shapes and the shape-major op order (launch-shapes.ts): keys order tasks by their shape's
 * frequency, then shape, then position, exactly; with them a rank's ops hold one shape each where
 * position order mixed them, and make fewer launches.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { AssertionError } from '../../src/core/assert.ts';
import type { ComputeTable } from '../../src/plan/types.ts';
import { batchShapes, shapeMajorKeys } from '../../src/planners/fcp/launch-shapes.ts';
import { orderOps } from '../../src/planners/fcp/order.ts';
import { launchesPerRank, oneRank } from '../helpers/order-input.ts';

/** Launches of the one rank's ops. */
const launches = (c: ComputeTable, shape: Float64Array): number => launchesPerRank(c, shape, 1)[0]!;

test('shape-major keys order by shape frequency (descending), shape, then key, exactly', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          shape: fc.integer({ min: 0, max: 5 }),
          // Small keys and keys near the bound (six shapes x 2^50 stays below 2^53).
          key: fc.oneof(fc.integer({ min: 0, max: 2 ** 20 }), fc.integer({ min: 0, max: 2 ** 50 })),
        }),
        {
          maxLength: 60,
        },
      ),
      (rows) => {
        const shape = Float64Array.from(rows, (r) => r.shape * 1e9);
        const key = Float64Array.from(rows, (r) => r.key);
        const out = shapeMajorKeys(key, shape);
        const count = new Map<number, number>();
        for (const s of shape) count.set(s, (count.get(s) ?? 0) + 1);
        const cmp = (i: number, j: number): number =>
          count.get(shape[j]!)! - count.get(shape[i]!)! || shape[i]! - shape[j]! || key[i]! - key[j]!;
        for (let i = 0; i < rows.length; i++) {
          assert.ok(Number.isSafeInteger(out[i]!), `key ${out[i]} not an exact integer`);
          for (let j = 0; j < rows.length; j++)
            assert.equal(Math.sign(out[i]! - out[j]!), Math.sign(cmp(i, j)), `tasks ${i} and ${j}`);
        }
      },
    ),
  );
});

test('shape-major keys refuse keys they cannot compose exactly (a bug of the caller)', () => {
  const shape = Float64Array.from([1, 2]);
  for (const bad of [-1, 0.5, 2 ** 52]) {
    assert.throws(() => shapeMajorKeys(Float64Array.from([0, bad]), shape), AssertionError, `key ${bad}`);
  }
});

test('batchShapes tells tiles apart by lengths and by crossing the causal diagonal', () => {
  // A full tile, the diagonal square, a full tile elsewhere, and a shorter query strip.
  const t = {
    qStart: Int32Array.from([4096, 4096, 8192, 4096]),
    qLength: Int32Array.from([2048, 2048, 2048, 1024]),
    kvStart: Int32Array.from([0, 4096, 2048, 0]),
    kvLength: Int32Array.from([2048, 2048, 2048, 2048]),
  };
  const causal = batchShapes(t, true);
  assert.equal(causal[0], causal[2], 'full tiles of one size share a shape wherever they lie');
  assert.notEqual(causal[0], causal[1], 'the diagonal square crosses');
  assert.notEqual(causal[0], causal[3], 'another query length');
  const full = batchShapes(t, false);
  assert.equal(full[0], full[1], 'without a mask both are full tiles');
});

test('taken shape by shape, a rank of interleaved shapes makes ops of one shape and fewer launches', () => {
  // One rank, 24 exporting tiles of three shapes interleaved in position (A B C A B C ...), 0.5 ms
  // each, all ready at once, ops cut at 2 ms: by position each op holds all three shapes.
  const n = 24;
  const shape = Float64Array.from({ length: n }, (_, i) => i % 3);
  const input = { ...oneRank(n, 0.5), shape };
  const groupEnd = Float64Array.from([0]);
  const byPosition = orderOps(input, groupEnd, 1, 1, 2, 0).compute;
  const byShape = orderOps({ ...input, key: shapeMajorKeys(input.key, shape) }, groupEnd, 1, 1, 2, 0).compute;
  for (let op = 0; op < byShape.rank.length; op++) {
    const shapes = new Set<number>();
    for (let k = byShape.taskOffsets[op]!; k < byShape.taskOffsets[op + 1]!; k++)
      shapes.add(shape[byShape.taskIds[k]!]!);
    assert.equal(shapes.size, 1, `op ${op} holds ${shapes.size} shapes`);
  }
  assert.ok(
    launches(byShape, shape) < launches(byPosition, shape),
    `${launches(byShape, shape)} launches by shape against ${launches(byPosition, shape)} by position`,
  );
});

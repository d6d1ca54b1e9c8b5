/**
 * RanksByLoad (placement/ranks-by-load.ts): after any sequence of two-rank load changes, its order
 * is the fresh (load, rank) sort, and nthWithout skips exactly the rank asked for.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RanksByLoad } from '../../src/planners/fcp/placement/ranks-by-load.ts';

/** The ranks in ascending (load, rank) with `skip` left out. */
function sortedWithout(load: Float64Array, skip: number): number[] {
  const r = Array.from({ length: load.length }, (_, i) => i).filter((i) => i !== skip);
  return r.sort((x, y) => load[x]! - load[y]! || x - y);
}

/** Throws unless `by` lists every rank but `skip` in sorted order. */
function checkOrder(by: RanksByLoad, load: Float64Array, skip: number): void {
  const want = sortedWithout(load, skip);
  const got = want.map((_, k) => by.nthWithout(k, skip));
  assert.deepEqual(got, want);
}

test('RanksByLoad keeps the (load, rank) order through two-rank updates, ties and equal loads included', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 2, max: 40 }),
      fc.array(fc.tuple(fc.nat(), fc.nat(), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 6 })), {
        maxLength: 60,
      }),
      fc.nat(),
      (world, steps, skipSeed) => {
        // Small integer loads: many ties, which the rank breaks.
        const load = Float64Array.from({ length: world }, (_, i) => (i * 7) % 5);
        const by = new RanksByLoad(load, world);
        checkOrder(by, load, skipSeed % world);
        for (const [x, y, la, lb] of steps) {
          const a = x % world;
          const b = y % world;
          if (a === b) continue;
          load[a] = la;
          load[b] = lb;
          by.update(a, b);
          checkOrder(by, load, (a + skipSeed) % world);
          checkOrder(by, load, b);
        }
      },
    ),
    { seed: 7, numRuns: 200 },
  );
});

test('the order check rejects a stale order (a load changed without an update)', () => {
  const load = Float64Array.from([3, 1, 2, 5]);
  const by = new RanksByLoad(load, 4);
  checkOrder(by, load, 0);
  load[3] = 0;
  load[1] = 9;
  assert.throws(() => checkOrder(by, load, 0));
  by.update(3, 1);
  checkOrder(by, load, 0);
});

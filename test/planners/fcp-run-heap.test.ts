/**
 * The heap of available runs (run-heap.ts): popping it gives the available task of least (key, id),
 * exactly as a naive scan over every available task would, whatever the runs and the interleaving
 * of pushes and pops.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RunHeap } from '../../src/planners/fcp/run-heap.ts';

test('property: RunHeap pops the available task of least (key, id), as a naive scan does', () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 6 }), {
        minLength: 1,
        maxLength: 6,
      }),
      fc.array(fc.boolean(), { maxLength: 60 }),
      (runKeys, popFirst) => {
        // Tasks numbered run by run; each run sorted by (key, id) as orderOps sorts a group's run.
        const key: number[] = [];
        const runs: number[][] = [];
        for (const ks of runKeys) {
          const ids = ks.map((k) => key.push(k) - 1);
          ids.sort((x, y) => key[x]! - key[y]! || x - y);
          runs.push(ids);
        }
        const tasks = Int32Array.from(runs.flat());
        const heap = new RunHeap(runs.length, tasks, Float64Array.from(key));
        const avail = new Set<number>();
        let next = 0;
        let at = 0;
        const popBoth = (): void => {
          let best = -1;
          for (const x of avail)
            if (best < 0 || key[x]! < key[best]! || (key[x] === key[best] && x < best)) best = x;
          assert.equal(heap.pop(), best);
          avail.delete(best);
        };
        for (const p of popFirst) {
          if (p && avail.size > 0) popBoth();
          else if (next < runs.length) {
            heap.push(at, at + runs[next]!.length);
            for (const x of runs[next]!) avail.add(x);
            at += runs[next++]!.length;
          }
        }
        while (avail.size > 0) popBoth();
        assert.equal(heap.size, 0);
      },
    ),
    { numRuns: 200, seed: 23 },
  );
});

/**
 * The simulator's indexed heap of flow ends (src/executors/sim/heap.ts): after any sequence of sets
 * and removals its minimum is the least (time, id) among the pending items, as a plain list finds
 * it. Times come from a small set so that ties, which the id breaks, are common.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { IndexedHeap } from '../../src/executors/sim/heap.ts';

const op = fc.record({
  item: fc.integer({ min: 0, max: 39 }),
  remove: fc.boolean(),
  time: fc.constantFrom(0, 0.5, 1, 2, 2.5, 3, 7, Number.POSITIVE_INFINITY),
});

test('indexed heap: the minimum is the least (time, id) pending, through sets, moves and removals', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
      const heap = new IndexedHeap(40);
      const pending = new Map<number, number>();
      for (const o of ops) {
        if (o.remove) {
          heap.remove(o.item);
          pending.delete(o.item);
        } else {
          heap.set(o.item, o.time);
          pending.set(o.item, o.time);
        }
        let best = -1;
        let bestT = Number.POSITIVE_INFINITY;
        for (const [item, t] of pending)
          if (best < 0 || t < bestT || (t === bestT && item < best)) {
            best = item;
            bestT = t;
          }
        assert.equal(heap.size, pending.size);
        assert.equal(heap.peekItem(), best);
        assert.equal(heap.peekTime(), pending.size > 0 ? bestT : Number.POSITIVE_INFINITY);
      }
      // Draining pops every pending item in (time, id) order (no subtraction: times may be infinite).
      const order = [...pending.keys()].sort((a, b) => {
        const ta = pending.get(a)!;
        const tb = pending.get(b)!;
        return ta === tb ? a - b : ta < tb ? -1 : 1;
      });
      const got: number[] = [];
      while (heap.size > 0) {
        got.push(heap.peekItem());
        heap.remove(heap.peekItem());
      }
      assert.deepEqual(got, order);
    }),
    { numRuns: 300, seed: 41 },
  );
});

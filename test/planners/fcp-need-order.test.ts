/**
 * FCP `kv` rounds ordered by need (transfers/need-order.ts): a receiver about to run out of work
 * gets its K/V first; where no receiver is short of work the order is the old one (rounds.ts,
 * orderRounds: by ready group, then summed weight); the order is a permutation of the rounds; and
 * the pair count behind each transfer's unlocked compute is exact.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs } from '../../src/model/attention.ts';
import { type NeedInput, needOrder } from '../../src/planners/fcp/transfers/need-order.ts';
import { type Colouring, colourEdges, orderRounds } from '../../src/planners/fcp/transfers/rounds.ts';

function input(
  c: Colouring,
  dst: number[],
  startMs: number[],
  unlock: number[],
  roomPerGroup: number,
  ready?: number[],
): NeedInput {
  const E = c.round.length;
  return {
    ready: Int32Array.from(ready ?? new Array(E).fill(0)),
    dst: Int32Array.from(dst),
    unlockMs: Float64Array.from(unlock),
    weight: new Float64Array(E).fill(1),
    startMs: Float64Array.from(startMs),
    arrivalMs: (g) => (g + 1) * 1,
    room: () => roomPerGroup,
    maxVisits: 1e9,
  };
}

test('a receiver with no work of its own gets its K/V before well-fed ones (old order: the bigger round first)', () => {
  // Round 0 feeds ranks 1 and 2 (plenty of resident work); round 1 feeds rank 3 (none). One round per group.
  const c: Colouring = { round: Int32Array.from([0, 0, 1]), rounds: 2, delta: 1 };
  const dst = [1, 2, 3];
  const start = [0, 50, 50, 0];
  const need = needOrder(c, input(c, dst, start, [5, 5, 5], 1));
  assert.deepEqual(Array.from(need.order), [1, 0]);
  const old = orderRounds(c, new Int32Array(3), new Float64Array(3).fill(1));
  assert.deepEqual(Array.from(old.order), [0, 1], 'the old order puts the bigger round first');
});

test('once fed, a receiver no longer pulls its rounds ahead of a hungrier one', () => {
  // Rank 3 has nothing; rank 4 has 1.5 ms. Rounds 0 and 1 feed rank 3 (10 ms each), round 2 feeds rank 4.
  const c: Colouring = { round: Int32Array.from([0, 1, 2]), rounds: 3, delta: 2 };
  const need = needOrder(c, input(c, [3, 3, 4], [0, 0, 0, 0, 1.5], [10, 10, 10], 1));
  // Group 0: rank 3 is short by 2 ms, rank 4 by 0.5 -> round 0. Group 1: rank 3 has work until
  // 11 ms, rank 4 is short -> round 2.
  assert.deepEqual(Array.from(need.order), [0, 2, 1]);
});

test('with every receiver well fed the order is the old one; always a permutation', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 7 })).filter(([s, d]) => s !== d),
        { minLength: 1, maxLength: 60 },
      ),
      fc.integer({ min: 1, max: 5 }),
      fc.boolean(),
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 60, maxLength: 60 }),
      (pairs, room, fed, readyPool) => {
        const W = 8;
        const src = Int32Array.from(pairs, (p) => p[0]);
        const dst = Int32Array.from(pairs, (p) => p[1]);
        const c = colourEdges(src, dst, W, 'matching');
        const E = pairs.length;
        const ready = readyPool.slice(0, E);
        const start = new Array(W).fill(fed ? 1e9 : 0);
        const n = input(c, Array.from(dst), start, new Array(E).fill(0.3), room, ready);
        const { order, readyOf } = needOrder(c, n);
        assert.deepEqual(
          Array.from(order).sort((a, b) => a - b),
          Array.from({ length: c.rounds }, (_, i) => i),
        );
        const old = orderRounds(c, Int32Array.from(ready), new Float64Array(E).fill(1));
        assert.deepEqual(Array.from(readyOf), Array.from(old.readyOf));
        if (fed) assert.deepEqual(Array.from(order), Array.from(old.order));
      },
    ),
    { seed: 7, numRuns: 200 },
  );
});

test('attendedPairs (what the need order counts a range unlocks) counts the attended pairs exactly', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 60 }),
      fc.boolean(),
      (qa, ql, ka, kl, causal) => {
        let n = 0;
        for (let q = qa; q < qa + ql; q++) for (let k = ka; k < ka + kl; k++) if (!causal || k <= q) n++;
        assert.equal(attendedPairs(causal, qa, ql, ka, kl), n);
      },
    ),
    { seed: 3, numRuns: 300 },
  );
});

/** The greedy written plainly (every pick scores every candidate): the lazy heap must match it. */
function plainGreedy(c: Colouring, n: NeedInput): number[] {
  const old = orderRounds(c, n.ready, n.weight);
  const readyOf = old.readyOf;
  const fallback = Array.from(old.order);
  const taken = new Set<number>();
  const avail = Array.from(n.startMs);
  const out: number[] = [];
  let g = 0;
  let used = 0;
  while (out.length < c.rounds) {
    if (used >= n.room(g)) {
      g++;
      used = 0;
      continue;
    }
    const next = n.arrivalMs(g + 1);
    let best = -1;
    let bestScore = -1;
    for (const r of fallback) {
      if (taken.has(r) || readyOf[r]! > g) continue;
      let s = 0;
      for (let e = 0; e < c.round.length; e++)
        if (c.round[e] === r) s += Math.max(0, next - avail[n.dst[e]!]!);
      if (s > bestScore) {
        bestScore = s;
        best = r;
      }
    }
    if (best < 0) {
      g++;
      used = 0;
      continue;
    }
    taken.add(best);
    out.push(best);
    used++;
    for (let e = 0; e < c.round.length; e++)
      if (c.round[e] === best)
        avail[n.dst[e]!] = Math.max(avail[n.dst[e]!]!, n.arrivalMs(g)) + n.unlockMs[e]!;
  }
  return out;
}

test('the lazy greedy picks exactly what the plain greedy picks', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc
          .tuple(
            fc.integer({ min: 0, max: 7 }),
            fc.integer({ min: 0, max: 7 }),
            fc.integer({ min: 0, max: 2 }),
            fc.double({ min: 0, max: 4, noNaN: true }),
          )
          .filter(([s, d]) => s !== d),
        { minLength: 1, maxLength: 50 },
      ),
      fc.array(fc.double({ min: 0, max: 6, noNaN: true }), { minLength: 8, maxLength: 8 }),
      fc.integer({ min: 1, max: 4 }),
      (es, start, room) => {
        const src = Int32Array.from(es, (e) => e[0]);
        const dst = Int32Array.from(es, (e) => e[1]);
        const c = colourEdges(src, dst, 8, 'matching');
        const n = input(
          c,
          Array.from(dst),
          start,
          es.map((e) => e[3]),
          room,
          es.map((e) => e[2]),
        );
        assert.deepEqual(Array.from(needOrder(c, n).order), plainGreedy(c, n));
      },
    ),
    { seed: 11, numRuns: 300 },
  );
});

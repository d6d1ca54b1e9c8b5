/**
 * FCP rounds (rounds.ts) and the groups (transfers/groups.ts): exactly Δ matchings for `kv`,
 * first-fit push rounds that respect ready groups, the group placer, compute ops.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { buildOps } from '../../src/planners/fcp/ops-by-group.ts';
import { GroupPlacer } from '../../src/planners/fcp/transfers/groups.ts';
import {
  colourEdges,
  degreeOf,
  orderRounds,
  placeColouring,
  placePushes,
} from '../../src/planners/fcp/transfers/rounds.ts';

const graph = fc.integer({ min: 2, max: 24 }).chain((n) =>
  fc.record({
    n: fc.constant(n),
    edges: fc.array(
      fc
        .tuple(fc.integer({ min: 0, max: n - 1 }), fc.integer({ min: 1, max: n - 1 }))
        .map(([s, k]) => [s, (s + k) % n] as const),
      { maxLength: 120 },
    ),
  }),
);

/** The most messages one rank sends or receives in one round (1 = congestion-free). */
function congestion(src: Int32Array, dst: Int32Array, round: ArrayLike<number>): number {
  const seen = new Map<string, number>();
  let worst = 0;
  for (let e = 0; e < src.length; e++) {
    for (const k of [`s${src[e]}:${round[e]}`, `d${dst[e]}:${round[e]}`]) {
      const c = (seen.get(k) ?? 0) + 1;
      seen.set(k, c);
      worst = Math.max(worst, c);
    }
  }
  return worst;
}

test('matching mode: exactly Δ rounds, each a matching; naive: receiver order, senders uncoordinated', () => {
  fc.assert(
    fc.property(graph, ({ n, edges }) => {
      const src = Int32Array.from(edges, (e) => e[0]);
      const dst = Int32Array.from(edges, (e) => e[1]);
      const delta = degreeOf(src, dst, n);
      const c = colourEdges(src, dst, n, 'matching');
      assert.equal(c.delta, delta);
      assert.equal(c.rounds, delta);
      if (edges.length > 0) assert.equal(congestion(src, dst, c.round), 1);
      const naive = colourEdges(src, dst, n, 'naive');
      const inDegree = new Int32Array(n);
      for (const d of dst) inDegree[d]!++;
      assert.equal(naive.rounds, edges.length > 0 ? Math.max(...inDegree) : 0);
      // Every rank receives one transfer per round; a sender may serve several.
      const recv = new Set<string>();
      for (let e = 0; e < edges.length; e++) {
        const k = `${dst[e]}:${naive.round[e]}`;
        assert.ok(!recv.has(k));
        recv.add(k);
      }
    }),
    { seed: 1, numRuns: 150 },
  );
});

test('group placer: at most `coalesce` rounds per group, earliest group with room at or after ready, consecutive groups', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.array(fc.integer({ min: 0, max: 8 }), { maxLength: 60 }),
      (coalesce, readies) => {
        const p = new GroupPlacer(coalesce, 4);
        const slots = readies.map((r) => ({ r, slot: p.place(r) }));
        const count = new Map<number, number>();
        for (const { slot } of slots) count.set(p.groupOf(slot), (count.get(p.groupOf(slot)) ?? 0) + 1);
        for (const c of count.values()) assert.ok(c <= coalesce);
        const { roundOfSlot, groupOfRound } = p.finish();
        // Rounds numbered by group: groupOfRound is non-decreasing and uses 0..G-1 without gaps.
        for (let r = 1; r < groupOfRound.length; r++)
          assert.ok(groupOfRound[r]! - groupOfRound[r - 1]! <= 1 && groupOfRound[r]! >= groupOfRound[r - 1]!);
        if (groupOfRound.length > 0) assert.equal(groupOfRound[0], 0);
        for (const { slot } of slots) assert.equal(groupOfRound[roundOfSlot[slot]!], p.groupOf(slot));
      },
    ),
    { seed: 2, numRuns: 200 },
  );
  const p = new GroupPlacer(2, 4);
  assert.equal(p.groupOf(p.place(0)), 0);
  assert.equal(p.groupOf(p.place(0)), 0);
  assert.equal(p.groupOf(p.place(0)), 1, 'group 0 is full');
  assert.equal(p.groupOf(p.place(5)), 2, 'a ready group past the end opens the next group');
  assert.equal(p.groupOf(p.place(1)), 1, 'group 1 still has room');
});

test('widenFrom: groups from the given one on hold up to the wider size (at most the comm group), earlier ones keep theirs; pushes stay congestion-free', () => {
  fc.assert(
    fc.property(
      graph,
      fc.integer({ min: 1, max: 6 }),
      fc.integer({ min: 1, max: 40 }),
      fc.integer({ min: 1, max: 24 }),
      fc.integer({ min: 0, max: 3 }),
      ({ n, edges }, coalesce, cap, comm, before) => {
        const placer = new GroupPlacer(coalesce, n, comm);
        for (let i = 0; i < before * coalesce; i++) placer.mark(placer.place(0), 0, 1);
        const from = placer.groups;
        placer.widenFrom(from, cap);
        const src = Int32Array.from(edges, (e) => e[0]);
        const dst = Int32Array.from(edges, (e) => e[1]);
        const ready = new Int32Array(edges.length).fill(from);
        const { slot } = placePushes(placer, src, dst, ready, n, 'matching');
        const chained = comm < coalesce;
        const wide = chained || cap <= coalesce ? coalesce : Math.min(cap, comm, 32);
        const count = new Map<number, number>();
        for (let k = 0; k < placer.slots; k++)
          count.set(placer.groupOf(k), (count.get(placer.groupOf(k)) ?? 0) + 1);
        for (const [g, c] of count) assert.ok(c <= (g >= from ? wide : coalesce), `group ${g}: ${c} rounds`);
        if (edges.length > 0) assert.equal(congestion(src, dst, slot), 1);
        // Exactly the wider size fills up: Δ pushes of one sender take ceil(Δ / wide) groups.
        const q = new GroupPlacer(coalesce, 64, comm);
        q.widenFrom(0, cap);
        const s = Int32Array.from({ length: 40 }, () => 0);
        const d = Int32Array.from({ length: 40 }, (_, i) => 1 + i);
        const placed = placePushes(q, s, d, new Int32Array(40), 64, 'matching');
        assert.equal(q.groupOf(placed.slot[39]!) + 1, Math.ceil(40 / wide));
      },
    ),
    { seed: 4, numRuns: 150 },
  );
});

test('pushes: congestion-free, never before their ready group, close to Δ rounds', () => {
  fc.assert(
    fc.property(
      graph,
      fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 120, maxLength: 120 }),
      ({ n, edges }, readies) => {
        const src = Int32Array.from(edges, (e) => e[0]);
        const dst = Int32Array.from(edges, (e) => e[1]);
        const ready = Int32Array.from(edges, (_, i) => readies[i]!);
        const placer = new GroupPlacer(3, n);
        // Groups 0 and 1 already hold other rounds; rank 0 sends to rank 1 in each of them.
        for (let i = 0; i < 6; i++) placer.mark(placer.place(0), 0, 1);
        const { slot, rounds: opened } = placePushes(placer, src, dst, ready, n, 'matching');
        // Congestion-free together with the rounds already there (slots 0..5 carry 0 -> 1).
        const all = (a: Int32Array, x: number): Int32Array => Int32Array.from([...a, ...Array(6).fill(x)]);
        const rounds = Int32Array.from([...slot, 0, 1, 2, 3, 4, 5]);
        assert.equal(congestion(all(src, 0), all(dst, 1), rounds), 1);
        // A push never lands before its ready group, except that a ready group past the last one
        // opens the next group (groups are consecutive): 2 groups existed before.
        for (let e = 0; e < edges.length; e++) assert.ok(placer.groupOf(slot[e]!) >= Math.min(ready[e]!, 2));
        assert.ok(opened <= Math.max(0, 2 * degreeOf(src, dst, n) + 1) * 5, `${opened} push rounds`);
      },
    ),
    { seed: 3, numRuns: 150 },
  );
});

test('round order: rounds that must wait go last, then by weight', () => {
  const src = Int32Array.from([0, 1, 2, 0]);
  const dst = Int32Array.from([1, 2, 0, 2]);
  const c = colourEdges(src, dst, 3, 'matching');
  const ready = Int32Array.from([0, 0, 0, 3]);
  const { order, readyOf } = orderRounds(c, ready, Float64Array.from([1, 1, 1, 1]));
  for (let i = 1; i < order.length; i++) assert.ok(readyOf[order[i]!]! >= readyOf[order[i - 1]!]!);
  const placer = new GroupPlacer(16, 3);
  const slots = placeColouring(placer, c, order, readyOf, src, dst);
  assert.equal(placer.groupOf(slots[3]!), 1, 'placed at its ready group (clamped to the next new group)');
});

test('compute ops: one per (rank, after), rank-major, ascending after, tasks in id order', () => {
  const rank = Int32Array.from([1, 0, 1, 0, 1, 2]);
  const after = Int32Array.from([2, -1, -1, 0, 2, 5]);
  const { compute, opOfTask } = buildOps(rank, after, 3);
  assert.deepEqual([...compute.rank], [0, 0, 1, 1, 2]);
  assert.deepEqual([...compute.after], [-1, 0, -1, 2, 5]);
  assert.deepEqual([...compute.taskOffsets], [0, 1, 2, 3, 5, 6]);
  assert.deepEqual([...compute.taskIds], [1, 3, 2, 0, 4, 5]);
  assert.deepEqual([...opOfTask], [3, 0, 2, 1, 3, 4]);
});

test('fillLink: one message per rank, link class and round; never before its ready group', () => {
  // Ranks 0..n-1 in nodes of `node`: messages inside a node cross NVLink, the rest the NIC.
  fc.assert(
    fc.property(
      graph,
      fc.integer({ min: 2, max: 6 }),
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 120, maxLength: 120 }),
      ({ n, edges }, node, readies) => {
        const placer = new GroupPlacer(3, n, 3, node);
        // Rounds already placed (a colouring's): every one a matching over ranks.
        const c = colourEdges(
          Int32Array.from(edges, (e) => e[0]),
          Int32Array.from(edges, (e) => e[1]),
          n,
          'matching',
        );
        const order = Int32Array.from({ length: c.rounds }, (_, i) => i);
        const base = placeColouring(
          placer,
          c,
          order,
          new Int32Array(c.rounds),
          Int32Array.from(edges, (e) => e[0]),
          Int32Array.from(edges, (e) => e[1]),
        );
        // The same edges again, as relays would be, placed by link class; a ready group past the
        // last one opens the next group (groups are consecutive).
        const slots = edges.map((e, i) => {
          const before = placer.groups;
          const slot = placer.fillLink(e[0], e[1], readies[i]!);
          assert.ok(placer.groupOf(slot) >= Math.min(readies[i]!, before));
          return slot;
        });
        const all = [
          ...edges.map((e, i) => [e[0], e[1], base[i]!] as const),
          ...edges.map((e, i) => [e[0], e[1], slots[i]!] as const),
        ];
        const count = new Map<string, number>();
        for (const [s, d, slot] of all) {
          const link = Math.floor(s / node) === Math.floor(d / node) ? 1 : 0;
          for (const k of [`s${slot}:${s}:${link}`, `r${slot}:${d}:${link}`])
            count.set(k, (count.get(k) ?? 0) + 1);
        }
        for (const [k, v] of count) assert.equal(v, 1, `${k} carries ${v} messages of one link class`);
      },
    ),
    { seed: 5, numRuns: 150 },
  );
  // A rank whose NIC is busy in every round of group 0 still takes an NVLink message there.
  const p = new GroupPlacer(2, 16, 2, 8);
  p.mark(p.place(0), 9, 1); // across nodes into rank 1
  p.mark(p.place(0), 10, 1);
  assert.equal(p.groupOf(p.fillLink(2, 1, 0)), 0, 'node mate 2 -> 1 joins group 0');
  assert.equal(p.groupOf(p.fill(3, 1, 0)), 1, 'with one message per rank and round it could not');
  assert.equal(p.groupOf(p.fillLink(11, 1, 0)), 1, 'a third NIC message into rank 1 waits for group 1');
});

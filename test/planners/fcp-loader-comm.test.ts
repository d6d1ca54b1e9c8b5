/**
 * kvTrafficMs (placement/loader-comm.ts): the busiest rank's K/V time of a loader layout, the
 * comm term by which planForLoaderLayout chooses among token caps. Checked against a token-by-token
 * count on random layouts, and on hand cases whose answer is known.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Layout, Mask } from '../../src/plan/types.ts';
import { type KvLinks, kvTrafficMs } from '../../src/planners/fcp/placement/loader-comm.ts';

const layoutOf = (rows: [rank: number, seq: number, start: number, length: number][]): Layout => ({
  rank: Int32Array.from(rows.map((r) => r[0])),
  seq: Int32Array.from(rows.map((r) => r[1])),
  start: Int32Array.from(rows.map((r) => r[2])),
  length: Int32Array.from(rows.map((r) => r[3])),
});

const LINKS: KvLinks = { nodeSize: 2, intraBytesPerMs: 8, interBytesPerMs: 1 };

/** Token-by-token oracle: every K/V token goes to every other rank with a query that attends to it. */
function oracle(
  l: Layout,
  sequences: Int32Array,
  mask: Mask,
  world: number,
  links: KvLinks,
  bpt: number,
): number {
  const recv = new Float64Array(world);
  const send = new Float64Array(world);
  for (let s = 0; s < sequences.length; s++) {
    const owner = new Int32Array(sequences[s]!);
    for (let i = 0; i < l.rank.length; i++)
      if (l.seq[i] === s)
        for (let p = l.start[i]!; p < l.start[i]! + l.length[i]!; p++) owner[p] = l.rank[i]!;
    for (let k = 0; k < sequences[s]!; k++)
      for (let d = 0; d < world; d++) {
        if (d === owner[k]) continue;
        let needs = false;
        for (let q = mask === 'causal' ? k : 0; q < sequences[s]! && !needs; q++) needs = owner[q] === d;
        if (!needs) continue;
        const same = Math.floor(d / links.nodeSize) === Math.floor(owner[k]! / links.nodeSize);
        const ms = bpt / (same ? links.intraBytesPerMs : links.interBytesPerMs);
        recv[d]! += ms;
        send[owner[k]!]! += ms;
      }
  }
  return Math.max(0, ...recv, ...send);
}

test('kvTrafficMs: a sequence on one rank moves nothing', () => {
  const l = layoutOf([
    [0, 0, 0, 8],
    [1, 1, 0, 5],
  ]);
  assert.equal(kvTrafficMs(l, Int32Array.from([8, 5]), 'causal', 2, LINKS, 4), 0);
});

test('kvTrafficMs: causal halves go one way, full mask both ways; NVLink inside a node', () => {
  const l = layoutOf([
    [0, 0, 0, 4],
    [2, 0, 4, 4],
  ]);
  const seqs = Int32Array.from([8]);
  // Ranks 0 and 2 are on different nodes (2 GPUs per node): rank 2 needs K/V [0, 4) from rank 0.
  assert.equal(kvTrafficMs(l, seqs, 'causal', 4, LINKS, 3), (4 * 3) / 1);
  assert.equal(kvTrafficMs(l, seqs, 'full', 4, LINKS, 3), (4 * 3) / 1);
  const near = layoutOf([
    [0, 0, 0, 4],
    [1, 0, 4, 4],
  ]);
  assert.equal(kvTrafficMs(near, seqs, 'causal', 4, LINKS, 3), (4 * 3) / 8);
  // Rank 0's queries attend only to its own keys under the causal mask: the late half is not sent back.
  const l2 = layoutOf([
    [0, 0, 0, 4],
    [2, 0, 4, 2],
    [0, 0, 6, 2],
  ]);
  // Causal: rank 2 receives [0, 4) = 4 tokens, rank 0 receives [4, 6) = 2; rank 0 sends 4.
  assert.equal(kvTrafficMs(l2, seqs, 'causal', 4, LINKS, 1), 4);
});

test('kvTrafficMs equals the token-by-token count on random layouts', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 4 }),
      fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 60, maxLength: 60 }),
      fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 60, maxLength: 60 }),
      fc.constantFrom<Mask>('causal', 'full'),
      (lens, ranks, cuts, mask) => {
        const world = 6;
        const rows: [number, number, number, number][] = [];
        let k = 0;
        lens.forEach((len, s) => {
          for (let a = 0; a < len; k++) {
            const n = Math.min(len - a, cuts[k % cuts.length]!);
            rows.push([ranks[k % ranks.length]!, s, a, n]);
            a += n;
          }
        });
        const l = layoutOf(rows);
        const seqs = Int32Array.from(lens);
        const got = kvTrafficMs(l, seqs, mask, world, LINKS, 2);
        const want = oracle(l, seqs, mask, world, LINKS, 2);
        assert.ok(Math.abs(got - want) < 1e-9, `got ${got}, want ${want}`);
      },
    ),
    { seed: 15, numRuns: 200 },
  );
});

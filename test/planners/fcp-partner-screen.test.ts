/**
 * The refinement's partner screen (placement/partner-screen.ts) and send load (send-load.ts):
 * the screen never rules out a partner that could take a block of the most loaded rank (it is a
 * necessary condition of refine.ts's eligibility levels), its holder bits agree with the block
 * ranks, and the send load matches a recount of its definition.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import { splitBlocks } from '../../src/planners/fcp/placement/blocks.ts';
import { PartnerScreen } from '../../src/planners/fcp/placement/partner-screen.ts';
import { SendLoad } from '../../src/planners/fcp/placement/send-load.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** A generated batch's blocks on random ranks, with random user ranks. */
function randomPlacement(batch: string, world: number, seed: number, rnd: () => number) {
  const p = resolveProblem({ batch, world, tokensPerRank: 4096, seed });
  const blocks = splitBlocks(p.sequences, p.mask, world, resolveFcpOptions({}), p.memoryTokens);
  const B = blocks.seq.length;
  const blockRank = Int32Array.from({ length: B }, () => Math.floor(rnd() * world));
  const userOf = Int32Array.from({ length: B }, (_, b) =>
    rnd() < 0.5 ? blockRank[b]! : Math.floor(rnd() * world),
  );
  const pairs = Float64Array.from({ length: B }, () => (rnd() < 0.1 ? 0 : 1 + rnd()));
  const single = Uint8Array.from({ length: B }, (_, b) => {
    const s = blocks.seq[b]!;
    return blocks.seqBlocks[s + 1]! - blocks.seqBlocks[s]! === 1 ? 1 : 0;
  });
  return { blocks, blockRank, userOf, pairs, single };
}

/** A seeded generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('partner screen: a necessary condition of every eligibility level; holder bits agree with the block ranks', () => {
  fc.assert(
    fc.property(
      fc.constantFrom('longtail', 'bimodal', 'magi'),
      fc.constantFrom(4, 8, 16),
      fc.constantFrom(1, 2, 4, 1 << 30),
      fc.integer({ min: 0, max: 1000 }),
      (batch, world, gpn, seed) => {
        const rnd = rng(seed);
        const { blocks, blockRank, userOf, pairs, single } = randomPlacement(batch, world, seed, rnd);
        const nodeOf = Int32Array.from({ length: world }, (_, r) => Math.floor(r / Math.min(gpn, world)));
        const scr = new PartnerScreen(blocks, pairs, userOf, single, blockRank, nodeOf);
        const holds = (r: number, q: number): boolean => {
          for (let c = blocks.seqBlocks[q]!; c < blocks.seqBlocks[q + 1]!; c++)
            if (blockRank[c] === r) return true;
          return false;
        };
        for (let M = 0; M < world; M++) {
          const mine: number[] = [];
          for (let b = 0; b < blockRank.length; b++) if (blockRank[b] === M) mine.push(b);
          scr.build(M, mine, 7 + M);
          for (let m = 0; m < world; m++) {
            if (m === M) continue;
            for (const b of mine) {
              if (pairs[b]! <= 0) continue;
              const q = blocks.seq[b]!;
              const known = scr.knownHolds(m, q);
              if (known >= 0) assert.equal(known === 1, holds(m, q), 'holder bit');
              const held = single[b] === 1 || holds(m, q);
              const off = userOf[b] !== M;
              // refine.ts's levels 0, 1 and 3 (2 and 4 admit every partner).
              if (off && nodeOf[m] === nodeOf[userOf[b]!] && held) assert.ok(scr.mayTake(0, m), 'level 0');
              if (off && held) assert.ok(scr.mayTake(1, m), 'level 1');
              if (held) assert.ok(scr.mayTake(3, m), 'level 3');
            }
            assert.ok(scr.mayTake(2, m) && scr.mayTake(4, m));
          }
          for (const b of mine) assert.ok(scr.onMost(blocks.seq[b]!));
        }
      },
    ),
    { numRuns: 40 },
  );
});

test("partner screen rules partners out: a rank holding none of M's sequences is not a level-3 partner", () => {
  const rnd = rng(5);
  const { blocks, userOf, pairs } = randomPlacement('longtail', 8, 5, rnd);
  // Every block of sequences with several blocks on rank 0, the rest on rank 1.
  const B = blocks.seq.length;
  const single = new Uint8Array(B);
  const blockRank = Int32Array.from({ length: B }, (_, b) => {
    const s = blocks.seq[b]!;
    return blocks.seqBlocks[s + 1]! - blocks.seqBlocks[s]! > 1 ? 0 : 1;
  });
  const nodeOf = new Int32Array(8);
  const scr = new PartnerScreen(blocks, pairs, userOf, single, blockRank, nodeOf);
  const mine = [...blockRank.keys()].filter((b) => blockRank[b] === 0);
  assert.ok(mine.length > 0);
  scr.build(0, mine, 1);
  for (let m = 1; m < 8; m++) assert.equal(scr.mayTake(3, m), false, `rank ${m}`);
});

test('send load: matches a recount after moves, and the cap is the largest start load', () => {
  const rnd = rng(11);
  const world = 8;
  const { blocks, blockRank } = randomPlacement('longtail', world, 3, rnd);
  const tok = blocks.length;
  const S = blocks.seqBlocks.length - 1;
  const recount = (): Float64Array => {
    const on = new Map<number, number>();
    for (let b = 0; b < blockRank.length; b++) {
      const k = blocks.seq[b]! * world + blockRank[b]!;
      on.set(k, (on.get(k) ?? 0) + tok[b]!);
    }
    const holders = new Int32Array(S);
    for (const k of on.keys()) holders[Math.floor(k / world)]!++;
    const send = new Float64Array(world);
    for (const [k, t] of on) send[k % world]! += t * (holders[Math.floor(k / world)]! - 1);
    return send;
  };
  const load = new SendLoad(blocks.seq, tok, blockRank, S, world);
  assert.equal(load.cap, Math.max(...recount()));
  // A block moving to a rank that already holds its sequence, and leaving another holder: no
  // holder count changes, so the tracked loads stay exact.
  const count = (r: number, s: number): number => {
    let n = 0;
    for (let c = blocks.seqBlocks[s]!; c < blocks.seqBlocks[s + 1]!; c++) if (blockRank[c] === r) n++;
    return n;
  };
  let moved = 0;
  for (let b = 0; b < blockRank.length && moved < 20; b++) {
    const s = blocks.seq[b]!;
    const from = blockRank[b]!;
    if (count(from, s) < 2) continue;
    const to = [...Array(world).keys()].find((r) => r !== from && count(r, s) > 0);
    if (to === undefined) continue;
    load.leave(s, tok[b]!, from);
    blockRank[b] = to;
    load.arrive(s, tok[b]!, to, false, false);
    moved++;
  }
  assert.ok(moved > 0);
  const send = recount();
  for (let r = 0; r < world; r++) assert.ok(Math.abs(load.of(r) - send[r]!) < 1e-9, `rank ${r}`);
  // fits: the load a block would add, against the cap.
  const b = 0;
  const s0 = blocks.seq[b]!;
  const joins = count(1, s0) === 0;
  const holdersNow = new Set<number>();
  for (let c = blocks.seqBlocks[s0]!; c < blocks.seqBlocks[s0 + 1]!; c++) holdersNow.add(blockRank[c]!);
  const h = holdersNow.size - 1 + (joins ? 1 : 0);
  assert.equal(load.fits(s0, tok[b]!, 1, joins), send[1]! + tok[b]! * h <= load.cap);
});

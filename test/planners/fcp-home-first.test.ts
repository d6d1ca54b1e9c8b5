/**
 * Home-first placement of mode (a) (placement/home-first.ts): property tests on random batches,
 * each check also shown to reject a deliberately broken placement.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { LLAMA3_70B } from '../../src/model/attention.ts';
import { plannerContext } from '../../src/planners/fcp/context.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import type { Blocks } from '../../src/planners/fcp/placement/blocks.ts';
import type { Placement } from '../../src/planners/fcp/placement/distribute.ts';
import { placeSpread, spreadSequences } from '../../src/planners/fcp/placement/home-first.ts';
import { blockUserRanks, type SeqRows } from '../../src/planners/fcp/placement/layout.ts';
import { type Placer, placeBlocks } from '../../src/planners/fcp/placement/place.ts';
import type { Weights } from '../../src/planners/fcp/placement/weights.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const TM = new KernelTime(LLAMA3_70B);

function place(batch: string, world: number, tpr: number, seed: number, placer: Placer, blockSize = 512) {
  const problem = resolveProblem({ batch, world, tokensPerRank: tpr, seed });
  // The placer alone: mode (a)'s per-phase exchanges after it are fcp-phase-swaps.test.ts's.
  const ctx = plannerContext(problem, resolveFcpOptions({ blockSize, phaseSwaps: 0 }), TM);
  const placed = placeBlocks(ctx, false, placer);
  return { problem, userRows: ctx.userRows, ...placed };
}

/** Throws unless every block sits on one valid rank, the loads add up and memory holds. */
function checkValid(
  blocks: Blocks,
  weights: Weights,
  p: Placement,
  world: number,
  memoryTokens: number,
): void {
  const mem = new Float64Array(world);
  const load = new Float64Array(world);
  assert.equal(p.blockRank.length, blocks.seq.length, 'one rank per block');
  for (let b = 0; b < blocks.seq.length; b++) {
    const r = p.blockRank[b]!;
    assert.ok(Number.isInteger(r) && r >= 0 && r < world, `block ${b} on rank ${r}`);
    mem[r]! += blocks.length[b]!;
    load[r]! += weights.block[b]!;
  }
  for (let r = 0; r < world; r++) {
    assert.ok(mem[r]! <= memoryTokens, `rank ${r} holds ${mem[r]} tokens > ${memoryTokens}`);
    assert.ok(Math.abs(mem[r]! - p.memoryLoad[r]!) < 1e-6, `memory load of rank ${r}`);
    assert.ok(
      Math.abs(load[r]! - p.computeLoad[r]!) <= 1e-9 * weights.total + 1e-9,
      `compute load of rank ${r}`,
    );
  }
}

/** Tokens left on the rank holding most of their block in the user layout. */
function tokensHome(blocks: Blocks, rows: SeqRows, blockRank: Int32Array): number {
  const user = blockUserRanks(blocks.seq, blocks.start, blocks.length, rows);
  let t = 0;
  for (let b = 0; b < blocks.seq.length; b++) if (blockRank[b] === user[b]) t += blocks.length[b]!;
  return t;
}

const batches = fc.constantFrom('longtail', 'magi', 'bimodal', 'weak-longtail', 'uniform', 'fixed');

test('home-first: every block placed once on a valid rank, loads add up, memory never exceeded', () => {
  fc.assert(
    fc.property(
      batches,
      fc.constantFrom(1, 2, 3, 8, 16, 24),
      fc.integer({ min: 1024, max: 8192 }),
      fc.integer({ min: 0, max: 1000 }),
      (batch, world, tpr, seed) => {
        const { problem, blocks, weights, placement } = place(batch, world, tpr, seed, 'home');
        checkValid(blocks, weights, placement, world, problem.memoryTokens);
      },
    ),
    { seed: 15, numRuns: 60 },
  );
});

test('home-first validity check rejects broken placements (a block off the ranks, memory overflow, stale loads)', () => {
  const { problem, blocks, weights, placement } = place('longtail', 16, 4096, 3, 'home');
  checkValid(blocks, weights, placement, 16, problem.memoryTokens);
  const lost = { ...placement, blockRank: Int32Array.from(placement.blockRank) };
  lost.blockRank[0] = -1;
  assert.throws(() => checkValid(blocks, weights, lost, 16, problem.memoryTokens));
  const piled = { ...placement, blockRank: new Int32Array(blocks.seq.length) };
  assert.throws(() => checkValid(blocks, weights, piled, 16, problem.memoryTokens));
  const moved = { ...placement, blockRank: Int32Array.from(placement.blockRank) };
  moved.blockRank[0] = (moved.blockRank[0]! + 1) % 16;
  assert.throws(() => checkValid(blocks, weights, moved, 16, problem.memoryTokens));
});

test('home-first keeps more tokens home than the LPT placement over random batches, as balanced', () => {
  // Not per batch: refinement may move home blocks (measured at 16 ranks, seeds 1-7: home-first
  // keeps fewer on 1 of 21 batches, magi seed 7, 274825 against 310526 tokens); over the sample it
  // keeps 1.15-1.6x as many on every corpus.
  let home = 0;
  let lpt = 0;
  const imb = (x: Float64Array): number => (Math.max(...x) * x.length) / x.reduce((a, b) => a + b, 0) - 1;
  const rng = fc.sample(fc.integer({ min: 0, max: 1000 }), { seed: 15, numRuns: 4 });
  for (const batch of ['longtail', 'magi', 'bimodal'])
    for (const seed of rng) {
      const h = place(batch, 16, 32768, seed, 'home', 4096);
      const l = place(batch, 16, 32768, seed, 'lpt', 4096);
      assert.equal(h.blocks.seq.length, l.blocks.seq.length, 'same blocks');
      home += tokensHome(h.blocks, h.userRows, h.placement.blockRank);
      lpt += tokensHome(l.blocks, l.userRows, l.placement.blockRank);
      assert.ok(
        imb(h.placement.computeLoad) <= Math.max(0.0051, imb(l.placement.computeLoad) + 0.01),
        `${batch} ${seed}: imbalance ${imb(h.placement.computeLoad)}`,
      );
    }
  assert.ok(home >= 1.1 * lpt, `${home} tokens home against LPT's ${lpt}`);
});

test('the home-count check rejects a placement that scatters blocks', () => {
  const { blocks, userRows, placement } = place('longtail', 16, 32768, 1, 'home', 4096);
  const h = tokensHome(blocks, userRows, placement.blockRank);
  const shifted = Int32Array.from(placement.blockRank, (r) => (r + 1) % 16);
  assert.ok(tokensHome(blocks, userRows, shifted) < h);
});

test('home-first is deterministic: the same input twice gives the same block ranks', () => {
  for (const batch of ['longtail', 'magi', 'bimodal']) {
    const a = place(batch, 64, 32768, 2, 'home', 4096);
    const b = place(batch, 64, 32768, 2, 'home', 4096);
    assert.deepEqual(a.placement.blockRank, b.placement.blockRank);
  }
});

/**
 * Spread sequences' units before refinement (`placeSpread`, home-first.ts), from every other block
 * at its user rank. Returns the start loads and the block ranks after.
 */
function spreadFrom(batch: string, world: number, seed: number, blockSize: number) {
  const { problem, blocks, weights, userRows } = place(batch, world, 32768, seed, 'home', blockSize);
  const w = weights.block;
  const avg = weights.total / world;
  const userOf = blockUserRanks(blocks.seq, blocks.start, blocks.length, userRows);
  const spread = spreadSequences(blocks, w, userRows, avg);
  const blockRank = new Int32Array(blocks.seq.length).fill(-1);
  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  for (let b = 0; b < blocks.seq.length; b++) {
    if (spread[blocks.seq[b]!] === 1) continue;
    blockRank[b] = userOf[b]!;
    load[userOf[b]!]! += w[b]!;
    mem[userOf[b]!]! += blocks.length[b]!;
  }
  const load0 = Float64Array.from(load);
  const mem0 = Float64Array.from(mem);
  placeSpread(blocks, weights, userOf, spread, blockRank, load, mem, avg, problem.memoryTokens, 8, world);
  return { blocks, w, avg, userOf, spread, blockRank, load, load0, mem0, memoryTokens: problem.memoryTokens };
}

/**
 * Throws unless every spread sequence kept a unit on each of its own user ranks (ranks of no other
 * spread sequence) that had room for one: such a rank holds none of the sequence's blocks only if
 * every unit with a block of that rank exceeded the rank's room (mean load, memory) at the start.
 */
function checkOwnRanksFirst(x: ReturnType<typeof spreadFrom>): void {
  const { blocks, w, avg, userOf, spread, blockRank, load0, mem0, memoryTokens } = x;
  for (let b = 0; b < blocks.seq.length; b++) assert.ok(blockRank[b]! >= 0, `block ${b} placed`);
  const usersOf = new Map<number, Set<number>>();
  for (let b = 0; b < blocks.seq.length; b++)
    if (spread[blocks.seq[b]!] === 1) {
      const r = userOf[b]!;
      if (!usersOf.has(r)) usersOf.set(r, new Set());
      usersOf.get(r)!.add(blocks.seq[b]!);
    }
  for (const [r, seqs] of usersOf) {
    if (seqs.size !== 1) continue;
    const s = [...seqs][0]!;
    let held = false;
    for (let b = blocks.seqBlocks[s]!; b < blocks.seqBlocks[s + 1]!; b++) if (blockRank[b] === r) held = true;
    if (held) continue;
    for (let u = blocks.seqUnits[s]!; u < blocks.seqUnits[s + 1]!; u++) {
      const a = blocks.unitBlockA[u]!;
      const c = blocks.unitBlockB[u]!;
      if (userOf[a] !== r && (c < 0 || userOf[c] !== r)) continue;
      const uw = w[a]! + (c >= 0 ? w[c]! : 0);
      const ut = blocks.length[a]! + (c >= 0 ? blocks.length[c]! : 0);
      assert.ok(
        load0[r]! + uw > avg || mem0[r]! + ut > memoryTokens,
        `sequence ${s}: its user rank ${r} had room for unit ${u} and holds none of it`,
      );
    }
  }
}

test('spread sequences take their own user ranks before any sequence overflows', () => {
  fc.assert(
    fc.property(
      fc.constantFrom('longtail', 'magi', 'weak-longtail'),
      fc.constantFrom(16, 32, 64),
      fc.constantFrom(2048, 4096, 6144),
      fc.integer({ min: 0, max: 1000 }),
      (batch, world, blockSize, seed) => checkOwnRanksFirst(spreadFrom(batch, world, seed, blockSize)),
    ),
    { seed: 33, numRuns: 30 },
  );
});

test('the own-ranks check rejects a spread sequence moved off a user rank that had room for it', () => {
  // magi at 64 ranks, seed 1: the 117K- and 111K-token sequences are both spread (the case that
  // motivated the rule, home-first.ts).
  const x = spreadFrom('magi', 64, 1, 6144);
  checkOwnRanksFirst(x);
  const { blocks, blockRank, userOf, spread } = x;
  let moved = 0;
  for (let b = 0; b < blocks.seq.length && moved === 0; b++) {
    if (spread[blocks.seq[b]!] !== 1 || blockRank[b] !== userOf[b]) continue;
    const r = userOf[b]!;
    const s = blocks.seq[b]!;
    for (let c = blocks.seqBlocks[s]!; c < blocks.seqBlocks[s + 1]!; c++)
      if (blockRank[c] === r) {
        blockRank[c] = (r + 8) % 64;
        moved++;
      }
  }
  assert.ok(moved > 0, 'a spread block sits on its user rank');
  assert.throws(() => checkOwnRanksFirst(x), /had room/);
});

/**
 * Contiguous packing of the heavy sequences (placement/heavy.ts): property tests of its invariants
 * over generated batches, and the distributor's use of it (each long sequence on few ranks).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { LLAMA3_70B } from '../../src/model/attention.ts';
import { plannerContext } from '../../src/planners/fcp/context.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import { splitBlocks } from '../../src/planners/fcp/placement/blocks.ts';
import { type HeavyInput, packHeavy } from '../../src/planners/fcp/placement/heavy.ts';
import { blockUserRanks } from '../../src/planners/fcp/placement/layout.ts';
import { placeBlocks } from '../../src/planners/fcp/placement/place.ts';
import { refine } from '../../src/planners/fcp/placement/refine.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const TM = new KernelTime(LLAMA3_70B);

/** The packer's input for a generated batch, heavy units as the distributor defines them. */
function input(batch: string, world: number, tpr: number, seed: number): { h: HeavyInput; memory: number } {
  const p = resolveProblem({ batch, world, tokensPerRank: tpr, seed });
  const b = splitBlocks(p.sequences, p.mask, world, resolveFcpOptions({}), p.memoryTokens);
  const U = b.unitSeq.length;
  const heavy = new Uint8Array(U);
  const seqPairs = new Float64Array(b.seqUnits.length - 1);
  let lightPairs = 0;
  for (let u = 0; u < U; u++) {
    heavy[u] = b.unitPairs[u]! / b.totalPairs > b.unitTokens[u]! / b.totalTokens ? 1 : 0;
    if (heavy[u] === 1) seqPairs[b.unitSeq[u]!]! += b.unitPairs[u]!;
    else lightPairs += b.unitPairs[u]!;
  }
  const order = Array.from({ length: U }, (_, u) => u).filter((u) => heavy[u] === 1);
  order.sort((x, y) => {
    const sx = b.unitSeq[x]!;
    const sy = b.unitSeq[y]!;
    return seqPairs[sy]! - seqPairs[sx]! || sx - sy || x - y;
  });
  const h: HeavyInput = {
    unitSeq: b.unitSeq,
    unitTokens: b.unitTokens,
    unitPairs: b.unitPairs,
    heavy,
    order: Int32Array.from(order),
    totalPairs: b.totalPairs,
    lightPairs,
    totalTokens: b.totalTokens,
  };
  return { h, memory: p.memoryTokens };
}

test('packHeavy: only heavy units, within memory, each sequence on one interval of ranks, ranks open in order', () => {
  fc.assert(
    fc.property(
      fc.constantFrom('longtail', 'bimodal', 'magi', 'uniform'),
      fc.constantFrom(2, 8, 16, 64),
      fc.integer({ min: 2048, max: 16384 }),
      fc.integer({ min: 0, max: 500 }),
      (batch, world, tpr, seed) => {
        const { h, memory } = input(batch, world, tpr, seed);
        const rank = packHeavy(h, world, memory);
        const mem = new Float64Array(world);
        let last = 0;
        const span = new Map<number, [number, number]>();
        for (const u of h.order) {
          const r = rank[u]!;
          if (r < 0) continue;
          assert.ok(r < world);
          assert.ok(r >= last, 'ranks open in order along the placement order');
          last = r;
          mem[r]! += h.unitTokens[u]!;
          const s = h.unitSeq[u]!;
          const sp = span.get(s);
          span.set(s, sp ? [sp[0], r] : [r, r]);
        }
        for (let u = 0; u < rank.length; u++) if (h.heavy[u] === 0) assert.equal(rank[u], -1);
        for (let r = 0; r < world; r++) assert.ok(mem[r]! <= memory, `rank ${r} over memory`);
        // Each sequence's ranks form one interval that no other sequence enters except at its ends.
        const seqs = [...span.entries()];
        for (const [s, [a, b]] of seqs)
          for (const [t, [c, d]] of seqs)
            if (s !== t) assert.ok(d <= a || c >= b, `seq ${t} inside seq ${s}`);
        // Deterministic.
        assert.deepEqual(packHeavy(h, world, memory), rank);
      },
    ),
    { numRuns: 40 },
  );
});

test('packHeavy rejects a broken packing check: a sequence split around another fails the interval test', () => {
  // The interval check above must be able to fail: seq 0 on ranks 0 and 2, seq 1 on rank 1.
  const span = new Map<number, [number, number]>([
    [0, [0, 2]],
    [1, [1, 1]],
  ]);
  let failed = false;
  for (const [s, [a, b]] of span)
    for (const [t, [c, d]] of span) if (s !== t && !(d <= a || c >= b)) failed = true;
  assert.ok(failed);
});

/** Ranks holding units of the batch's longest sequence, and its compute share in ranks. */
function longest(packHeavy: boolean): { ranks: number[]; share: number } {
  const p = resolveProblem({ batch: 'longtail', world: 128, seed: 1 });
  const ctx = plannerContext(p, resolveFcpOptions({}), TM);
  const { blocks, weights, placement } = placeBlocks(ctx, packHeavy);
  let s0 = 0;
  for (let s = 0; s < p.sequences.length; s++) if (p.sequences[s]! > p.sequences[s0]!) s0 = s;
  let pairs = 0;
  const ranks = new Set<number>();
  for (let u = blocks.seqUnits[s0]!; u < blocks.seqUnits[s0 + 1]!; u++) {
    pairs += weights.unit[u]!;
    ranks.add(placement.unitRank[u]!);
  }
  return { ranks: [...ranks].sort((a, b) => a - b), share: (pairs * p.world) / weights.total };
}

/** Whether the ranks are consecutive. */
const consecutive = (r: number[]): boolean => r[r.length - 1]! - r[0]! === r.length - 1;

test('distributor with packHeavy: the longest sequence of a long-tailed batch holds about its compute share of consecutive ranks', () => {
  const { ranks, share } = longest(true);
  // Its units go to consecutive ranks, each filled to near the average: at most 1.35x its share
  // (the ranks keep room for the short tokens they take), where LPT spread it over 1.4-1.6x.
  assert.ok(
    ranks.length <= Math.ceil(1.35 * share) + 1,
    `${ranks.length} ranks for a share of ${share.toFixed(1)}`,
  );
  assert.ok(consecutive(ranks), 'consecutive ranks');
  // The check can fail: the LPT order (no packing) scatters the same sequence.
  assert.ok(!consecutive(longest(false).ranks));
});

/** Per rank, the K/V tokens it owes the other holders of its sequences: sum of tokens(r, s) x (holders(s) - 1). */
function sendLoad(
  seqOf: Int32Array,
  length: Int32Array,
  rankOf: (b: number) => number,
  world: number,
): number[] {
  const tok = new Map<number, number>();
  for (let b = 0; b < seqOf.length; b++) {
    const k = seqOf[b]! * world + rankOf(b);
    tok.set(k, (tok.get(k) ?? 0) + length[b]!);
  }
  const holders = new Map<number, number>();
  for (const k of tok.keys())
    holders.set(Math.floor(k / world), (holders.get(Math.floor(k / world)) ?? 0) + 1);
  const send = new Array<number>(world).fill(0);
  for (const [k, t] of tok) send[k % world]! += t * (holders.get(Math.floor(k / world))! - 1);
  return send;
}

test('refine with capSend keeps the largest send load near the greedy one; without, it can exceed it', () => {
  let exceeded = false;
  for (const [world, seed, cap] of [
    [64, 1, 1.02],
    [128, 3, 1.02],
    [256, 3, 1.02],
  ] as const) {
    const p = resolveProblem({ batch: 'longtail', world, seed });
    const mean = Math.ceil(p.sequences.reduce((a, b) => a + b, 0) / world);
    const memoryTokens = Math.min(p.memoryTokens, Math.ceil(cap * mean));
    const ctx = plannerContext({ ...p, memoryTokens }, resolveFcpOptions({}), TM);
    const { blocks, weights, placement } = placeBlocks(ctx, true);
    const unitRank = placement.unitRank;
    const greedy = Math.max(...sendLoad(blocks.seq, blocks.length, (b) => unitRank[blocks.unit[b]!]!, world));
    const userOf = blockUserRanks(blocks.seq, blocks.start, blocks.length, ctx.userRows);
    for (const capSend of [true, false]) {
      const load = new Float64Array(world);
      const mem = new Float64Array(world);
      for (let b = 0; b < blocks.seq.length; b++) {
        load[unitRank[blocks.unit[b]!]!]! += weights.block[b]!;
        mem[unitRank[blocks.unit[b]!]!]! += blocks.length[b]!;
      }
      const { blockRank } = refine(
        { blocks, weights, userOf, unitRank, load, mem, world },
        { memoryTokens, maxSteps: 4096, gpusPerNode: 8, capSend },
      );
      const max = Math.max(...sendLoad(blocks.seq, blocks.length, (b) => blockRank[b]!, world));
      // The cap is kept against the holder counts of the moment; a rank that joins a sequence
      // raises its other holders' loads a little (1.06-1.28x seen; without the cap 1.11-1.59x),
      // hence the margin.
      if (capSend) assert.ok(max <= 1.3 * greedy, `world ${world} seed ${seed}: ${max} > 1.3 x ${greedy}`);
      else if (max > 1.3 * greedy) exceeded = true;
    }
  }
  assert.ok(exceeded, 'refinement without the cap raises the send load past the check somewhere');
});

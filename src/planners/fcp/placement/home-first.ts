/**
 * Home-first placement for deployment mode (a) (issue 15, deliverables 1 and 4): the reshuffle
 * from the user's even layout is paid at every attention layer, so the placement starts from that
 * layout and moves only the work above the mean.
 *
 * 1. Home. Every block starts on the rank holding most of its tokens in the user layout
 *    (`blockUserRanks`, layout.ts); a block straddling two user ranks moves its minority part.
 * 2. Evict. A rank above the mean compute (or above its memory) sheds blocks with the most work per
 *    token first: the fewest tokens moved per millisecond of work shed. A block is shed only while
 *    that brings the rank's load closer to the mean (load - mean > w / 2), so a block far larger
 *    than the excess stays and a lighter, less dense one goes instead.
 *    Sequences heavier than SPREAD_FACTOR x their user ranks' share of the mean do not start home:
 *    their zig-zag units go to their own user ranks while those have room, the rest as the LPT
 *    distributor places them (see {@link spreadSequences}, {@link placeSpread}).
 * 3. Place. The shed blocks, heaviest first (LPT), go to the rank that takes them under the mean at
 *    the least modelled transfer cost: the block's Q/K/V/O over the link from its source (NVLink
 *    inside the source's node, the NIC across) plus the K/V of the sequence's prefix that the rank
 *    would newly need (nothing for a rank already holding a later block of that sequence). When no
 *    rank takes it under the mean, the least loaded rank with memory. Across nodes, ranks of nodes
 *    that keep room for their own shed blocks come first (node-room.ts; the same for the spread
 *    units placed anywhere): otherwise the heavy blocks, placed first, filled the other nodes and
 *    those nodes' own shed blocks crossed the NIC. Simulated, B - A of MFU forward / backward /
 *    both, mean ± standard error (`npx tsx bench/quality-ab.ts --base <before> --worlds 64,128,256
 *    --seeds 3`, 27 batches, or as noted): hopper-ib +0.0055 ± 0.0036 / +0.0006 ± 0.0016 / +0.0022
 *    ± 0.0019, under PXN +0.0052 ± 0.0040 / -0.0004 ± 0.0016 / +0.0011 ± 0.0018; 16 and 32 ranks
 *    (18) +0.0061 ± 0.0034 / +0.0028 ± 0.0021, under PXN -0.0025 ± 0.0031 / +0.0007 ± 0.0014;
 *    held-out seeds 4-6 at 16-256 (45) +0.0033 ± 0.0022 / +0.0024 ± 0.0011, under PXN +0.0045 ±
 *    0.0020 / +0.0015 ± 0.0011; contention under PXN +0.0048 ± 0.0035 / +0.0007 ± 0.0017;
 *    ratio-5920 +0.0029 ± 0.0016 / -0.0021 ± 0.0009; 1024 ranks under PXN (9) seeds 1-3 +0.0080 ±
 *    0.0060 / +0.0049 ± 0.0055, seeds 4-6 -0.0066 ± 0.0039 / +0.0048 ± 0.0067 (docs/results.md,
 *    "Session 45").
 * 4. Refine (refine.ts): block moves and swaps from the most to the least loaded rank, blocks away
 *    from their user rank first, to 0.5% above the mean; the partner hands back no block that
 *    sits on its user rank.
 *
 * Measured against the LPT placement (distribute.ts): place.ts. On longtail at 64 ranks (seed 1)
 * the forward `in` bytes fall from 23.1 to 15.2 GB and the reshuffle from 83.2 to 54.8 GB (`fcp
 * plan --world 64 --batch longtail --seed 1`); still 34% of the tokens end away from their user
 * rank (the lead's bound: 13-19%): the 512K sequence is spread, and refinement moves home blocks
 * to even out the 9% imbalance the greedy leaves with coarse shed blocks. Finer blocks for the
 * shed (`maxUnitShare` 0.25 for mode (a)) moved fewer tokens but lost MFU (simulated, longtail, 3
 * batches, fwd MFU at 64 / 256 ranks: 0.516 / 0.407 -> 0.457 / 0.293; 0.5: 0.484 / 0.370).
 */
import { FcpError, issue } from '../../../core/issues.ts';
import type { Blocks } from './blocks.ts';
import type { Placement } from './distribute.ts';
import { computeImbalance } from './distribute.ts';
import { blockUserRanks, type SeqRows } from './layout.ts';
import { NodeRoom } from './node-room.ts';
import { refine } from './refine.ts';
import type { Weights } from './weights.ts';

/** What the home-first placement needs to know of the links and the model. */
export interface HomeFirstLinks {
  /** Ranks per node (NVLink domain). */
  readonly nodeSize: number;
  /** Per-rank NVLink and NIC bandwidth, bytes per ms. */
  readonly intraBytesPerMs: number;
  readonly interBytesPerMs: number;
  /** Bytes per token the reshuffle moves for a block (Q, K, V in and O back). */
  readonly moveBytesPerToken: number;
  /** Bytes of K and V per token (what a new holder of a sequence's prefix fetches). */
  readonly kvBytesPerToken: number;
}

/**
 * Places every block home-first (module comment). `causal`: the K/V a block needs is its
 * sequence's prefix (else the whole sequence). Throws FcpError `plan.memory` when a shed block
 * fits nowhere.
 */
export function homeFirstPlacement(
  blocks: Blocks,
  weights: Weights,
  userRows: SeqRows,
  world: number,
  memoryTokens: number,
  links: HomeFirstLinks,
  causal: boolean,
  maxSteps: number,
  nodeRoom = true,
): Placement {
  const B = blocks.seq.length;
  const w = weights.block;
  const tok = blocks.length;
  const userOf = blockUserRanks(blocks.seq, blocks.start, blocks.length, userRows);
  const avg = weights.total / world;
  const spread = spreadSequences(blocks, w, userRows, avg);
  const blockRank = new Int32Array(B).fill(-1);
  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  const byRank: number[][] = Array.from({ length: world }, () => []);
  for (let b = 0; b < B; b++) {
    if (spread[blocks.seq[b]!] === 1) continue;
    const r = userOf[b]!;
    blockRank[b] = r;
    load[r]! += w[b]!;
    mem[r]! += tok[b]!;
    byRank[r]!.push(b);
  }
  // Step 2: shed blocks, densest first.
  const shed: number[] = [];
  for (let r = 0; r < world; r++) {
    if (load[r]! <= avg && mem[r]! <= memoryTokens) continue;
    const list = byRank[r]!;
    list.sort((x, y) => w[y]! * tok[x]! - w[x]! * tok[y]! || x - y);
    for (const b of list) {
      const over = load[r]! - avg;
      const memOver = mem[r]! > memoryTokens;
      if (over <= 0 && !memOver) break;
      if (!memOver && over <= w[b]! / 2) continue;
      blockRank[b] = -1;
      load[r]! -= w[b]!;
      mem[r]! -= tok[b]!;
      shed.push(b);
    }
  }
  // Each node keeps room for its own shed blocks (node-room.ts; null: one node, or switched off).
  const room = nodeRoom && links.nodeSize < world ? new NodeRoom(load, links.nodeSize, avg) : null;
  if (room !== null) for (const b of shed) room.shed(userOf[b]!, w[b]!);
  placeSpread(
    blocks,
    weights,
    userOf,
    spread,
    blockRank,
    load,
    mem,
    avg,
    memoryTokens,
    links.nodeSize,
    world,
    room,
  );
  // Where each rank's K/V need of a sequence ends (causal: the end of its last block of it), for
  // the cost of a new holder. Key: seq * world + rank.
  const needEnd = new Map<number, number>();
  for (let b = 0; b < B; b++) {
    const r = blockRank[b]!;
    if (r < 0) continue;
    const k = blocks.seq[b]! * world + r;
    const e = blocks.start[b]! + tok[b]!;
    if ((needEnd.get(k) ?? -1) < e) needEnd.set(k, e);
  }
  const node = (r: number): number => Math.floor(r / links.nodeSize);
  // Step 3: heaviest shed block first, to the cheapest rank that takes it under the mean.
  shed.sort((x, y) => w[y]! - w[x]! || x - y);
  const under: number[] = [];
  for (let r = 0; r < world; r++) if (load[r]! < avg) under.push(r);
  for (const b of shed) {
    const s = blocks.seq[b]!;
    const src = userOf[b]!;
    const a = blocks.start[b]!;
    const e = a + tok[b]!;
    const seqEnd = blocks.start[blocks.seqBlocks[s + 1]! - 1]! + tok[blocks.seqBlocks[s + 1]! - 1]!;
    let pick = -1;
    let pickCost = Number.POSITIVE_INFINITY;
    // First only ranks of nodes that keep room for their own shed blocks (node-room.ts), then any.
    for (let pass = room === null ? 1 : 0; pass < 2 && pick < 0; pass++)
      for (let k = 0; k < under.length; k++) {
        const r = under[k]!;
        if (load[r]! + w[b]! > avg || mem[r]! + tok[b]! > memoryTokens) continue;
        const local = node(r) === node(src);
        if (pass === 0 && !local && !room!.takes(r, w[b]!)) continue;
        const bw = local ? links.intraBytesPerMs : links.interBytesPerMs;
        const have = needEnd.get(s * world + r) ?? 0;
        const want = causal ? a : seqEnd - (e - a);
        const extra = Math.max(0, want - have);
        const cost =
          (tok[b]! * links.moveBytesPerToken) / bw + (extra * links.kvBytesPerToken) / links.interBytesPerMs;
        if (cost < pickCost || (cost === pickCost && r < pick)) {
          pick = r;
          pickCost = cost;
        }
      }
    if (pick < 0) {
      for (let r = 0; r < world; r++) {
        if (mem[r]! + tok[b]! > memoryTokens) continue;
        if (pick < 0 || load[r]! < load[pick]!) pick = r;
      }
    }
    if (pick < 0)
      throw new FcpError(
        issue(
          'plan.memory',
          `no rank has memory for a block of ${tok[b]} tokens of sequence ${s} (capacity ${memoryTokens} tokens per rank); raise --memory-tokens or lower --block-size`,
          'memoryTokens',
        ),
      );
    blockRank[b] = pick;
    load[pick]! += w[b]!;
    mem[pick]! += tok[b]!;
    room?.place(src, pick, w[b]!, true);
    const key = s * world + pick;
    const end = causal ? e : seqEnd;
    if ((needEnd.get(key) ?? -1) < end) needEnd.set(key, end);
    if (load[pick]! >= avg) {
      const i = under.indexOf(pick);
      if (i >= 0) under.splice(i, 1);
    }
  }
  const greedyImbalance = computeImbalance(load);
  // Step 4: refinement from this block placement (units play no part in it).
  const unitRank = new Int32Array(blocks.unitSeq.length);
  for (let u = 0; u < unitRank.length; u++) unitRank[u] = blockRank[blocks.unitBlockA[u]!]!;
  // One refinement from `start`, with `budget` steps; `keepHome`: partners hand back no block that
  // sits on its user rank.
  const refineFrom = (start: Int32Array, budget: number, keepHome: boolean) =>
    refine(
      { blocks, weights, userOf, unitRank, load, mem, world },
      { memoryTokens, maxSteps: budget, gpusPerNode: links.nodeSize, initial: start, keepHome },
    );
  // Partners hand back no home block (simulated, 3 batches, fwd/bwd MFU at 16/64/256 without ->
  // with, the redo below included: longtail 0.460/0.456 -> 0.467/0.460, 0.516/0.484 ->
  // 0.517/0.482, 0.405/0.420 -> 0.435/0.438; magi 0.471/0.456 -> 0.472/0.452, 0.335/0.389 ->
  // 0.347/0.401, 0.254/0.320 -> 0.272/0.341; bimodal 0.554/0.493 -> 0.555/0.493, 0.478/0.471 ->
  // 0.488/0.470, 0.445/0.457 -> 0.441/0.457).
  const first = refineFrom(blockRank, maxSteps, true);
  let refined = first.blockRank;
  let steps = first.steps;
  // That rule can leave refinement stuck above the mean (magi seed 906 at 16 ranks: 5.3%): then
  // refinement goes on from there with home blocks allowed to move.
  if (computeImbalance(load) > KEEP_HOME_LIMIT && steps < maxSteps) {
    const again = refineFrom(refined, maxSteps - steps, false);
    refined = again.blockRank;
    steps += again.steps;
  }
  return {
    unitRank,
    blockRank: refined,
    computeLoad: load,
    memoryLoad: mem,
    greedyImbalance,
    refineSteps: steps,
  };
}

/** Imbalance (max/mean - 1) above which refinement without home hand-backs is redone with them. */
const KEEP_HOME_LIMIT = 0.01;

/** Spread a sequence whose work exceeds this many times its user ranks' share of the mean. */
const SPREAD_FACTOR = 2;

/**
 * Sequences too heavy to stay near their user ranks (1: spread): work above SPREAD_FACTOR x (user
 * ranks holding it) x the mean. Left home-first, such a sequence's tail is shed to many ranks that
 * all fetch the prefix from the few ranks holding it (simulated, longtail seed 1 at 256 ranks: the
 * rank holding tokens 20K-51K of a 512K sequence sent them to 146 holders, 4.5M tokens' K/V, and
 * forward MFU fell from 0.42 to 0.20); zig-zag units spread its prefix over all its holders.
 */
export function spreadSequences(blocks: Blocks, w: Float64Array, rows: SeqRows, avg: number): Uint8Array {
  const S = blocks.seqBlocks.length - 1;
  const out = new Uint8Array(S);
  for (let s = 0; s < S; s++) {
    let work = 0;
    for (let b = blocks.seqBlocks[s]!; b < blocks.seqBlocks[s + 1]!; b++) work += w[b]!;
    const users = rows.off[s + 1]! - rows.off[s]!;
    out[s] = work > SPREAD_FACTOR * users * avg ? 1 : 0;
  }
  return out;
}

/**
 * Where the units of spread sequences go, in two passes (`load` and `mem` updated in place):
 * 1. Own user ranks first, for every spread sequence before any overflows (largest sequence
 *    first, its units in zig-zag order): a unit goes to a user rank of one of its blocks while
 *    that rank stays under the mean.
 * 2. The rest as the LPT placement does (distribute.ts): the rank of the sequence's previous unit
 *    (affinity), else the least loaded rank of that rank's node, else the least loaded rank with
 *    memory.
 * Why pass 1 comes for all sequences first: placed one sequence at a time, a larger sequence's
 * overflow filled a smaller one's user ranks (node-mates of its last unit), and the smaller one
 * then went wholly to other nodes, every token of it shipped out and others' shipped in
 * (simulated, `magi` at 64 ranks seed 1, PXN: the 117K-token sequence took all four user ranks of
 * the 111K one, whose 37 blocks landed on 19 ranks of 8 nodes; its user rank 33 sent all 32,768
 * of its tokens across nodes and waited 6.6 ms for its first input; `npx tsx bench/fcp-gaps.ts
 * --pxn --batch magi --worlds 64 --seeds 1 --dir forward --rank 33`).
 */
export function placeSpread(
  blocks: Blocks,
  weights: Weights,
  userOf: Int32Array,
  spread: Uint8Array,
  blockRank: Int32Array,
  load: Float64Array,
  mem: Float64Array,
  avg: number,
  memoryTokens: number,
  nodeSize: number,
  world: number,
  room: NodeRoom | null = null,
): void {
  const w = weights.block;
  const unitWork = weights.unit;
  const unitTokens = blocks.unitTokens;
  const seqs: number[] = [];
  const seqWork = new Float64Array(spread.length);
  for (let s = 0; s < spread.length; s++) {
    if (spread[s] !== 1) continue;
    seqs.push(s);
    for (let b = blocks.seqBlocks[s]!; b < blocks.seqBlocks[s + 1]!; b++) seqWork[s]! += w[b]!;
  }
  seqs.sort((x, y) => seqWork[y]! - seqWork[x]! || x - y);
  const fits = (r: number, u: number): boolean =>
    r >= 0 && mem[r]! + unitTokens[u]! <= memoryTokens && load[r]! + unitWork[u]! <= avg;
  const put = (u: number, r: number): void => {
    const bb = blocks.unitBlockB[u]!;
    blockRank[blocks.unitBlockA[u]!] = r;
    if (bb >= 0) blockRank[bb] = r;
    load[r]! += unitWork[u]!;
    mem[r]! += unitTokens[u]!;
    room?.place(r, r, unitWork[u]!, false);
  };
  // Pass 1: own user ranks; `last`: the rank of each sequence's last unit placed so far.
  const last = new Int32Array(spread.length).fill(-1);
  for (const s of seqs)
    for (let u = blocks.seqUnits[s]!; u < blocks.seqUnits[s + 1]!; u++) {
      const ra = userOf[blocks.unitBlockA[u]!]!;
      const bb = blocks.unitBlockB[u]!;
      const pick = fits(ra, u) ? ra : bb >= 0 && fits(userOf[bb]!, u) ? userOf[bb]! : -1;
      if (pick < 0) continue;
      put(u, pick);
      last[s] = pick;
    }
  // Pass 2: the rest, from the rank of the sequence's last unit of pass 1.
  for (const s of seqs) {
    let prev = last[s]!;
    for (let u = blocks.seqUnits[s]!; u < blocks.seqUnits[s + 1]!; u++) {
      if (blockRank[blocks.unitBlockA[u]!]! >= 0) continue;
      // A unit fits no user rank here (loads only grow after pass 1).
      let pick = fits(prev, u) ? prev : -1;
      if (pick < 0 && prev >= 0) {
        const n0 = Math.floor(prev / nodeSize) * nodeSize;
        for (let r = n0; r < Math.min(world, n0 + nodeSize); r++)
          if (fits(r, u) && (pick < 0 || load[r]! < load[pick]!)) pick = r;
      }
      // Else the least loaded rank: first of a node that keeps room for its own shed blocks.
      for (let pass = room === null ? 1 : 0; pass < 2 && pick < 0; pass++)
        for (let r = 0; r < world; r++)
          if (
            mem[r]! + unitTokens[u]! <= memoryTokens &&
            (pass === 1 || room!.takes(r, unitWork[u]!)) &&
            (pick < 0 || load[r]! < load[pick]!)
          )
            pick = r;
      if (pick < 0)
        throw new FcpError(
          issue(
            'plan.memory',
            `no rank has memory for a unit of ${unitTokens[u]!} tokens of sequence ${s}`,
            'memoryTokens',
          ),
        );
      put(u, pick);
      prev = pick;
    }
  }
}

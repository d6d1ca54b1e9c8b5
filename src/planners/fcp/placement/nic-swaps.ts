/**
 * Mode (a)'s reshuffle spread over the NICs (issue 15, deliverable 1: NIC bytes per rank as an
 * objective of placement). The home-first placement (home-first.ts) decides how much of each
 * sequence leaves its node, not which user ranks it leaves from: the blocks of a spread sequence go
 * in position order to the first rank with room, so the user ranks holding its late, heavy part
 * send most of what crosses nodes (longtail, 16 ranks, seed 1, 4096-token blocks: user rank 6 sent
 * 24,576 tokens' Q,K,V across nodes, about 10 ms on its NIC, while ranks 0 and 7 sent none or
 * nearly none; node 1's ranks waited 10 ms for their first `in` group, and in the backward the same
 * tokens' dQ,dK,dV came back to rank 6 at the end).
 *
 * Here blocks trade ranks when that evens the cross-node tokens each rank sends and receives in
 * the reshuffle: the sum of their squares over the touched ranks falls. Traded blocks differ in
 * work (causal: later blocks of a sequence attend to more), so a trade may move work between the
 * two ranks; it is taken only while neither rank ends above {@link NIC_TOLERANCE} over the mean
 * compute nor above the busiest rank's load before the trades, and within memory. Two kinds: two blocks of one sequence swap
 * (evens the senders, {@link sameSequenceSwaps}); an imported block goes to a node mate for whole
 * short sequences of its own ({@link importShifts}: evens the receivers). Per-phase exchanges
 * (phase-swaps.ts) run after.
 *
 * Off by default (`nicSwaps`): over paired batches it evens the bytes but not the waits, +0.009 /
 * +0.004 forward / backward MFU at 32 ranks, none at 16, noise at 64-256 (simulated; docs/results.md,
 * "Session 24", with the commands).
 */
import type { Blocks } from './blocks.ts';
import type { Placement } from './distribute.ts';
import { firstEndingAfter } from './layout.ts';
import type { SeqRows } from './seq-rows.ts';

/**
 * How far above the mean compute a swap may raise a rank (the busiest rank's load before the swaps
 * when that is higher). Chosen with the same-sequence swaps alone, on seeds 1-6 at 16/32 ranks
 * (fluid, forward / backward MFU against no swaps): 0 +0.0020 ± 0.0016 / +0.0002 ± 0.0009, 0.01 +0.0026 ± 0.0020 / +0.0008 ± 0.0012,
 * 0.02 +0.0038 ± 0.0021 / +0.0005 ± 0.0013 (36 batches each).
 */
export const NIC_TOLERANCE = 0.02;

/** Passes over all pairs at most (each pass stops early when nothing improves). */
const MAX_PASSES = 6;

/** Import shifts at most (step 2). */
const MAX_SHIFTS = 64;

/** The ranks a placement spreads over. */
export interface NicSwapSpace {
  readonly world: number;
  /** Ranks per node (NVLink domain). */
  readonly nodeSize: number;
  /** Home tokens a rank can hold. */
  readonly memoryTokens: number;
}

/**
 * Trades blocks between ranks (module comment) in the placement's `blockRank`, `computeLoad` and
 * `memoryLoad` (changed in place) and returns how many trades were made. `w`:
 * compute weight per block (what `computeLoad` sums per rank); `userRows`: the user layout by
 * sequence.
 */
export function nicSwaps(
  blocks: Blocks,
  w: Float64Array,
  userRows: SeqRows,
  placement: Placement,
  space: NicSwapSpace,
): number {
  const { world, nodeSize, memoryTokens } = space;
  const { blockRank, computeLoad: load, memoryLoad: mem } = placement;
  let cap = 0;
  let total = 0;
  for (let r = 0; r < world; r++) {
    cap = Math.max(cap, load[r]!);
    total += load[r]!;
  }
  cap = Math.max(cap, (total / world) * (1 + NIC_TOLERANCE));
  const B = blocks.seq.length;
  // Per block, its tokens per user rank (CSR).
  const segOff = new Int32Array(B + 1);
  const segRank: number[] = [];
  const segTok: number[] = [];
  for (let b = 0; b < B; b++) {
    const s = blocks.seq[b]!;
    const a = blocks.start[b]!;
    const e = a + blocks.length[b]!;
    const end = userRows.off[s + 1]!;
    for (let i = firstEndingAfter(userRows.start, userRows.length, userRows.off[s]!, end, a); i < end; i++) {
      const ra = userRows.start[i]!;
      const re = ra + userRows.length[i]!;
      if (ra >= e) break;
      segRank.push(userRows.rank[i]!);
      segTok.push(Math.min(e, re) - Math.max(a, ra));
    }
    segOff[b + 1] = segRank.length;
  }
  const node = (r: number): number => Math.floor(r / nodeSize);
  const send = new Float64Array(world);
  const recv = new Float64Array(world);
  /** Adds (sign 1) or removes (-1) block b's cross-node tokens as if it sat on rank h. */
  const apply = (b: number, h: number, sign: number): void => {
    for (let k = segOff[b]!; k < segOff[b + 1]!; k++) {
      const q = segRank[k]!;
      if (node(q) === node(h)) continue;
      send[q]! += sign * segTok[k]!;
      recv[h]! += sign * segTok[k]!;
    }
  };
  for (let b = 0; b < B; b++) apply(b, blockRank[b]!, 1);
  // Ranks a change touches: the two ranks and the moved blocks' user ranks.
  const stamp = new Int32Array(world);
  let epoch = 0;
  const touched: number[] = [];
  const touch = (r: number): void => {
    if (stamp[r] === epoch) return;
    stamp[r] = epoch;
    touched.push(r);
  };
  const squares = (): number => {
    let sq = 0;
    for (const r of touched) sq += send[r]! * send[r]! + recv[r]! * recv[r]!;
    return sq;
  };
  /**
   * Blocks `xs` (all on rank hx) and `ys` (all on rank hy) trade ranks when both ranks stay under
   * the cap and within memory and the squares fall by more than rounding (a tie keeps the
   * placement); returns whether they did.
   */
  const trade = (xs: readonly number[], ys: readonly number[], hx: number, hy: number): boolean => {
    let dw = 0;
    let dt = 0;
    for (const y of ys) {
      dw += w[y]!;
      dt += blocks.length[y]!;
    }
    for (const x of xs) {
      dw -= w[x]!;
      dt -= blocks.length[x]!;
    }
    if (load[hx]! + dw > cap || load[hy]! - dw > cap) return false;
    if (mem[hx]! + dt > memoryTokens || mem[hy]! - dt > memoryTokens) return false;
    epoch++;
    touched.length = 0;
    touch(hx);
    touch(hy);
    for (const b of [...xs, ...ys]) for (let k = segOff[b]!; k < segOff[b + 1]!; k++) touch(segRank[k]!);
    const before = squares();
    const move = (sign: number): void => {
      for (const x of xs) {
        apply(x, hx, -sign);
        apply(x, hy, sign);
      }
      for (const y of ys) {
        apply(y, hy, -sign);
        apply(y, hx, sign);
      }
    };
    move(1);
    if (squares() >= before - 0.5) {
      move(-1);
      return false;
    }
    for (const x of xs) blockRank[x] = hy;
    for (const y of ys) blockRank[y] = hx;
    load[hx]! += dw;
    load[hy]! -= dw;
    mem[hx]! += dt;
    mem[hy]! -= dt;
    return true;
  };
  return (
    sameSequenceSwaps(blocks, blockRank, trade) +
    importShifts(blocks, w, blockRank, recv, node, nodeSize, world, trade, segOff, segRank)
  );
}

/** A trade of blocks between two ranks (nicSwaps): taken or not. */
type Trade = (xs: readonly number[], ys: readonly number[], hx: number, hy: number) => boolean;

/**
 * Step 1: two blocks of one sequence on two ranks swap, which evens which user ranks send across
 * nodes (direct routing: a message leaves by its sender's NIC). Passes over all pairs of each
 * sequence's blocks while some swap is taken, at most {@link MAX_PASSES}.
 */
function sameSequenceSwaps(blocks: Blocks, blockRank: Int32Array, trade: Trade): number {
  let swaps = 0;
  const S = blocks.seqBlocks.length - 1;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    let improved = false;
    for (let s = 0; s < S; s++)
      for (let x = blocks.seqBlocks[s]!; x < blocks.seqBlocks[s + 1]!; x++)
        for (let y = x + 1; y < blocks.seqBlocks[s + 1]!; y++) {
          const hx = blockRank[x]!;
          const hy = blockRank[y]!;
          if (hx !== hy && trade([x], [y], hx, hy)) {
            swaps++;
            improved = true;
          }
        }
    if (!improved) break;
  }
  return swaps;
}

/**
 * Step 2: a block imported across nodes moves to a node mate that receives less, which hands back
 * whole short sequences of its own (blocks that are a whole sequence and cross no node) of about
 * the same work over NVLink: the ranks receiving the most across nodes are those with the least
 * work of their own, and this evens what each rank's NIC receives (under PXN routing also what
 * each NIC of the sending node sends: NCCL sends by the receiver's rail). Ranks by received tokens,
 * most first; at most {@link MAX_SHIFTS} shifts.
 */
function importShifts(
  blocks: Blocks,
  w: Float64Array,
  blockRank: Int32Array,
  recv: Float64Array,
  node: (r: number) => number,
  nodeSize: number,
  world: number,
  trade: Trade,
  segOff: Int32Array,
  segRank: readonly number[],
): number {
  const B = blocks.seq.length;
  const crosses = (b: number): boolean => {
    for (let k = segOff[b]!; k < segOff[b + 1]!; k++)
      if (node(segRank[k]!) !== node(blockRank[b]!)) return true;
    return false;
  };
  const whole = (b: number): boolean =>
    blocks.seqBlocks[blocks.seq[b]! + 1]! - blocks.seqBlocks[blocks.seq[b]!]! === 1;
  let shifts = 0;
  const tried = new Uint8Array(world);
  while (shifts < MAX_SHIFTS) {
    // The rank receiving the most across nodes not yet given up on.
    let h = -1;
    for (let r = 0; r < world; r++)
      if (tried[r] === 0 && recv[r]! > 0 && (h < 0 || recv[r]! > recv[h]!)) h = r;
    if (h < 0) break;
    const imports: number[] = [];
    for (let b = 0; b < B; b++) if (blockRank[b] === h && crosses(b)) imports.push(b);
    imports.sort((x, y) => blocks.length[y]! - blocks.length[x]! || x - y);
    const n0 = node(h) * nodeSize;
    const mates: number[] = [];
    for (let r = n0; r < Math.min(world, n0 + nodeSize); r++)
      if (r !== h && recv[r]! < recv[h]!) mates.push(r);
    mates.sort((x, y) => recv[x]! - recv[y]! || x - y);
    let done = false;
    for (const m of mates) {
      // The mate's own whole short sequences, heaviest first.
      const own: number[] = [];
      for (let b = 0; b < B; b++) if (blockRank[b] === m && whole(b) && !crosses(b)) own.push(b);
      own.sort((x, y) => w[y]! - w[x]! || x - y);
      for (const x of imports) {
        // Greedy set of the mate's blocks up to the import's work.
        const ys: number[] = [];
        let sum = 0;
        for (const y of own)
          if (sum + w[y]! <= w[x]!) {
            ys.push(y);
            sum += w[y]!;
          }
        if (ys.length > 0 && trade([x], ys, h, m)) {
          done = true;
          break;
        }
        // Or one block more than the import's work, when the first too heavy one fits the caps.
        const over = own.find((y) => !ys.includes(y));
        if (over !== undefined && trade([x], [...ys, over], h, m)) {
          done = true;
          break;
        }
      }
      if (done) break;
    }
    if (done) {
      shifts++;
      tried.fill(0);
    } else tried[h] = 1;
  }
  return shifts;
}

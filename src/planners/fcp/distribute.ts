/**
 * Block distributor (DESIGN.md, component 1): multi-dimensional Longest-Processing-Time greedy
 * (Graham, 1969, for the one-dimensional case) over placement units, then refinement.
 *
 * 1. Units are normalised by the batch totals of both loads (tokens for memory, attended pairs
 *    for compute) and taken in descending order of the larger of the two.
 * 2. Each unit goes to the least compute-loaded rank with memory room, found in O(log N) with an
 *    indexed binary heap over the ranks (best-first search below the top when the top is full).
 *    Two preferences override the plain choice:
 *    - Sequence affinity (beyond the paper): the next unit of a sequence goes to the rank that took
 *      its previous unit while that rank stays at or below the per-rank share of the multi-unit
 *      tier (units of sequences cut into several units are placed first, whole short sequences
 *      after, so that every rank keeps compute room for its share of short tokens). Plain LPT
 *      deals the equal units of a long sequence round-robin over every rank, so every rank would
 *      need that sequence's whole K/V; filling ranks in turn keeps a sequence on about
 *      (its compute / average) + 1 ranks in two contiguous runs each (zig-zag), and the gap each
 *      filled rank leaves (less than one unit) is closed later by the small units.
 *    - Locality tie-break (DESIGN.md): among ranks within `tolerance` x average of the least load,
 *      the one that holds most of the unit's tokens in the user layout, so the reshuffle moves less.
 * 3. Refinement: while it lowers the most loaded rank, move one unit from it to one of the least
 *    loaded ranks and hand back the largest of that rank's units whose compute stays under the
 *    moved unit's minus half the gap (a plain move, a swap, or one-for-many), so that both end
 *    near the middle of the gap; units of single-unit sequences are tried first so that long
 *    sequences stay contiguous. Stops at 0.2% above the mean or when nothing improves.
 */
import { FcpError, issue } from '../../core/issues.ts';
import type { Blocks } from './blocks.ts';
import type { SeqRows } from './layout.ts';
import type { FcpOptions } from './options.ts';

/** Where every unit lives, and the resulting loads. */
export interface Placement {
  readonly unitRank: Int32Array;
  /** Attended pairs per rank. */
  readonly computeLoad: Float64Array;
  /** Home tokens per rank. */
  readonly memoryLoad: Float64Array;
  /** Compute imbalance (max/mean - 1) after the greedy, before refinement. */
  readonly greedyImbalance: number;
  /** Refinement moves and swaps applied. */
  readonly refineSteps: number;
}

/** Indexed binary min-heap of ranks keyed by load (ties: lower rank first), for O(log N) updates. */
class RankHeap {
  readonly heap: Int32Array;
  readonly pos: Int32Array;
  constructor(
    readonly key: Float64Array,
    n: number,
  ) {
    this.heap = new Int32Array(n);
    this.pos = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      this.heap[i] = i;
      this.pos[i] = i;
    }
  }
  less(a: number, b: number): boolean {
    const ka = this.key[a]!;
    const kb = this.key[b]!;
    return ka < kb || (ka === kb && a < b);
  }
  /** Re-establishes the heap order after arbitrary key changes (Floyd's bottom-up heapify). */
  rebuild(): void {
    const n = this.heap.length;
    for (let i = 0; i < n; i++) this.heap[i] = i;
    for (let i = 0; i < n; i++) this.pos[i] = i;
    for (let i = (n >> 1) - 1; i >= 0; i--) this.increased(this.heap[i]!);
  }
  /** Restores the heap after key[r] increased. */
  increased(r: number): void {
    const h = this.heap;
    const n = h.length;
    let i = this.pos[r]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let c = l;
      if (l + 1 < n && this.less(h[l + 1]!, h[l]!)) c = l + 1;
      if (!this.less(h[c]!, r)) break;
      h[i] = h[c]!;
      this.pos[h[i]!] = i;
      i = c;
    }
    h[i] = r;
    this.pos[r] = i;
  }
  /** Least-loaded rank for which `ok(rank)` holds (best-first below the top), or -1. */
  find(ok: (r: number) => boolean): number {
    const h = this.heap;
    if (h.length === 0) return -1;
    if (ok(h[0]!)) return h[0]!;
    // Rare path (the top is out of memory): explore heap positions in key order.
    const frontier: number[] = [0];
    while (frontier.length > 0) {
      let bi = 0;
      for (let i = 1; i < frontier.length; i++) if (this.less(h[frontier[i]!]!, h[frontier[bi]!]!)) bi = i;
      const p = frontier[bi]!;
      frontier[bi] = frontier[frontier.length - 1]!;
      frontier.pop();
      if (ok(h[p]!)) return h[p]!;
      if (2 * p + 1 < h.length) frontier.push(2 * p + 1);
      if (2 * p + 2 < h.length) frontier.push(2 * p + 2);
    }
    return -1;
  }
}

const imbalanceOf = (load: Float64Array): number => {
  let max = 0;
  let sum = 0;
  for (let i = 0; i < load.length; i++) {
    sum += load[i]!;
    if (load[i]! > max) max = load[i]!;
  }
  return sum > 0 ? (max * load.length) / sum - 1 : 0;
};

/** Places every unit on a rank (see the module comment). Throws FcpError `plan.memory` when a unit fits nowhere. */
export function distributeUnits(blocks: Blocks, userRows: SeqRows, world: number, memoryTokens: number, o: FcpOptions): Placement {
  const U = blocks.unitSeq.length;
  const { unitTokens, unitPairs, unitSeq, seqUnits } = blocks;
  const totalPairs = blocks.totalPairs > 0 ? blocks.totalPairs : 1;
  const totalTokens = blocks.totalTokens > 0 ? blocks.totalTokens : 1;
  const avg = totalPairs / world;
  // Tier 1: units of sequences cut into several units (long, compute-dense); tier 2: whole short
  // sequences (memory-dense, little compute). Each tier in descending normalised size.
  const multi = new Uint8Array(U);
  let multiPairs = 0;
  let multiTokens = 0;
  const size = new Float64Array(U);
  for (let u = 0; u < U; u++) {
    size[u] = Math.max(unitTokens[u]! / totalTokens, unitPairs[u]! / totalPairs);
    const s = unitSeq[u]!;
    if (seqUnits[s + 1]! - seqUnits[s]! > 1) {
      multi[u] = 1;
      multiPairs += unitPairs[u]!;
      multiTokens += unitTokens[u]!;
    }
  }
  const order = new Int32Array(U);
  for (let u = 0; u < U; u++) order[u] = u;
  order.sort((a, b) => multi[b]! - multi[a]! || size[b]! - size[a]! || a - b);
  // Tier 2 is too sparse in compute to fill compute holes that tier 1 leaves, so tier 1 must end
  // balanced in compute by itself while leaving every rank memory for its share of tier 2. Tier 1
  // therefore balances the larger of compute / (its per-rank share) and memory / (memory left
  // after tier 2's per-rank share): a two-dimensional LPT on the L-infinity norm.
  const capC = Math.max(multiPairs / world, 1e-300);
  const memLeft = Math.max(memoryTokens - (totalTokens - multiTokens) / world, multiTokens / world, 1);
  // Affinity stops at the tier's per-rank share of compute, and of memory with a little slack, so
  // that a memory-dense medium sequence does not fill one rank's memory and leave its compute idle.
  const capM = Math.min(memLeft, (1.25 * multiTokens) / world);

  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  const key = new Float64Array(world);
  const unitRank = new Int32Array(U).fill(-1);
  const lastRank = new Int32Array(seqUnits.length - 1).fill(-1);
  const heap = new RankHeap(key, world);
  let inTier1 = multiPairs > 0;
  const rekey = (r: number): void => {
    key[r] = inTier1 ? Math.max(load[r]! / capC, mem[r]! / memLeft) : load[r]! / avg;
  };
  // The tolerance window in key units (tier 1 keys are relative to capC, tier 2 keys to avg).
  let win = inTier1 ? o.tolerance * (avg / capC) : o.tolerance;
  // Scratch for the locality candidates of one unit: user ranks and their token overlaps.
  const candRank: number[] = [];
  const candTok: number[] = [];
  const addOverlap = (block: number): void => {
    if (block < 0) return;
    const s = blocks.seq[block]!;
    const a = blocks.start[block]!;
    const b = a + blocks.length[block]!;
    for (let i = userRows.off[s]!, e = userRows.off[s + 1]!; i < e; i++) {
      const ra = userRows.start[i]!;
      const rb = ra + userRows.length[i]!;
      if (rb <= a) continue;
      if (ra >= b) break;
      const ov = Math.min(b, rb) - Math.max(a, ra);
      const r = userRows.rank[i]!;
      const k = candRank.indexOf(r);
      if (k >= 0) candTok[k]! += ov;
      else {
        candRank.push(r);
        candTok.push(ov);
      }
    }
  };

  for (let i = 0; i < U; i++) {
    const u = order[i]!;
    if (inTier1 && multi[u] === 0) {
      // Tier 2: plain compute LPT from here on.
      inTier1 = false;
      win = o.tolerance;
      for (let r = 0; r < world; r++) rekey(r);
      heap.rebuild();
    }
    const tok = unitTokens[u]!;
    const pairs = unitPairs[u]!;
    const s = unitSeq[u]!;
    const room = (r: number): boolean => mem[r]! + tok <= memoryTokens;
    const least = heap.find(room);
    if (least < 0)
      throw new FcpError(
        issue(
          'plan.memory',
          `no rank has memory for a unit of ${tok} tokens of sequence ${s} (capacity ${memoryTokens} tokens per rank); raise --memory-tokens or lower --block-size`,
          'memoryTokens',
        ),
      );
    let pick = -1;
    const prev = lastRank[s]!;
    if (!o.noAffinity && prev >= 0 && prev !== least && room(prev) && load[prev]! + pairs <= capC && mem[prev]! + tok <= capM)
      pick = prev;
    if (pick < 0 && !o.noLocality) {
      candRank.length = 0;
      candTok.length = 0;
      addOverlap(blocks.unitBlockA[u]!);
      addOverlap(blocks.unitBlockB[u]!);
      const limit = key[least]! + win;
      let bestTok = 0;
      for (let k = 0; k < candRank.length; k++) {
        const r = candRank[k]!;
        const t = candTok[k]!;
        if (key[r]! <= limit && room(r) && (t > bestTok || (t === bestTok && pick >= 0 && r < pick))) {
          pick = r;
          bestTok = t;
        }
      }
    }
    if (pick < 0) pick = least;
    unitRank[u] = pick;
    load[pick]! += pairs;
    mem[pick]! += tok;
    lastRank[s] = pick;
    rekey(pick);
    heap.increased(pick);
  }
  const greedyImbalance = imbalanceOf(load);
  const steps = refine(blocks, unitRank, load, mem, world, memoryTokens, o.refineSteps < 0 ? 4 * world : o.refineSteps);
  return { unitRank, computeLoad: load, memoryLoad: mem, greedyImbalance, refineSteps: steps };
}

/** Refinement passes (module comment, step 3); returns the number of steps applied. */
function refine(
  blocks: Blocks,
  unitRank: Int32Array,
  load: Float64Array,
  mem: Float64Array,
  world: number,
  memoryTokens: number,
  maxSteps: number,
): number {
  if (world < 2) return 0;
  const { unitPairs: pairs, unitTokens: tok, unitSeq, seqUnits } = blocks;
  const lists: number[][] = Array.from({ length: world }, () => []);
  for (let u = 0; u < unitRank.length; u++) lists[unitRank[u]!]!.push(u);
  const single = (u: number): boolean => {
    const s = unitSeq[u]!;
    return seqUnits[s + 1]! - seqUnits[s]! === 1;
  };
  const K = Math.min(16, world - 1);
  const lows = new Int32Array(K);
  const avg = blocks.totalPairs / world;
  const eps = 1e-9 * avg;
  // Good enough: stop once the most loaded rank is within this of the mean.
  const goal = avg * (1 + REFINE_GOAL);
  const cand: number[] = [];
  const back: number[] = [];
  let best: number[] = [];
  let steps = 0;
  while (steps < maxSteps) {
    let M = 0;
    for (let r = 1; r < world; r++) if (load[r]! > load[M]!) M = r;
    const top = load[M]!;
    if (top <= goal) break;
    // The K least-loaded ranks, ascending (insertion into a small sorted array).
    let nl = 0;
    for (let r = 0; r < world; r++) {
      if (r === M) continue;
      if (nl === K && load[r]! >= load[lows[K - 1]!]!) continue;
      let j = nl < K ? nl++ : K - 1;
      while (j > 0 && load[lows[j - 1]!]! > load[r]!) {
        lows[j] = lows[j - 1]!;
        j--;
      }
      lows[j] = r;
    }
    let bestMax = top - eps;
    let bu = -1;
    let bm = -1;
    for (let pass = 0; pass < 2 && bu < 0; pass++) {
      const onlySingle = pass === 0;
      for (let k = 0; k < nl; k++) {
        const m = lows[k]!;
        const lm = load[m]!;
        const gap = top - lm;
        if (gap <= eps) break;
        // m's candidates to hand back, by descending compute.
        cand.length = 0;
        for (const v of lists[m]!) if (!onlySingle || single(v)) cand.push(v);
        cand.sort((x, y) => pairs[y]! - pairs[x]! || x - y);
        for (const u of lists[M]!) {
          if (onlySingle && !single(u)) continue;
          const cu = pairs[u]!;
          if (cu <= 0) continue;
          // Move u to m and hand back the largest units that keep the handed-back compute at
          // most cu - gap/2: both ranks then end near the middle of the gap.
          const target = cu - gap / 2;
          let sum = 0;
          let tokBack = 0;
          back.length = 0;
          for (const v of cand) {
            if (sum + pairs[v]! <= target) {
              sum += pairs[v]!;
              tokBack += tok[v]!;
              back.push(v);
            }
          }
          const nmax = Math.max(top - cu + sum, lm + cu - sum);
          if (nmax >= bestMax) continue;
          if (mem[m]! + tok[u]! - tokBack > memoryTokens || mem[M]! - tok[u]! + tokBack > memoryTokens) continue;
          bestMax = nmax;
          bu = u;
          bm = m;
          best = back.slice();
        }
      }
    }
    if (bu < 0) break;
    for (const v of best) moveUnit(lists, unitRank, load, mem, pairs, tok, v, bm, M);
    moveUnit(lists, unitRank, load, mem, pairs, tok, bu, M, bm);
    steps++;
  }
  return steps;
}

/** Refinement stops when the most loaded rank is within this fraction of the mean compute. */
const REFINE_GOAL = 0.002;

function moveUnit(
  lists: number[][],
  unitRank: Int32Array,
  load: Float64Array,
  mem: Float64Array,
  pairs: Float64Array,
  tok: Int32Array,
  u: number,
  from: number,
  to: number,
): void {
  const l = lists[from]!;
  const i = l.indexOf(u);
  l[i] = l[l.length - 1]!;
  l.pop();
  lists[to]!.push(u);
  unitRank[u] = to;
  load[from]! -= pairs[u]!;
  load[to]! += pairs[u]!;
  mem[from]! -= tok[u]!;
  mem[to]! += tok[u]!;
}

/** Compute imbalance of a load vector: max/mean - 1 (0 for an empty batch). */
export const computeImbalance = imbalanceOf;

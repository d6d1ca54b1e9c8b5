/**
 * Block distributor (DESIGN.md, component 1): multi-dimensional Longest-Processing-Time greedy
 * (Graham, 1969, for one dimension) over placement units, then refinement.
 *
 * Each unit has two loads, memory (tokens) and compute (attended pairs). Compute must come out
 * balanced (it is the attention time); memory is a hard limit per rank.
 *
 * 1. Two tiers. Tier 1: units of sequences cut into several units (long, compute-dense); tier 2:
 *    whole short sequences (memory-dense, little compute). Tier 2 is far too sparse in compute to
 *    fill compute holes that tier 1 leaves (on `longtail` it holds ~35% of the tokens and <1% of
 *    the pairs), so tier 1 must come out balanced by itself while leaving every rank memory for its
 *    share of tier 2. Tier 1 goes in descending compute (plain LPT order: the last units placed,
 *    which bound the overshoot, are the smallest); tier 2 in descending order of the larger of its
 *    two loads, each normalised by its batch total.
 * 2. Each unit goes to the rank that minimises the larger of its two normalised loads after the
 *    unit is added (the min-max rule of multi-dimensional LPT): compute over the tier's per-rank
 *    share, memory over the memory the tier may use (tier 1: capacity minus tier 2's per-rank
 *    share). Candidates are the few least compute-loaded and the few least memory-loaded ranks with
 *    room, read off two indexed heaps in O(log N). Normalising memory by the mean instead, or
 *    looking at loads before the unit is added, lets a memory-heavy rank look "full" while it has
 *    compute room, and vice versa; plain compute LPT floods the least-loaded ranks' memory with
 *    memory-dense units that barely raise their compute.
 * 3. Two preferences override that choice:
 *    - Sequence affinity (beyond the paper): the next unit of a sequence goes to the rank that took
 *      its previous unit while that rank stays within the tier's per-rank compute share and 1.25x
 *      its memory share. Plain LPT deals the equal units of a long sequence round-robin over every
 *      rank, so every rank would need that sequence's whole K/V; filling ranks in turn keeps a
 *      sequence on about (its compute / share) + 1 ranks in two contiguous runs each (zig-zag).
 *    - Locality tie-break (DESIGN.md): among candidates whose score is within `tolerance` (as a
 *      fraction of the per-rank average) of the best, the rank that holds most of the unit's tokens
 *      in the user layout, so that the reshuffle moves fewer bytes.
 * 4. Refinement, over blocks (a zig-zag pair may part here): while it lowers the most loaded
 *    rank, move one of its blocks to one of the least loaded ranks and hand back the largest of
 *    that rank's blocks whose compute stays under the moved block's minus half the gap (a plain
 *    move, a swap, or one-for-many), so that both end near the middle of the gap; a rank short of
 *    memory also hands back memory-dense blocks. Blocks of single-block sequences are tried first,
 *    then blocks of sequences the receiving rank already holds, then any block, so that long
 *    sequences stay on few ranks. Stops at 0.5% above the mean or when nothing helps.
 */
import { attendedPairs } from '../../cluster/model.ts';
import { FcpError, issue } from '../../core/issues.ts';
import type { Mask } from '../../plan/types.ts';
import type { Blocks } from './blocks.ts';
import type { SeqRows } from './layout.ts';
import type { FcpOptions } from './options.ts';
import { RankHeap } from './rank-heap.ts';

/** Where every unit lives, and the resulting loads. */
export interface Placement {
  /** Rank of each unit after the greedy. */
  readonly unitRank: Int32Array;
  /** Rank of each block after refinement (the home layout). */
  readonly blockRank: Int32Array;
  /** Attended pairs per rank. */
  readonly computeLoad: Float64Array;
  /** Home tokens per rank. */
  readonly memoryLoad: Float64Array;
  /** Compute imbalance (max/mean - 1) after the greedy, before refinement. */
  readonly greedyImbalance: number;
  /** Refinement steps applied. */
  readonly refineSteps: number;
}

/** Compute imbalance of a load vector: max/mean - 1 (0 for an empty batch). */
export function computeImbalance(load: Float64Array): number {
  let max = 0;
  let sum = 0;
  for (let i = 0; i < load.length; i++) {
    sum += load[i]!;
    if (load[i]! > max) max = load[i]!;
  }
  return sum > 0 ? (max * load.length) / sum - 1 : 0;
}

/** Candidates read off each heap per unit. */
const HEAP_CANDIDATES = 4;

/** Places every unit on a rank (see the module comment). Throws FcpError `plan.memory` when a unit fits nowhere. */
export function distributeUnits(
  blocks: Blocks,
  sequences: Int32Array,
  mask: Mask,
  userRows: SeqRows,
  world: number,
  memoryTokens: number,
  o: FcpOptions,
): Placement {
  const causal = mask === 'causal';
  const U = blocks.unitSeq.length;
  const { unitTokens, unitPairs, unitSeq } = blocks;
  const totalPairs = blocks.totalPairs > 0 ? blocks.totalPairs : 1;
  const totalTokens = blocks.totalTokens > 0 ? blocks.totalTokens : 1;
  const avg = totalPairs / world;
  // Memory-dominant units first (by normalised memory), then compute-dominant ones (by normalised
  // compute): see step 1 of the module comment.
  const computeDominant = new Uint8Array(U);
  const size = new Float64Array(U);
  let mdTokens = 0;
  for (let u = 0; u < U; u++) {
    const nm = unitTokens[u]! / totalTokens;
    const nc = unitPairs[u]! / totalPairs;
    computeDominant[u] = nc > nm ? 1 : 0;
    size[u] = Math.max(nm, nc);
    if (nc <= nm) mdTokens += unitTokens[u]!;
  }
  // Memory-dominant units balance memory against their own per-rank mean, so that every rank keeps
  // the same room for the compute-dominant units that must then close its compute gap.
  const mdMean = Math.max(mdTokens / world, 1);
  const order = new Int32Array(U);
  for (let u = 0; u < U; u++) order[u] = u;
  // Compute-dominant units go sequence by sequence (largest sequence first, its units in order), so
  // that with affinity each long sequence fills a few ranks in turn instead of plugging the gaps of
  // many partly filled ranks (each of which would then need its whole K/V).
  const seqPairs = new Float64Array(blocks.seqUnits.length - 1);
  for (let u = 0; u < U; u++) if (computeDominant[u] === 1) seqPairs[unitSeq[u]!]! += unitPairs[u]!;
  order.sort((a, b) => {
    const da = computeDominant[a]!;
    const d = da - computeDominant[b]!;
    if (d !== 0) return d;
    if (da === 0) return size[b]! - size[a]! || a - b;
    const sa = unitSeq[a]!;
    const sb = unitSeq[b]!;
    return seqPairs[sb]! - seqPairs[sa]! || sa - sb || a - b;
  });
  // Smallest unit still to come, to retire ranks whose memory cannot take any of them.
  const minTokAfter = new Int32Array(U + 1).fill(0x7fffffff);
  for (let i = U - 1; i >= 0; i--) minTokAfter[i] = Math.min(minTokAfter[i + 1]!, unitTokens[order[i]!]!);

  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  const cKey = new Float64Array(world);
  const mKey = new Float64Array(world);
  const cHeap = new RankHeap(cKey, world);
  const mHeap = new RankHeap(mKey, world);
  const unitRank = new Int32Array(U).fill(-1);
  const lastRank = new Int32Array(blocks.seqUnits.length - 1).fill(-1);
  const cands: number[] = [];
  const userRank: number[] = [];
  const userTok: number[] = [];
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
      const r = userRows.rank[i]!;
      const k = userRank.indexOf(r);
      const ov = Math.min(b, rb) - Math.max(a, ra);
      if (k >= 0) userTok[k]! += ov;
      else {
        userRank.push(r);
        userTok.push(ov);
      }
    }
  };

  // The unit being placed (read by `room` and `score`, created once: no closures in the loop).
  let tok = 0;
  let pairs = 0;
  let mNorm = mdMean;
  const room = (r: number): boolean => mem[r]! + tok <= memoryTokens;
  const score = (r: number): number => Math.max((load[r]! + pairs) / avg, (mem[r]! + tok) / mNorm);
  for (let i = 0; i < U; i++) {
    const u = order[i]!;
    const dense = computeDominant[u] === 1;
    // Memory-dominant phase: balance both loads against their means. Compute-dominant phase: LPT
    // on compute, memory only as the capacity limit (mNorm below).
    tok = unitTokens[u]!;
    pairs = unitPairs[u]!;
    mNorm = dense ? memoryTokens : mdMean;
    const s = unitSeq[u]!;
    cands.length = 0;
    cHeap.smallest(HEAP_CANDIDATES, room, cands);
    if (!dense) mHeap.smallest(HEAP_CANDIDATES, room, cands);
    if (cands.length === 0)
      throw new FcpError(
        issue(
          'plan.memory',
          `no rank has memory for a unit of ${tok} tokens of sequence ${s} (capacity ${memoryTokens} tokens per rank); raise --memory-tokens or lower --block-size`,
          'memoryTokens',
        ),
      );
    let best = cands[0]!;
    let bestScore = score(best);
    for (let k = 1; k < cands.length; k++) {
      const r = cands[k]!;
      const sc = score(r);
      if (
        sc < bestScore ||
        (sc === bestScore && (load[r]! < load[best]! || (load[r] === load[best] && r < best)))
      ) {
        best = r;
        bestScore = sc;
      }
    }
    let pick = -1;
    const prev = lastRank[s]!;
    if (
      !o.noAffinity &&
      prev >= 0 &&
      prev !== best &&
      room(prev) &&
      load[prev]! + pairs <= avg &&
      (dense || mem[prev]! + tok <= AFFINITY_MEMORY * mdMean)
    )
      pick = prev;
    if (pick < 0 && !o.noLocality) {
      userRank.length = 0;
      userTok.length = 0;
      addOverlap(blocks.unitBlockA[u]!);
      addOverlap(blocks.unitBlockB[u]!);
      const within = bestScore + o.tolerance;
      let bestTok = 0;
      for (let k = 0; k < userRank.length; k++) {
        const r = userRank[k]!;
        const t = userTok[k]!;
        if (room(r) && score(r) <= within && (t > bestTok || (t === bestTok && pick >= 0 && r < pick))) {
          pick = r;
          bestTok = t;
        }
      }
    }
    if (pick < 0) pick = best;
    unitRank[u] = pick;
    load[pick]! += pairs;
    mem[pick]! += tok;
    lastRank[s] = pick;
    const retired = mem[pick]! + minTokAfter[i + 1]! > memoryTokens;
    cKey[pick] = retired ? Number.POSITIVE_INFINITY : load[pick]!;
    mKey[pick] = retired ? Number.POSITIVE_INFINITY : mem[pick]!;
    cHeap.increased(pick);
    mHeap.increased(pick);
  }
  const greedyImbalance = computeImbalance(load);
  const maxSteps = o.refineSteps < 0 ? Math.max(2048, 4 * world) : o.refineSteps;
  const { blockRank, steps } = refine(
    blocks,
    causal,
    sequences,
    unitRank,
    load,
    mem,
    world,
    memoryTokens,
    maxSteps,
  );
  return { unitRank, blockRank, computeLoad: load, memoryLoad: mem, greedyImbalance, refineSteps: steps };
}

/** Affinity keeps a memory-dominant sequence on one rank up to this multiple of the phase's mean memory. */
const AFFINITY_MEMORY = 1.1;

/**
 * Refinement (module comment, step 4) over blocks rather than units: the two halves of a zig-zag
 * unit may part here. Units of one long sequence all carry the same compute, so loads built from
 * them are quantised (on `longtail` at 64 ranks, a 512K sequence cut at the 256-token floor gives
 * units of ~5% of a rank's share); its early blocks carry almost nothing and fill gaps finely.
 * Returns the rank of every block and the number of steps applied.
 */
function refine(
  blocks: Blocks,
  causal: boolean,
  sequences: Int32Array,
  unitRank: Int32Array,
  load: Float64Array,
  mem: Float64Array,
  world: number,
  memoryTokens: number,
  maxSteps: number,
): { blockRank: Int32Array; steps: number } {
  const B = blocks.seq.length;
  const blockRank = new Int32Array(B);
  for (let b = 0; b < B; b++) blockRank[b] = unitRank[blocks.unit[b]!]!;
  if (world < 2) return { blockRank, steps: 0 };
  const pairs = new Float64Array(B);
  const tok = blocks.length;
  const single = new Uint8Array(B);
  for (let b = 0; b < B; b++) {
    const s = blocks.seq[b]!;
    pairs[b] = attendedPairs(causal, blocks.start[b]!, tok[b]!, 0, sequences[s]!);
    single[b] = blocks.seqBlocks[s + 1]! - blocks.seqBlocks[s]! === 1 ? 1 : 0;
  }
  // Per rank and pass (0: blocks of single-block sequences only, 1: all blocks), the blocks in
  // descending compute, kept sorted under moves; and, built on demand, by ascending compute per
  // token (memory-dense first).
  const desc = (x: number, y: number): number => pairs[y]! - pairs[x]! || x - y;
  const lists: number[][][] = [[], []];
  for (let pass = 0; pass < 2; pass++) for (let r = 0; r < world; r++) lists[pass]!.push([]);
  for (let b = 0; b < B; b++) {
    lists[1]![blockRank[b]!]!.push(b);
    if (single[b] === 1) lists[0]![blockRank[b]!]!.push(b);
  }
  for (const l of lists) for (const x of l) x.sort(desc);
  const byDensity: (number[] | undefined)[][] = [[], []];
  const sparseOf = (pass: number, r: number): number[] => {
    let l = byDensity[pass]![r];
    if (!l) {
      l = lists[pass]![r]!.slice();
      l.sort((x, y) => pairs[x]! * tok[y]! - pairs[y]! * tok[x]! || x - y);
      byDensity[pass]![r] = l;
    }
    return l;
  };
  /** Position of block b (or where it would go) in a list sorted by `desc`. */
  const where = (l: number[], b: number): number => {
    let lo = 0;
    let hi = l.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (desc(l[mid]!, b) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const avg = blocks.totalPairs / world;
  const eps = 1e-9 * avg;
  const goal = avg * (1 + REFINE_GOAL);
  // Most loaded rank: a min-heap on -load; partners in ascending load: a min-heap on load.
  const negLoad = new Float64Array(world);
  for (let r = 0; r < world; r++) negLoad[r] = -load[r]!;
  const maxHeap = new RankHeap(negLoad, world);
  const minHeap = new RankHeap(load, world);
  const partners: number[] = [];
  const taken = new Uint8Array(B);
  const back: number[] = [];
  let best: number[] = [];
  // Blocks of each sequence per rank (key: seq * world + rank), for level 1 below.
  const present = new Map<number, number>();
  for (let b = 0; b < B; b++) {
    const k = blocks.seq[b]! * world + blockRank[b]!;
    present.set(k, (present.get(k) ?? 0) + 1);
  }
  /** Whether rank r holds another block of b's sequence. */
  const holds = (r: number, b: number): boolean => (present.get(blocks.seq[b]! * world + r) ?? 0) > 0;
  const apply = (b: number, from: number, to: number): void => {
    const kf = blocks.seq[b]! * world + from;
    const kt = blocks.seq[b]! * world + to;
    present.set(kf, present.get(kf)! - 1);
    present.set(kt, (present.get(kt) ?? 0) + 1);
    for (let pass = single[b] === 1 ? 0 : 1; pass < 2; pass++) {
      const lf = lists[pass]![from]!;
      lf.splice(where(lf, b), 1);
      const lt = lists[pass]![to]!;
      lt.splice(where(lt, b), 0, b);
      byDensity[pass]![from] = undefined;
      byDensity[pass]![to] = undefined;
    }
    blockRank[b] = to;
    load[from]! -= pairs[b]!;
    load[to]! += pairs[b]!;
    mem[from]! -= tok[b]!;
    mem[to]! += tok[b]!;
    negLoad[from] = -load[from]!;
    negLoad[to] = -load[to]!;
    maxHeap.update(from);
    maxHeap.update(to);
    minHeap.update(from);
    minHeap.update(to);
  };
  let M = -1;
  const notM = (r: number): boolean => r !== M;
  let steps = 0;
  while (steps < maxSteps) {
    M = maxHeap.top();
    const top = load[M]!;
    if (top <= goal) break;
    let bestMax = top - eps;
    let bu = -1;
    let bm = -1;
    // Partners in ascending load: the least loaded few first, all of them only when those fail;
    // the first partner with an improving step takes it (its best mover).
    for (let wide = 0; wide < 2 && bu < 0; wide++) {
      partners.length = 0;
      minHeap.smallest(wide === 0 ? PARTNERS : world, notM, partners);
      // Levels: 0 moves only whole short sequences; 1 also blocks of sequences that the receiving
      // rank already holds (no new rank joins a sequence's fetch graph); 2 anything.
      for (let level = 0; level < 3 && bu < 0; level++) {
        const pass = level === 0 ? 0 : 1;
        const mine = lists[pass]![M]!;
        if (mine.length === 0) continue;
        for (let k = wide === 0 ? 0 : PARTNERS; k < partners.length && bu < 0; k++) {
          const m = partners[k]!;
          const lm = load[m]!;
          const gap = top - lm;
          if (gap <= eps) break;
          const cand = lists[pass]![m]!;
          // Blocks of M worth trying: the few whose compute is nearest above and below gap/2.
          let lo = 0;
          let hi = mine.length;
          while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (pairs[mine[mid]!]! >= gap / 2) lo = mid + 1;
            else hi = mid;
          }
          const reach = level === 1 ? 4 * MOVERS : MOVERS;
          for (let j = Math.max(0, lo - reach), je = Math.min(mine.length, lo + reach); j < je; j++) {
            const u = mine[j]!;
            const cu = pairs[u]!;
            if (cu <= 0 || (level === 1 && single[u] === 0 && !holds(m, u))) continue;
            // Move u to m and hand back the largest blocks that keep the handed-back compute at
            // most cu - gap/2: both ranks then end near the middle of the gap.
            const target = cu - gap / 2;
            let sum = 0;
            let tokBack = 0;
            back.length = 0;
            if (target > 0)
              for (let q = where(cand, u); q < cand.length; q++) {
                const v = cand[q]!;
                if (level === 1 && single[v] === 0 && !holds(M, v)) continue;
                if (sum + pairs[v]! <= target) {
                  sum += pairs[v]!;
                  tokBack += tok[v]!;
                  back.push(v);
                }
              }
            if (mem[m]! + tok[u]! - tokBack > memoryTokens) {
              // m is short of memory: also hand back its most memory-dense blocks while M still gains.
              for (const v of back) taken[v] = 1;
              for (const v of sparseOf(pass, m)) {
                if (mem[m]! + tok[u]! - tokBack <= memoryTokens) break;
                if (taken[v] === 1 || sum + pairs[v]! >= cu - eps) continue;
                if (level === 1 && single[v] === 0 && !holds(M, v)) continue;
                sum += pairs[v]!;
                tokBack += tok[v]!;
                back.push(v);
              }
              for (const v of back) taken[v] = 0;
              if (mem[m]! + tok[u]! - tokBack > memoryTokens) continue;
            }
            const nmax = Math.max(top - cu + sum, lm + cu - sum);
            if (nmax >= bestMax) continue;
            if (mem[M]! - tok[u]! + tokBack > memoryTokens) continue;
            bestMax = nmax;
            bu = u;
            bm = m;
            best = back.slice();
          }
        }
      }
    }
    if (bu < 0) break;
    for (const v of best) apply(v, bm, M);
    apply(bu, M, bm);
    steps++;
  }
  return { blockRank, steps };
}

/** Refinement stops when the most loaded rank is within this fraction of the mean compute. */
const REFINE_GOAL = 0.005;
/** Partners tried first: the least loaded ranks. */
const PARTNERS = 16;
/** Blocks of the most loaded rank tried per partner, on each side of half the gap. */
const MOVERS = 3;

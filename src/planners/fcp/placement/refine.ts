/**
 * Refinement of a block placement (step 4 of distribute.ts), over blocks rather than units: the
 * two halves of a zig-zag unit may part here. While it lowers the most loaded rank, one of its
 * blocks moves to one of the least loaded ranks, which hands back the largest of its blocks whose
 * compute stays under the moved block's minus half the gap (a plain move, a swap, or one-for-many),
 * so that both end near the middle of the gap; a rank short of memory also hands back memory-dense
 * blocks. Blocks of single-block sequences are tried first, then blocks of sequences the receiving
 * rank already holds, then any block, so that long sequences stay on few ranks. With `capSend`, no
 * move raises a rank's send load (K/V it owes other holders) above the greedy's largest. Stops at
 * 0.5% above the mean, when nothing helps, or after `maxSteps`.
 */
import type { Blocks } from './blocks.ts';

import { PartnerScreen } from './partner-screen.ts';
import { RankHeap } from './rank-heap.ts';
import { RanksByLoad } from './ranks-by-load.ts';
import { SendLoad } from './send-load.ts';
import type { Weights } from './weights.ts';

/** The placement a refinement starts from; `load` and `mem` are updated in place. */
export interface RefineInput {
  readonly blocks: Blocks;
  readonly weights: Weights;
  /** The rank holding most of each block's tokens in the user layout (`blockUserRanks`, layout.ts). */
  readonly userOf: Int32Array;
  /** Rank of each unit (the greedy's placement). */
  readonly unitRank: Int32Array;
  /** Compute and tokens per rank. */
  readonly load: Float64Array;
  readonly mem: Float64Array;
  readonly world: number;
}

/** What a refinement may do. */
export interface RefineRules {
  /** Tokens a rank may hold. */
  readonly memoryTokens: number;
  /** Most steps (refineStepBudget). */
  readonly maxSteps: number;
  /** GPUs per node: level 0 keeps a block within its user rank's node (default: one node). */
  readonly gpusPerNode?: number;
  /** No move raises a rank's send load above the start's largest (send-load.ts). */
  readonly capSend?: boolean;
  /** Start from these block ranks instead of the units' (the home-first placement, home-first.ts). */
  readonly initial?: Int32Array | null;
  /** A partner never hands back a block that sits on its user rank. */
  readonly keepHome?: boolean;
}

/**
 * Refines a unit placement block by block (module comment). Why blocks: the units of one long
 * sequence all carry the same compute, so loads built from them are quantised (on `longtail` at
 * 64 ranks a 512K sequence cut at the 256-token floor gives units of ~5% of a rank's share), while
 * its early blocks carry almost nothing and fill gaps finely. Returns the rank of every block and
 * the number of steps applied.
 */
export function refine(input: RefineInput, rules: RefineRules): { blockRank: Int32Array; steps: number } {
  const { blocks, weights, userOf, unitRank, load, mem, world } = input;
  const { memoryTokens, maxSteps } = rules;
  const gpusPerNode = rules.gpusPerNode ?? 1 << 30;
  const capSend = rules.capSend ?? false;
  const initial = rules.initial ?? null;
  const keepHome = rules.keepHome ?? false;
  const B = blocks.seq.length;
  const blockRank = new Int32Array(B);
  if (initial !== null) blockRank.set(initial);
  else for (let b = 0; b < B; b++) blockRank[b] = unitRank[blocks.unit[b]!]!;
  if (world < 2) return { blockRank, steps: 0 };
  const pairs = weights.block;
  const tok = blocks.length;
  const single = new Uint8Array(B);
  for (let b = 0; b < B; b++) {
    const s = blocks.seq[b]!;
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
  /** First position from `from` on whose block fits `sum + pairs <= target` (the rest do too). */
  const firstFit = (l: number[], from: number, sum: number, target: number): number => {
    let lo = from;
    let hi = l.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sum + pairs[l[mid]!]! <= target) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  const avg = weights.total / world;
  const eps = 1e-9 * avg;
  const goal = avg * (1 + REFINE_GOAL);
  // Most loaded rank: a min-heap on -load. Partners in ascending (load, rank): every rank in that
  // order (ranks-by-load.ts).
  const negLoad = new Float64Array(world);
  for (let r = 0; r < world; r++) negLoad[r] = -load[r]!;
  const maxHeap = new RankHeap(negLoad, world);
  const byLoad = new RanksByLoad(load, world);
  // Partners that cannot take any block of M at a level, skipped unread (partner-screen.ts).
  const nodeOf = new Int32Array(world);
  for (let r = 0; r < world; r++) nodeOf[r] = Math.floor(r / gpusPerNode);
  const scr = new PartnerScreen(blocks, pairs, userOf, single, blockRank, nodeOf);
  const taken = new Uint8Array(B);
  // The blocks a candidate step hands back, and those of the best step so far (typed, with their
  // counts: `length = 0` on a plain array is a runtime call, a tenth of this function's time).
  const back = new Int32Array(B);
  let backN = 0;
  const best = new Int32Array(B);
  let bestN = 0;
  // Blocks of each sequence per rank (key: seq * world + rank), for level 1 below.
  const present = new Map<number, number>();
  for (let b = 0; b < B; b++) {
    const k = blocks.seq[b]! * world + blockRank[b]!;
    present.set(k, (present.get(k) ?? 0) + 1);
  }
  // Send load (send-load.ts): kept only with `capSend` (nothing else reads it; refinement is a hot
  // loop at scale).
  const sendLoad = capSend
    ? new SendLoad(blocks.seq, tok, blockRank, blocks.seqBlocks.length - 1, world)
    : null;
  /** Whether moving block b to `to` keeps `to`'s send load within the cap. */
  const sendOk = (b: number, to: number): boolean =>
    sendLoad!.fits(blocks.seq[b]!, tok[b]!, to, !holds(to, b));
  /** Whether rank r holds another block of b's sequence. */
  const holdsNow = (r: number, b: number): boolean => (present.get(blocks.seq[b]! * world + r) ?? 0) > 0;
  /**
   * holdsNow for the search of a step, where most reads need no table: M's own sequences are
   * stamped at the step's start (`onM`), and the holders of M's sequences of several blocks carry
   * their bits (`seqMask`; only blocks with compute are asked about).
   */
  const holds = (r: number, b: number): boolean => {
    const q = blocks.seq[b]!;
    if (r === M) return scr.onMost(q);
    const k = scr.knownHolds(r, q);
    return k < 0 ? holdsNow(r, b) : k === 1;
  };
  const apply = (b: number, from: number, to: number): void => {
    const kf = blocks.seq[b]! * world + from;
    const kt = blocks.seq[b]! * world + to;
    const s = blocks.seq[b]!;
    const joined = sendLoad !== null && !holdsNow(to, b);
    sendLoad?.leave(s, tok[b]!, from);
    present.set(kf, present.get(kf)! - 1);
    present.set(kt, (present.get(kt) ?? 0) + 1);
    sendLoad?.arrive(s, tok[b]!, to, joined, present.get(kf) === 0);
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
  };
  /**
   * Whether block b may move from `from` to `to` at a level: 0, only a block that is not on its
   * user rank (moving it again adds no reshuffle), to a rank of its user rank's node (its
   * reshuffle goes over NVLink), joining no new rank to its sequence's fetch graph; 1, the same
   * anywhere; 2, a whole short sequence (the list of pass 0); 3, a short sequence or a block of a
   * sequence `to` holds; 4, any block.
   */
  const eligible = (level: number, b: number, from: number, to: number): boolean => {
    if (level === 0)
      return userOf[b] !== from && nodeOf[to] === scr.userNodeOf(b) && (single[b] === 1 || holds(to, b));
    if (level === 1) return userOf[b] !== from && (single[b] === 1 || holds(to, b));
    if (level === 3) return single[b] === 1 || holds(to, b);
    return true;
  };
  const allowed = capSend
    ? (level: number, b: number, from: number, to: number): boolean =>
        eligible(level, b, from, to) && (single[b] === 1 || sendOk(b, to))
    : eligible;
  let M = -1;
  // Per partner and level (a `visit`), whether each of the partner's blocks may go back to M
  // (`backOk`), and its sparse list (sparseOf) cut to those blocks with their tokens: one pass
  // per visit instead of one per mover. On memory-tight caps (mode (b), 1.15 x the mean tokens
  // at 4096 ranks) nearly every partner is short of memory, and each of a partner's movers read
  // its whole sparse list: 380 million block checks in one placement.
  let visit = 0;
  const seenAt = new Int32Array(B).fill(-1);
  const okBack = new Uint8Array(B);
  const backOk = (level: number, v: number, m: number): boolean => {
    if (seenAt[v] !== visit) {
      seenAt[v] = visit;
      okBack[v] = allowed(level, v, m, M) && !(keepHome && userOf[v] === m) ? 1 : 0;
    }
    return okBack[v] === 1;
  };
  const sparseBack = new Int32Array(B);
  let sparseN = 0;
  let sparseAt = -1;
  // Compute and tokens of the first i blocks of `sparseBack` (ascending compute per token).
  const cumPairs = new Float64Array(B + 1);
  const cumTok = new Float64Array(B + 1);
  /**
   * The blocks of sparseOf(pass, m) that may go back to M at `level`, in order: the first n of
   * `sparseBack`, n returned.
   */
  const sparseBackOf = (pass: number, level: number, m: number): number => {
    if (sparseAt !== visit) {
      sparseAt = visit;
      sparseN = 0;
      for (const v of sparseOf(pass, m))
        if (backOk(level, v, m)) {
          cumPairs[sparseN + 1] = cumPairs[sparseN]! + pairs[v]!;
          cumTok[sparseN + 1] = cumTok[sparseN]! + tok[v]!;
          sparseBack[sparseN++] = v;
        }
    }
    return sparseN;
  };
  /**
   * At least the tokens m can hand back to M at `level` with at most `c` compute (any blocks of
   * `sparseBack`): the fractional knapsack by compute per token, rounded up by a block and a
   * little compute against rounding. A step hands back less than the moved block's compute.
   */
  const mostTokensBack = (pass: number, level: number, m: number, c: number): number => {
    const n = sparseBackOf(pass, level, m);
    const budget = c * (1 + 1e-9) + eps;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cumPairs[mid + 1]! <= budget) lo = mid + 1;
      else hi = mid;
    }
    return cumTok[Math.min(n, lo + 2)]!;
  };
  let steps = 0;
  while (steps < maxSteps) {
    M = maxHeap.top();
    const top = load[M]!;
    if (top <= goal) break;
    let bestMax = top - eps;
    let bu = -1;
    let bm = -1;
    scr.build(M, lists[1]![M]!, steps);
    // Partners in ascending load (`byLoad` without M): the least loaded few first, all of them
    // only when those fail; the first partner with an improving step takes it (its best mover).
    // Partners that cannot take any of M's blocks at a level are skipped unread (`mayTake`, a
    // necessary condition of `eligible`): at 256 ranks in mode (b) half the first few at level 0.
    for (let wide = 0; wide < 2 && bu < 0; wide++) {
      const count = wide === 0 ? Math.min(PARTNERS, world - 1) : world - 1;
      // Levels (see `eligible`): 0 moves only blocks that leave their user rank anyway, within its
      // node; 1 such blocks anywhere; 2 whole short sequences; 3 also blocks of sequences that the
      // receiving rank already holds (no new rank joins a sequence's fetch graph); 4 anything.
      for (let level = 0; level < LEVELS && bu < 0; level++) {
        const pass = level === 2 ? 0 : 1;
        const mine = lists[pass]![M]!;
        if (mine.length === 0) continue;
        for (let k = wide === 0 ? 0 : PARTNERS; k < count && bu < 0; k++) {
          const m = byLoad.nthWithout(k, M);
          const lm = load[m]!;
          const gap = top - lm;
          if (gap <= eps) break;
          if (!scr.mayTake(level, m)) continue;
          const cand = lists[pass]![m]!;
          visit++;
          // Blocks of M worth trying: the few whose compute is nearest above and below gap/2.
          let lo = 0;
          let hi = mine.length;
          while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (pairs[mine[mid]!]! >= gap / 2) lo = mid + 1;
            else hi = mid;
          }
          const reach = level === 2 || level === 4 ? MOVERS : 4 * MOVERS;
          for (let j = Math.max(0, lo - reach), je = Math.min(mine.length, lo + reach); j < je; j++) {
            const u = mine[j]!;
            const cu = pairs[u]!;
            if (cu <= 0 || !allowed(level, u, M, m)) continue;
            // Short of memory even if m handed back every block it may: no step with u.
            if (
              mem[m]! + tok[u]! > memoryTokens &&
              mem[m]! + tok[u]! - mostTokensBack(pass, level, m, cu) > memoryTokens
            )
              continue;
            // Move u to m and hand back the largest blocks that keep the handed-back compute at
            // most cu - gap/2: both ranks then end near the middle of the gap.
            const target = cu - gap / 2;
            let sum = 0;
            let tokBack = 0;
            backN = 0;
            // The list descends in compute, so the blocks that still fit are a suffix from some
            // position on: jump to it (firstFit) instead of reading the ones that do not.
            if (target > 0)
              for (let q = firstFit(cand, where(cand, u), 0, target); q < cand.length; ) {
                const v = cand[q]!;
                if (!backOk(level, v, m)) q++;
                else {
                  sum += pairs[v]!;
                  tokBack += tok[v]!;
                  back[backN++] = v;
                  q = firstFit(cand, q + 1, sum, target);
                }
              }
            if (mem[m]! + tok[u]! - tokBack > memoryTokens) {
              // m is short of memory: also hand back its most memory-dense blocks while M still gains.
              for (let k = 0; k < backN; k++) taken[back[k]!] = 1;
              for (let k = 0, n = sparseBackOf(pass, level, m); k < n; k++) {
                const v = sparseBack[k]!;
                if (mem[m]! + tok[u]! - tokBack <= memoryTokens) break;
                if (taken[v] === 1 || sum + pairs[v]! >= cu - eps) continue;
                sum += pairs[v]!;
                tokBack += tok[v]!;
                back[backN++] = v;
              }
              for (let k = 0; k < backN; k++) taken[back[k]!] = 0;
              if (mem[m]! + tok[u]! - tokBack > memoryTokens) continue;
            }
            const nmax = Math.max(top - cu + sum, lm + cu - sum);
            if (nmax >= bestMax) continue;
            if (mem[M]! - tok[u]! + tokBack > memoryTokens) continue;
            bestMax = nmax;
            bu = u;
            bm = m;
            best.set(back.subarray(0, backN));
            bestN = backN;
          }
        }
      }
    }
    if (bu < 0) break;
    for (let k = 0; k < bestN; k++) apply(best[k]!, bm, M);
    apply(bu, M, bm);
    byLoad.update(M, bm);
    steps++;
  }
  return { blockRank, steps };
}

/**
 * Refinement steps allowed for `refineSteps` (the option; -1, the default, means max(2048, 16 x
 * world)) at `world` ranks: one rule for both placers.
 */
export function refineStepBudget(refineSteps: number, world: number): number {
  return refineSteps < 0 ? Math.max(2048, 16 * world) : refineSteps;
}

/** Refinement stops when the most loaded rank is within this fraction of the mean compute. */
const REFINE_GOAL = 0.005;
/** Partners tried first: the least loaded ranks. */
const PARTNERS = 16;
/** Blocks of the most loaded rank tried per partner, on each side of half the gap. */
const MOVERS = 3;
/** Eligibility levels of {@link refine}. */
const LEVELS = 5;

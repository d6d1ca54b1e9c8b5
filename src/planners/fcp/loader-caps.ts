/**
 * The token caps of mode (b)'s layout search (index.ts, planForLoaderLayout) and the layout each
 * gives: the blocks placed under the cap, levelled to equal tokens (placement/loader-layout.ts),
 * and the figure the search keeps the least of. One module so that the planner and
 * bench/loader-levelling.ts, which shows what levelling does under each cap, evaluate a cap the
 * same way.
 */
import { kvBytesPerToken } from '../../model/attention.ts';
import type { Layout } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { plannerContext } from './context.ts';
import type { KernelTime } from './kernel-time.ts';
import type { FcpOptions } from './options.ts';
import { homeLayoutOf, homeRuns } from './placement/layout.ts';
import { kvTrafficMs } from './placement/loader-comm.ts';
import { levelTokens } from './placement/loader-layout.ts';
import { type Placed, placeBlocks } from './placement/place.ts';
import { linkModel } from './transfers/links.ts';

/**
 * Token caps tried for the placement behind the loader layout, as multiples of the mean tokens per
 * rank (Infinity: only the memory cap). A tight cap keeps the placement near equal tokens, so
 * levelling moves little compute, but may leave compute unbalanced when blocks pack badly under
 * it; which cap wins varies by batch and scale (longtail, after levelling: 16 ranks best with no
 * cap, 64 with 1.05, 256 with 1.02-1.05; magi at 256 ranks mostly 1.15), so each is tried and the
 * best kept. Each costs two placements, no phase planning. 1.2 and 1.15 added (simulated, mode
 * (b), 3 batches, fwd/bwd MFU: magi 128 0.521/0.445 -> 0.526/0.448, 256 0.478/0.450 ->
 * 0.491/0.455; longtail 64 0.603/0.502 -> 0.608/0.503, 256 0.537/0.479 -> 0.532/0.480; bimodal 16
 * 0.607/0.492 -> 0.609/0.494; the rest unchanged).
 */
export const LOADER_CAPS = [Number.POSITIVE_INFINITY, 1.2, 1.15, 1.1, 1.05, 1.02];

/** The layout of one token cap (see {@link layoutAtCap}). */
export interface CapLayout {
  readonly cap: number;
  /** The capped placement (its home layout is `home`). */
  readonly placed: Placed;
  /** Its home layout, before levelling. */
  readonly home: Layout;
  /** The levelled layout: every rank's tokens within the band. */
  readonly layout: Layout;
  /** Block size of each sequence in the capped placement. */
  readonly blockSize: Int32Array;
  /** The busiest rank's K/V time of `layout`, ms (placement/loader-comm.ts; 0 with `balance: 'pairs'`; NaN unscored). */
  readonly kvMs: number;
  /** What the search keeps the least of: the busiest rank of `layout` placed home-first, plus `kvMs` (NaN unscored). */
  readonly cost: number;
}

/**
 * Whether `blockSize` cuts some sequence into smaller blocks than `reference` does (both per
 * sequence): a tight cap's memory fallback (placement/place.ts) retries with smaller blocks, and
 * the search then skips that cap ({@link capKept}). Under run 17a's tables, 16-128 ranks, 3
 * batch kinds, seeds 1-3, all 62 caps that shrank blocks were such retries: one smaller block
 * size for every sequence (512-2048 against the first cap's 4096 or 4096/2048).
 */
export function shrinksBlocks(blockSize: Int32Array, reference: Int32Array): boolean {
  for (let s = 0; s < blockSize.length; s++) if (blockSize[s]! < reference[s]!) return true;
  return false;
}

/**
 * Whether mode (b)'s cap search may keep the layout of a cap whose blocks are `blockSize`, given
 * the blocks of the loosest cap it tried (`reference`, the first of the list): not when the cap
 * shrank blocks. The search's cost (the busiest rank's modelled compute, launch overheads left
 * out, plus its K/V time) cannot tell what smaller blocks really cost: more and smaller launches,
 * whose overhead the op cost charges per launch (cost/op-cost.ts). Under the shipped H200 tables
 * no shrunk cap was ever kept at 16-128 ranks (3 batch kinds, seeds 1-3: plans unchanged); under
 * two H100 calibrations, whose measured launch overhead is 1.3-2x the H200 table's, the search
 * kept `longtail` 16 seed 3 at cap 1.02 with 1024-token blocks by a 0.3 ms lead of its cost
 * (117.58 against 117.87 ms), and the plan simulated 10% slower than the cap-1.1 plan with 4096
 * blocks (133 against 119 ms, forward plus backward). Skipping shrunk caps, mode (b), 36 batches
 * per table, 16-128 ranks, B - A of MFU forward + backward: +0.0042 ± 0.0018 and +0.0027 ±
 * 0.0010, 9 up and 0 down under each (simulated; docs/results.md, "Session 37").
 */
export function capKept(blockSize: Int32Array, reference: Int32Array | null): boolean {
  return reference === null || !shrinksBlocks(blockSize, reference);
}

/** Largest entry of a load vector. */
export function maxOf(load: Float64Array): number {
  let m = 0;
  for (let i = 0; i < load.length; i++) if (load[i]! > m) m = load[i]!;
  return m;
}

/**
 * Places the blocks of `problem` under token cap `cap` (x the mean tokens per rank) and levels the
 * result. `scored` false: the search has nothing to compare (one cap), so the levelled layout's
 * placement and K/V time, which only score it, are skipped (`kvMs` and `cost` are then NaN; at
 * 4096 ranks that placement was a sixth of mode (b)'s planning time). `reference`: the blocks of
 * the search's first cap; a cap that shrank them is not kept ({@link capKept}), so it is not
 * scored either.
 */
export function layoutAtCap(
  problem: Problem,
  o: FcpOptions,
  kernel: KernelTime,
  cap: number,
  scored = true,
  reference: Int32Array | null = null,
): CapLayout {
  const { sequences, world, mask } = problem;
  const mean = Math.ceil(sequences.reduce((a, b) => a + b, 0) / world);
  const memoryTokens = Math.min(problem.memoryTokens, Math.ceil(cap * mean));
  // Long sequences packed onto consecutive ranks first (placement/heavy.ts): no reshuffle pays
  // for leaving the user layout here, and a long sequence then spans about its compute share of
  // ranks, so less K/V crosses the NIC (simulated, mode (b), 3 batches, fwd MFU: magi 128
  // 0.440 -> 0.508, 256 0.402 -> 0.440; longtail 256 0.457 -> 0.537; bimodal 256 0.586 -> 0.604).
  const placed = placeBlocks(plannerContext({ ...problem, memoryTokens }, o, kernel), true);
  const home = homeLayoutOf(homeRuns(placed.blocks, placed.placement.blockRank, world));
  const layout = levelTokens(home, sequences, world, mask);
  const blockSize = placed.blocks.blockSizeOfSeq;
  if (!scored || !capKept(blockSize, reference))
    return { cap, placed, home, layout, blockSize, kvMs: Number.NaN, cost: Number.NaN };
  const levelled = placeBlocks(plannerContext({ ...problem, userLayout: layout }, o, kernel, blockSize));
  // Kept by the busiest rank's modelled load, not by the imbalance ratio: a tight cap can force
  // the memory fallback's smaller blocks (longtail at 32 ranks: 512-token blocks, backward kernel
  // MFU 0.32 against 0.48 with 4K blocks), balanced but slower. With `balance: 'pairs'` the load
  // is attended pairs, the same for every cap, so this is then the imbalance order.
  // The busiest rank's K/V time is added (placement/loader-comm.ts): in mode (b) only K/V moves,
  // and on `magi` the caps differ far more in it than in compute (simulated, mode (b), 3 batches,
  // fwd MFU by compute alone -> with it: 64 ranks 0.562 -> 0.570, 128 0.508 -> 0.521, 256 0.440
  // -> 0.478; longtail unchanged, bimodal within 0.001).
  const links = linkModel(problem.cluster, problem.gpusPerNode);
  const kvMs =
    o.balance === 'time'
      ? kvTrafficMs(layout, sequences, mask, world, links, kvBytesPerToken(problem.model))
      : 0;
  return { cap, placed, home, layout, blockSize, kvMs, cost: maxOf(levelled.placement.computeLoad) + kvMs };
}

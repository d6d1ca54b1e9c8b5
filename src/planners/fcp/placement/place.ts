/**
 * Placement with its fallbacks: blocks (blocks.ts), their weights (weights.ts) and the distributor
 * (distribute.ts), retried so that memory never makes a valid problem fail. resolveProblem only
 * accepts batches whose tokens fit the ranks' memory in total; units of a block split may still not
 * pack (a batch that fills every rank exactly, or blocks large against the memory), so when the
 * distributor reports `plan.memory` the split is retried with half the memory cap on block sizes,
 * and after {@link MEMORY_ATTEMPTS} splits the user layout itself becomes the home layout: it always
 * fits (no rank holds more than ceil(total / world) tokens there) and moves nothing.
 *
 * Mode (a) places home-first (home-first.ts) by default; mode (b) (`packHeavy`) and `noLocality`
 * keep the LPT distributor. Neither wins every batch (simulated, hopper-ib, fluid, both placements
 * planned and simulated on longtail/magi/bimodal x 16/64/256 ranks x seeds 1-3: home-first has the
 * shorter forward + backward makespan on 20 of 27; LPT wins magi 256 seed 1 by 12%, 210 against
 * 240 ms). A cheap layout model (busiest rank's K/V time, loader-comm.ts, plus its reshuffle time)
 * ordered them right on only 13-18 of 27, worse than always home-first; the planner's own timeline
 * estimate (index.ts) ordered 21 of 27 right, with every wrong pick within 1.7 ms, so the choice
 * belongs where that estimate is made: `placer` lets index.ts plan both.
 */

import { FcpError } from '../../../core/issues.ts';
import { kvBytesPerToken, qBytesPerToken } from '../../../model/attention.ts';
import type { PlannerContext } from '../context.ts';
import type { TileGeometry } from '../grid.ts';
import type { FcpOptions } from '../options.ts';
import { type Blocks, splitBlocks, userLayoutBlocks } from './blocks.ts';
import { distributeUnits, type Placement, userPlacement } from './distribute.ts';
import { homeFirstPlacement } from './home-first.ts';
import { nicSwaps } from './nic-swaps.ts';
import { phaseSwapSteps, swapPlacement } from './phase-swaps.ts';
import { refineStepBudget } from './refine.ts';
import { type Weights, weighBlocks } from './weights.ts';

/** Block splits tried (each with half the previous memory cap on block sizes) before the user layout. */
export const MEMORY_ATTEMPTS = 6;

/** A run that starts a sequence and spans at most this many tiles is one causal square. */
const WHOLE_TILES = 8;

/** Geometry the weights assume when tasks are not tiled (`tile: 0`): whole runs, no strips. */
const UNTILED: TileGeometry = { tmax: 1 << 30, minTile: 1 << 30, wholeMax: 1 << 30 };

/** Tile geometry of the options, or null when tiling is off (`tile: 0`). */
export function tileGeometry(o: FcpOptions): TileGeometry | null {
  if (o.tile <= 0) return null;
  return { tmax: o.tile, minTile: o.minTile, wholeMax: WHOLE_TILES * o.tile };
}

/** Geometry the compute weights assume: the options' tiles, or whole runs when tiling is off. */
export function weightGeometry(o: FcpOptions): TileGeometry {
  return tileGeometry(o) ?? UNTILED;
}

/**
 * Which placement mode (a) uses: `home`, home-first (home-first.ts), the default (simulated,
 * hopper-ib, 3 batches, fwd/bwd MFU LPT -> home-first at 16/64/256: longtail 0.430/0.441 ->
 * 0.467/0.460, 0.508/0.476 -> 0.517/0.482, 0.422/0.417 -> 0.435/0.438; magi 0.453/0.447 ->
 * 0.472/0.452, 0.323/0.392 -> 0.347/0.401, 0.270/0.320 -> 0.272/0.341; bimodal 0.532/0.482 ->
 * 0.555/0.493, 0.450/0.445 -> 0.488/0.470, 0.414/0.427 -> 0.441/0.457; `fcp compare --strategies
 * fcp --world 16,64,256 --batch B --batches 3`); `home-flat`, home-first without the nodes' room for
 * their own shed blocks (node-room.ts; the placement before session 45, kept for comparison);
 * `lpt`, the multi-dimensional LPT of distribute.ts.
 */
export type Placer = 'home' | 'home-flat' | 'lpt';

/** Blocks, weights and placement, and how many splits it took (0: the user layout). */
export interface Placed {
  readonly blocks: Blocks;
  readonly weights: Weights;
  readonly placement: Placement;
  /** Block splits tried; 0 when the user layout was kept. */
  readonly attempts: number;
  /** Milliseconds spent splitting and weighing (the rest is distribution). */
  readonly splitMs: number;
  /** Mode (a)'s per-phase exchanges applied (phase-swaps.ts); absent: none. */
  readonly phaseSwaps?: number;
  /** Mode (a)'s swaps that spread the cross-node reshuffle over the NICs (nic-swaps.ts); absent: none. */
  readonly nicSwaps?: number;
}

/**
 * Splits, weighs and places the blocks of `problem` (module comment). `packHeavy`: the long
 * sequences' units go first onto consecutive ranks (heavy.ts); for the placement behind the loader
 * layout (mode (b)), where no reshuffle pays for leaving the user layout (simulated, longtail, 3
 * batches: mode (b) forward MFU 0.457 -> 0.537 at 256 ranks; mode (a) lost 0.397 -> 0.368 there).
 */
export function placeBlocks(ctx: PlannerContext, packHeavy = false, placer: Placer = 'home'): Placed {
  const { problem, o, kernel: tm, userRows } = ctx;
  const nodeSize = ctx.links.nodeSize;
  const { sequences, mask, world, memoryTokens } = problem;
  const grid = weightGeometry(o);
  const weigh = (b: Blocks): Weights =>
    weighBlocks(b, sequences, mask, o.balance === 'time' ? tm : null, grid);
  let splitMs = 0;
  const fixed = ctx.homeFromUser;
  // Mode (a): the home-first placement (home-first.ts) unless locality is switched off.
  const homeFirst = placer !== 'lpt' && !packHeavy && !o.noLocality;
  const links = {
    nodeSize,
    intraBytesPerMs: ctx.links.intraBytesPerMs,
    interBytesPerMs: ctx.links.interBytesPerMs,
    moveBytesPerToken: 2 * qBytesPerToken(ctx.model) + kvBytesPerToken(ctx.model),
    kvBytesPerToken: kvBytesPerToken(ctx.model),
  };
  for (let attempt = 0; fixed === null && attempt < MEMORY_ATTEMPTS; attempt++) {
    const t0 = performance.now();
    const blocks = splitBlocks(sequences, mask, world, o, memoryTokens, 2 ** attempt);
    const weights = weigh(blocks);
    splitMs += performance.now() - t0;
    try {
      const placement = homeFirst
        ? homeFirstPlacement(
            blocks,
            weights,
            userRows,
            world,
            memoryTokens,
            links,
            mask === 'causal',
            refineStepBudget(o.refineSteps, world),
            placer === 'home',
          )
        : distributeUnits(blocks, weights, userRows, world, memoryTokens, o, nodeSize, packHeavy);
      // Mode (a), experimental: the cross-node reshuffle spread over the NICs (nic-swaps.ts).
      const nic =
        homeFirst && o.nicSwaps
          ? nicSwaps(blocks, weights.block, userRows, placement, { world, nodeSize, memoryTokens })
          : 0;
      // Mode (a): the home layout evened phase by phase (phase-swaps.ts).
      const steps = homeFirst ? phaseSwapSteps(o, world, nodeSize) : 0;
      const swapped =
        steps > 0
          ? swapPlacement(blocks, placement, {
              sequences,
              mask,
              world,
              memoryTokens,
              nodeSize,
              grid,
              kernel: tm,
              o,
              steps,
              weigh,
            })
          : null;
      if (swapped !== null)
        return {
          blocks: swapped.blocks,
          weights: swapped.weights,
          placement: swapped.placement,
          attempts: attempt + 1,
          splitMs,
          phaseSwaps: swapped.steps,
          ...(nic > 0 ? { nicSwaps: nic } : {}),
        };
      return {
        blocks,
        weights,
        placement,
        attempts: attempt + 1,
        splitMs,
        ...(nic > 0 ? { nicSwaps: nic } : {}),
      };
    } catch (e) {
      if (!(e instanceof FcpError && e.code === 'plan.memory')) throw e;
    }
  }
  const blocks = userLayoutBlocks(sequences, userRows, mask, o, fixed ?? undefined);
  const weights = weigh(blocks);
  return {
    blocks,
    weights,
    placement: userPlacement(blocks, weights, userRows, world),
    attempts: 0,
    splitMs,
  };
}

/**
 * Mode (a)'s placement evened phase by phase (issue 15, compute balance per phase). The home-first
 * placement (home-first.ts) balances one weight per block, its forward plus its backward modelled
 * time, so the sum comes out even but each phase alone does not: a block's forward and backward
 * times differ in ratio between short and long sequences and between runs that tile together and
 * alone (longtail, 16 ranks, seeds 1-3, modelled per-phase imbalance of the home layout, forward /
 * backward: 2.1/1.3%, 2.0/2.0%, 1.2/1.8%, against 0.5% for the summed weight; bimodal up to 6.3%
 * forward). Each phase waits for its own busiest rank, so a training step pays max forward + max
 * backward. Mode (b)'s exchanges (token-swap.ts) lower exactly that; here they run on mode (a)'s
 * home layout with two changes: a piece never leaves its node (a token away from its user rank
 * is reshuffled in every layer, and within the node that costs NVLink, not the NIC), and tokens
 * per rank are bounded only by memory (mode (a) keeps no token band; the rest of the model runs
 * in the user layout).
 *
 * Up to {@link PHASE_SWAP_MAX_NODES} nodes only, where it was measured to pay (simulated, mode
 * (a), 3 batch kinds x seeds 1-6 at 16 and 32 ranks, forward / backward MFU against none, mean ±
 * standard error, `npx tsx bench/quality-ab.ts --base 6fef2ce --worlds 16,32 --seeds 6
 * [--network contention | --cluster ratio-5920]`): hopper-ib fluid +0.0095 ± 0.0028 / +0.0022 ±
 * 0.0016, contention +0.0103 ± 0.0035 / +0.0031 ± 0.0016, ratio-5920 +0.0024 ± 0.0019 / +0.0019 ±
 * 0.0007; held-out seeds 7-12 (fluid) +0.0029 ± 0.0021 / +0.0032 ± 0.0013. Beyond 4 nodes
 * (forced on, fluid, seeds 1-3 unless noted) the forward is NIC-bound in mode (a) and the cut
 * pieces cost more than the balance gains: 64 ranks +0.0051 and, seeds 4-6, -0.0048 forward;
 * 128 -0.0047; 256 -0.0075 (backward +0.0011, +0.0026, +0.0030, -0.0029). Letting the self-tuner's
 * estimate choose between the swapped and the unswapped layout instead gained less at 16-64
 * (+0.0033 ± 0.0011 / +0.0018 ± 0.0009) and picked wrongly at 256 (-0.0048 forward), so the rule
 * is by size. Planning: one exchange search per block size the tuner tries (four at 16-32
 * ranks); mode (a) at 16 ranks best 35-85 ms without them, 118-125 ms with them
 * (`npx tsx bench/prof-run.ts 16 8`, after memoising run loads in swap-state.ts); none run at 256
 * ranks, where the 200 ms budget applies.
 */
import type { Mask } from '../../../plan/types.ts';
import type { TileGeometry } from '../grid.ts';
import type { KernelTime } from '../kernel-time.ts';
import type { FcpOptions } from '../options.ts';
import { type Blocks, userLayoutBlocks } from './blocks.ts';
import { type Placement, userPlacement } from './distribute.ts';
import { homeLayoutOf, homeRuns, rowsBySeq } from './layout.ts';
import { refineLoaderLayout } from './token-swap.ts';
import type { Weights } from './weights.ts';

/** Exchanges applied at most (mode (b)'s count; 16 and 64 measured no better at 16-64 ranks). */
export const PHASE_SWAP_STEPS = 32;

/** Most nodes on which the swaps run by default (module comment). */
export const PHASE_SWAP_MAX_NODES = 4;

/** Lighter ranks tried as partners per exchange (as in mode (b)). */
const PARTNERS = 6;

/**
 * Exchanges allowed: the option when set (>= 0), else {@link PHASE_SWAP_STEPS} up to
 * {@link PHASE_SWAP_MAX_NODES} nodes of `nodeSize` ranks and none beyond. None with `balance:
 * 'pairs'` (the exchanges cost modelled time).
 */
export function phaseSwapSteps(o: FcpOptions, world: number, nodeSize: number): number {
  if (o.balance !== 'time') return 0;
  if (o.phaseSwaps >= 0) return o.phaseSwaps;
  return Math.ceil(world / Math.max(1, nodeSize)) <= PHASE_SWAP_MAX_NODES ? PHASE_SWAP_STEPS : 0;
}

/** What the exchanges read beside the placement. */
export interface PhaseSwapInput {
  readonly sequences: Int32Array;
  readonly mask: Mask;
  readonly world: number;
  readonly memoryTokens: number;
  readonly nodeSize: number;
  readonly grid: TileGeometry;
  readonly kernel: KernelTime;
  readonly o: FcpOptions;
  readonly steps: number;
  /** Weighs blocks as the placer does (weights.ts). */
  readonly weigh: (b: Blocks) => Weights;
}

/** A placement after the exchanges: its blocks are the home layout's rows (as in mode (b)). */
export interface Swapped {
  readonly blocks: Blocks;
  readonly weights: Weights;
  readonly placement: Placement;
  readonly steps: number;
}

/**
 * The placement `placement` of `blocks` evened per phase (module comment); null when no exchange
 * helps, so that the placement keeps its blocks. The result's blocks are the refined home
 * layout's rows with the sequences' block sizes (the tile grid); its statistics keep the
 * original greedy imbalance and refinement steps.
 */
export function swapPlacement(blocks: Blocks, placement: Placement, x: PhaseSwapInput): Swapped | null {
  const { sequences, world } = x;
  const home = homeLayoutOf(homeRuns(blocks, placement.blockRank, world));
  const blockSize = blocks.blockSizeOfSeq;
  const lo = new Float64Array(world);
  const hi = new Float64Array(world).fill(x.memoryTokens);
  const model = { sequences, mask: x.mask, blockSize, grid: x.grid, kernel: x.kernel };
  const options = { lo, hi, steps: x.steps, partners: PARTNERS, nodeSize: x.nodeSize, nodeOnly: true };
  const r = refineLoaderLayout(home, world, model, options);
  if (r.steps === 0) return null;
  const rows = rowsBySeq(r.layout, sequences.length);
  const swappedBlocks = userLayoutBlocks(sequences, rows, x.mask, x.o, blockSize);
  const weights = x.weigh(swappedBlocks);
  const p = userPlacement(swappedBlocks, weights, rows, world);
  return {
    blocks: swappedBlocks,
    weights,
    placement: { ...p, greedyImbalance: placement.greedyImbalance, refineSteps: placement.refineSteps },
    steps: r.steps,
  };
}

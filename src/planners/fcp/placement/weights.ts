/**
 * Compute weights of blocks and units for the distributor: modelled kernel time (`balance: 'time'`,
 * the default) or attended pairs (`'pairs'`, the paper's load).
 *
 * A block's time is that of the tiles of its query range as if its rank held it alone (grid.ts):
 * for a block j of a long sequence, j squares of the block side and one causal diagonal square; for
 * a whole short sequence, one causal square (or varlen when that is cheaper). Runs of several
 * blocks on one rank tile into larger, slightly more efficient squares, so the estimate errs on the
 * slow side by a similar factor for every block of a given size; what it captures is the large
 * difference between sequences of different block sizes and between short sequences and long ones.
 */
import { attendedPairs } from '../../../model/attention.ts';
import type { Mask } from '../../../plan/types.ts';
import { rangeMs, TileCost, type TileGeometry } from '../grid.ts';
import type { KernelTime } from '../kernel-time.ts';
import type { Blocks } from './blocks.ts';

/** Compute load of every block and unit (same unit for both). */
export interface Weights {
  readonly block: Float64Array;
  readonly unit: Float64Array;
  readonly total: number;
}

/** Weighs every block and unit: by modelled time when `tm` is given, else by attended pairs. */
export function weighBlocks(
  blocks: Blocks,
  sequences: Int32Array,
  mask: Mask,
  tm: KernelTime | null,
  g: TileGeometry,
): Weights {
  const causal = mask === 'causal';
  const B = blocks.seq.length;
  const block = new Float64Array(B);
  const cost = tm ? new TileCost(tm, causal) : null;
  for (let i = 0; i < B; i++) {
    const s = blocks.seq[i]!;
    const len = sequences[s]!;
    const a = blocks.start[i]!;
    const l = blocks.length[i]!;
    block[i] = cost
      ? rangeMs(a, a + l, len, blocks.blockSizeOfSeq[s]!, causal, g, cost)
      : attendedPairs(causal, a, l, 0, len);
  }
  const unit = new Float64Array(blocks.unitSeq.length);
  let total = 0;
  for (let i = 0; i < B; i++) {
    unit[blocks.unit[i]!]! += block[i]!;
    total += block[i]!;
  }
  return { block, unit, total };
}

/**
 * Balance of a finished plan along the dimensions issue 15 asks FCP to report: compute (modelled
 * kernel time, from the placement), communication (bytes each rank sends plus receives, and the
 * part of it that crosses the NIC) and tokens (of the home layout, which the rest of the model runs
 * on in mode (b)). Imbalance is max / mean - 1 over ranks (0 when every rank is equal or idle).
 */
import { imbalance } from '../../core/stats.ts';
import type { Layout, ModelShape, Phase } from '../../plan/types.ts';
import { tokenBytes } from './transfers/timeline.ts';

/** Communication and token balance of a plan (both phases). */
export interface PlanBalance {
  /** Bytes sent plus received per rank: max / mean - 1. */
  readonly commImbalance: number;
  /** Inter-node bytes sent plus received per rank: max / mean - 1. */
  readonly nicImbalance: number;
  /** Largest inter-node bytes sent plus received by one rank. */
  readonly maxNicBytes: number;
  /** Home-layout tokens per rank: max / mean - 1. */
  readonly tokenImbalance: number;
}

/** Balance of the phases' transfers and of the home layout; `nodeSize` ranks share a node. */
export function planBalance(
  phases: readonly { phase: Phase; forward: boolean }[],
  home: Layout,
  world: number,
  model: ModelShape,
  nodeSize: number,
): PlanBalance {
  const bytes = new Float64Array(world);
  const nic = new Float64Array(world);
  for (const { phase, forward } of phases) {
    const t = phase.transfers;
    for (let i = 0; i < t.src.length; i++) {
      const b = t.length[i]! * tokenBytes(model, t.kind[i]!, forward);
      const s = t.src[i]!;
      const d = t.dst[i]!;
      bytes[s]! += b;
      bytes[d]! += b;
      if (Math.floor(s / nodeSize) !== Math.floor(d / nodeSize)) {
        nic[s]! += b;
        nic[d]! += b;
      }
    }
  }
  const tokens = new Float64Array(world);
  for (let i = 0; i < home.rank.length; i++) tokens[home.rank[i]!]! += home.length[i]!;
  let maxNic = 0;
  for (let r = 0; r < world; r++) maxNic = Math.max(maxNic, nic[r]!);
  return {
    commImbalance: imbalance(bytes),
    nicImbalance: imbalance(nic),
    maxNicBytes: maxNic,
    tokenImbalance: imbalance(tokens),
  };
}

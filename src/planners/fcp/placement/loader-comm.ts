/**
 * K/V traffic of a loader layout (mode (b)), estimated from the layout alone, so that the planner
 * can choose among candidate layouts (index.ts, planForLoaderLayout) without planning each one.
 *
 * In mode (b) the home layout is the user layout: queries stay where the loader put them and only
 * K/V moves, from the rank that holds a range to every other rank with queries of the same sequence
 * that attend to it (causal: queries after the range's start; full mask: all). A rank's K/V time is
 * the bytes it receives plus the bytes it sends, each over its link class (NIC across nodes, NVLink
 * inside), and the layout's figure is the largest over ranks and directions: on the `magi` corpus at
 * 128-256 ranks that figure ordered the token caps as the simulated forward makespan did in all six
 * batches measured, while the busiest rank's compute, which the caps barely change, did not
 * (simulated; see planForLoaderLayout).
 */

import { sameNode } from '../../../core/nodes.ts';
import type { Layout, Mask } from '../../../plan/types.ts';

/** The links {@link kvTrafficMs} reads (transfers/links.ts, LinkModel, has them). */
export interface KvLinks {
  /** GPUs per node. */
  readonly nodeSize: number;
  /** Bytes per ms of one GPU's NVLink and of its NIC, per direction. */
  readonly intraBytesPerMs: number;
  readonly interBytesPerMs: number;
}

/** Largest per-rank, per-direction K/V time of `layout` in ms (receive or send, NIC plus NVLink). */
export function kvTrafficMs(
  layout: Layout,
  sequences: Int32Array,
  mask: Mask,
  world: number,
  links: KvLinks,
  bytesPerToken: number,
): number {
  const causal = mask === 'causal';
  const node = Math.max(1, links.nodeSize);
  const n = layout.rank.length;
  // Rows of each sequence (CSR), in layout order.
  const S = sequences.length;
  const off = new Int32Array(S + 1);
  for (let i = 0; i < n; i++) off[layout.seq[i]! + 1]!++;
  for (let s = 0; s < S; s++) off[s + 1]! += off[s]!;
  const rows = new Int32Array(n);
  const fill = off.slice(0, S);
  for (let i = 0; i < n; i++) rows[fill[layout.seq[i]!]!++] = i;
  // Per rank: tokens received / sent across nodes and inside a node.
  const inNic = new Float64Array(world);
  const outNic = new Float64Array(world);
  const inNv = new Float64Array(world);
  const outNv = new Float64Array(world);
  const end = new Map<number, number>();
  for (let s = 0; s < S; s++) {
    const a0 = off[s]!;
    const a1 = off[s + 1]!;
    if (a1 - a0 < 2) continue;
    // Each rank of the sequence needs K/V up to the end of its last query (the whole sequence
    // without a causal mask).
    end.clear();
    for (let k = a0; k < a1; k++) {
      const i = rows[k]!;
      const r = layout.rank[i]!;
      const e = causal ? layout.start[i]! + layout.length[i]! : sequences[s]!;
      end.set(r, Math.max(end.get(r) ?? 0, e));
    }
    if (end.size < 2) continue;
    for (let k = a0; k < a1; k++) {
      const i = rows[k]!;
      const src = layout.rank[i]!;
      const a = layout.start[i]!;
      const e = a + layout.length[i]!;
      for (const [dst, need] of end) {
        if (dst === src) continue;
        const t = Math.min(e, need) - a;
        if (t <= 0) continue;
        if (sameNode(src, dst, node)) {
          inNv[dst]! += t;
          outNv[src]! += t;
        } else {
          inNic[dst]! += t;
          outNic[src]! += t;
        }
      }
    }
  }
  let worst = 0;
  for (let r = 0; r < world; r++) {
    const recv = inNic[r]! / links.interBytesPerMs + inNv[r]! / links.intraBytesPerMs;
    const send = outNic[r]! / links.interBytesPerMs + outNv[r]! / links.intraBytesPerMs;
    worst = Math.max(worst, recv, send);
  }
  return worst * bytesPerToken;
}

/**
 * ByteScale's length-grouped placement (arXiv 2502.21231, "data-aware sharding"; the same rule as
 * Megatron-LM's dynamic CP, `gpus_needed = ceil(len / max_seqlen_per_dp_cp_rank)`, see
 * shared/research/peers.md sections 5 and 9):
 * - a sequence longer than the per-rank token budget C gets a group of ceil(L / C) ranks that run a
 *   ring inside (longest first, on the ranks holding the fewest tokens, in rank order);
 * - every other sequence stays whole on one rank, packed by token count: longest first onto the
 *   rank holding the fewest tokens (the balance is by tokens, not by attention FLOPs, which is
 *   where length-grouped CP loses balance: cost grows with the square of length).
 */

import { partLength } from '../../plan/parts.ts';
import { MinHeap } from '../shared/min-heap.ts';

/** A ring group: its ranks in ring order and the sequences it runs. */
export interface RingGroup {
  ranks: Int32Array;
  seqs: number[];
}

/** Result of {@link byteScaleAssign}. */
export interface ByteScaleAssignment {
  /** Ring groups (sequences longer than C), in order of their longest sequence. */
  groups: RingGroup[];
  /** Rank of each sequence that stays whole on one rank; -1 for sequences in a group. */
  single: Int32Array;
  /** Tokens held per rank. */
  tokens: Float64Array;
  /** Ranks whose token count ended above `memoryTokens`. */
  overCapacity: number;
}

/** Sequence ids sorted by length descending, then id. */
function byLengthDesc(sequences: ArrayLike<number>, ids: number[]): number[] {
  return ids.sort((a, b) => sequences[b]! - sequences[a]! || a - b);
}

/**
 * Assigns sequences to ring groups and ranks. `budget` is C (tokens per rank); `memoryTokens` is
 * only checked (a rank over it is counted, not refused: the plan stays executable and the report
 * shows its peak resident tokens).
 */
export function byteScaleAssign(
  sequences: ArrayLike<number>,
  world: number,
  budget: number,
  memoryTokens: number,
): ByteScaleAssignment {
  const tokens = new Float64Array(world);
  const single = new Int32Array(sequences.length).fill(-1);
  const long: number[] = [];
  const short: number[] = [];
  for (let s = 0; s < sequences.length; s++) (sequences[s]! > budget ? long : short).push(s);

  const groups: RingGroup[] = [];
  const groupOf = new Map<string, RingGroup>();
  for (const s of byLengthDesc(sequences, long)) {
    const len = sequences[s]!;
    const k = Math.min(world, Math.ceil(len / budget));
    // The k ranks holding the fewest tokens (ties: lower rank), then in rank order for the ring.
    const heap = new MinHeap(world);
    for (let r = 0; r < world; r++) heap.push(tokens[r]!, r);
    const ranks = Int32Array.from({ length: k }, () => heap.pop()).sort();
    for (let p = 0; p < k; p++)
      tokens[ranks[p]!]! += partLength(len, 2 * k, p) + partLength(len, 2 * k, 2 * k - 1 - p);
    // Sequences on the same ranks share one ring (and one sequence set in the plan).
    const key = ranks.join(',');
    const g = groupOf.get(key);
    if (g) g.seqs.push(s);
    else {
      const ng = { ranks, seqs: [s] };
      groupOf.set(key, ng);
      groups.push(ng);
    }
  }

  const heap = new MinHeap(world);
  for (let r = 0; r < world; r++) heap.push(tokens[r]!, r);
  for (const s of byLengthDesc(sequences, short)) {
    const r = heap.pop();
    single[s] = r;
    tokens[r]! += sequences[s]!;
    heap.push(tokens[r]!, r);
  }
  let overCapacity = 0;
  for (let r = 0; r < world; r++) if (tokens[r]! > memoryTokens) overCapacity++;
  return { groups, single, tokens, overCapacity };
}

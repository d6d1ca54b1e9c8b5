/**
 * ByteScale's length-grouped placement (arXiv 2502.21231, "data-aware sharding" and its balance
 * scheduler; docs/baselines.md). Two rules, each with a memory-only and a
 * work-aware setting ({@link ByteScaleRules}):
 *
 * - Group sizing. A sequence longer than the per-rank token budget C runs a ring over a group of k
 *   ranks. `memory`: k = ceil(L / C), the fewest ranks that hold it (Megatron-LM dynamic CP,
 *   `gpus_needed = ceil(len / max_seqlen_per_dp_cp_rank)`, docs/baselines.md; the default, as the
 *   baselines ran before). `work`: k = max(ceil(L / C), round(N * pairs(L) / pairs(batch))), the
 *   group's share of the ranks equals the sequence's share of the attention work, so a ring member
 *   carries about the mean rank's work (ByteScale's balance scheduler assigns data by its compute
 *   cost, docs/baselines.md; FlexSP sizes each sequence's SP group by a cost model quadratic in
 *   length, section 8). `powerOfTwo` rounds k up to a power of two, as Megatron's dynamic CP does
 *   (its groups are pre-built in power-of-two sizes).
 * - Packing of the sequences that fit one rank, longest first. `tokens`: onto the rank holding the
 *   fewest tokens (Megatron's `DpBalancedScheduler` balances tokens, section 9). `work`: onto the
 *   rank with the least attention work (pairs) whose tokens stay within `memoryTokens` (ByteScale's
 *   balance scheduler; FlexSP's "Sequence Blaster" keeps micro-batches within memory, section 8).
 *   Ring groups are placed the same way: `work` picks the k ranks with the least work.
 *
 * Attention cost grows with the square of length, so balancing tokens leaves ranks unbalanced in
 * time; the `work` rules are what a user tuning length-grouped CP would turn on.
 */

import { sequencePairs } from '../../model/attention.ts';
import { partLength } from '../../plan/parts.ts';
import { MinHeap } from '../shared/min-heap.ts';

/** A ring group: its ranks in ring order and the sequences it runs. */
export interface RingGroup {
  ranks: Int32Array;
  seqs: number[];
}

/** The two placement rules (see the module comment). */
export interface ByteScaleRules {
  /** Group size of a long sequence: by memory (ceil(L/C)) or by its share of the work. */
  sizing: 'memory' | 'work';
  /** Balance of whole sequences (and the choice of ring ranks): by tokens or by work. */
  packing: 'tokens' | 'work';
  /** Round group sizes up to a power of two (Megatron dynamic CP). */
  powerOfTwo: boolean;
}

/** Today's default: memory-only sizing, token packing, no rounding. */
export const BYTESCALE_DEFAULT_RULES: ByteScaleRules = {
  sizing: 'memory',
  packing: 'tokens',
  powerOfTwo: false,
};

/** Result of {@link byteScaleAssign}. */
export interface ByteScaleAssignment {
  /** Ring groups (sequences longer than C), in order of their longest sequence. */
  groups: RingGroup[];
  /** Rank of each sequence that stays whole on one rank; -1 for sequences in a group. */
  single: Int32Array;
  /** Tokens held per rank. */
  tokens: Float64Array;
  /** Attended pairs computed per rank (a ring member's share: pairs(L) / k). */
  work: Float64Array;
  /** Ranks whose token count ended above `memoryTokens`. */
  overCapacity: number;
}

/** Sequence ids sorted by length descending, then id. */
function byLengthDesc(sequences: ArrayLike<number>, ids: number[]): number[] {
  return ids.sort((a, b) => sequences[b]! - sequences[a]! || a - b);
}

/** Smallest power of two >= k. */
const pow2 = (k: number): number => 2 ** Math.ceil(Math.log2(Math.max(1, k)));

/**
 * Pops up to `k` ranks in key order (ties: lower rank) whose tokens stay within `memoryTokens`
 * after adding `add(rank)`; ranks that do not fit are skipped. When fewer than k fit, the rest are
 * the ranks with the fewest tokens (the plan stays executable; the overflow is counted).
 */
function pickRanks(
  key: Float64Array,
  tokens: Float64Array,
  k: number,
  add: number,
  memoryTokens: number,
): Int32Array {
  const world = key.length;
  const heap = new MinHeap(world);
  for (let r = 0; r < world; r++) heap.push(key[r]!, r);
  const picked: number[] = [];
  while (picked.length < k && heap.size > 0) {
    const r = heap.pop();
    if (tokens[r]! + add <= memoryTokens) picked.push(r);
  }
  if (picked.length < k) {
    const chosen = new Set(picked);
    const rest = Array.from({ length: world }, (_, r) => r)
      .filter((r) => !chosen.has(r))
      .sort((a, b) => tokens[a]! - tokens[b]! || a - b);
    for (const r of rest.slice(0, k - picked.length)) picked.push(r);
  }
  return Int32Array.from(picked).sort();
}

/**
 * Assigns sequences to ring groups and ranks. `budget` is C (tokens per rank); `memoryTokens`
 * caps the tokens per rank under `work` packing and is checked under `tokens` packing (a rank over
 * it is counted, not refused: the plan stays executable and the report shows its peak tokens).
 */
export function byteScaleAssign(
  sequences: ArrayLike<number>,
  world: number,
  budget: number,
  memoryTokens: number,
  rules: ByteScaleRules = BYTESCALE_DEFAULT_RULES,
  causal = true,
): ByteScaleAssignment {
  const tokens = new Float64Array(world);
  const work = new Float64Array(world);
  const single = new Int32Array(sequences.length).fill(-1);
  const long: number[] = [];
  const short: number[] = [];
  let totalPairs = 0;
  for (let s = 0; s < sequences.length; s++) {
    (sequences[s]! > budget ? long : short).push(s);
    totalPairs += sequencePairs(causal, sequences[s]!);
  }
  const byWork = rules.packing === 'work';

  const groups: RingGroup[] = [];
  const groupOf = new Map<string, RingGroup>();
  for (const s of byLengthDesc(sequences, long)) {
    const len = sequences[s]!;
    let k = Math.ceil(len / budget);
    if (rules.sizing === 'work' && totalPairs > 0)
      k = Math.max(k, Math.round((world * sequencePairs(causal, len)) / totalPairs));
    if (rules.powerOfTwo) k = pow2(k);
    k = Math.min(world, k);
    // The k least-loaded ranks (tokens, or work within memory), then in rank order for the ring.
    const ranks = byWork
      ? pickRanks(work, tokens, k, Math.ceil(len / k), memoryTokens)
      : pickRanks(tokens, tokens, k, 0, Number.POSITIVE_INFINITY);
    const share = sequencePairs(causal, len) / k;
    for (let p = 0; p < k; p++) {
      tokens[ranks[p]!]! += partLength(len, 2 * k, p) + partLength(len, 2 * k, 2 * k - 1 - p);
      work[ranks[p]!]! += share;
    }
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
  for (let r = 0; r < world; r++) heap.push(byWork ? work[r]! : tokens[r]!, r);
  for (const s of byLengthDesc(sequences, short)) {
    const len = sequences[s]!;
    let r: number;
    if (byWork) {
      // Least work among the ranks where it fits; none fits: the one with the fewest tokens.
      const skipped: number[] = [];
      r = -1;
      while (heap.size > 0) {
        const c = heap.pop();
        if (tokens[c]! + len <= memoryTokens) {
          r = c;
          break;
        }
        skipped.push(c);
      }
      if (r < 0) {
        r = skipped.reduce((b, c) => (tokens[c]! < tokens[b]! ? c : b), skipped[0]!);
        skipped.splice(skipped.indexOf(r), 1);
      }
      for (const c of skipped) heap.push(work[c]!, c);
    } else r = heap.pop();
    single[s] = r;
    tokens[r]! += len;
    work[r]! += sequencePairs(causal, len);
    heap.push(byWork ? work[r]! : tokens[r]!, r);
  }
  let overCapacity = 0;
  for (let r = 0; r < world; r++) if (tokens[r]! > memoryTokens) overCapacity++;
  return { groups, single, tokens, work, overCapacity };
}

/**
 * TransformerEngine's p2p ring attention with DualChunkSwap load balancing, over one group of k
 * ranks and one set of sequences, written as compact chunk rows. Used by `ring` (one group of all
 * ranks, one set of all sequences) and `bytescale` (one group per long-sequence ring).
 *
 * Source: TransformerEngine `transformer_engine/pytorch/attention/dot_product_attention/
 * context_parallel.py` (`AttnFuncWithCPAndKVP2P`, `get_batch_on_this_cp_rank`), see
 * docs/baselines.md:
 * - every sequence is padded to a multiple of 2k and cut into 2k parts; ring position p holds parts
 *   p and 2k-1-p (DualChunkSwap);
 * - k-1 ring steps: at step i position p computes with the K/V of origin o = (p - i) mod k, which it
 *   received from p-1 in step i-1 and forwards to p+1 in step i (double buffering);
 * - causal step rules: i = 0 local (the diagonal of both halves plus the high half against the low
 *   half); o < p: both query halves against the K/V low half only; o > p: the high query half
 *   against both K/V halves;
 * - backward: the K/V ring again, and the dK/dV partial of each origin travels with it, each hop
 *   adding its contribution, until it arrives back at the owner.
 *
 * Deviation (documented in docs/baselines.md): TE starts the dK/dV buffer at the owner (its step-0
 * contribution) and moves it k hops; here the owner's own contribution stays home and the chain
 * starts at o+1, so it takes k-1 hops, and a hop carries only parts that already hold a
 * contribution (TE always sends both halves). Both favour the ring slightly.
 */

import { liveParts } from '../../plan/parts.ts';
import { Kind } from '../../plan/types.ts';
import type { PlanBuilder } from './plan-builder.ts';

/** What one ring added to the plan. */
export interface RingInfo {
  readonly set: number;
  /** Parts per sequence (2k, or 1 for a ring of one rank). */
  readonly parts: number;
  /** Parts non-empty for at least one sequence of the set (0..live-1). */
  readonly live: number;
}

/**
 * Query/key part pairs position p computes at step i of a ring of k (TE's DualChunkSwap rules).
 * Returns pairs flattened as [q0, kv0, q1, kv1, ...].
 */
export function ringStepPairs(k: number, p: number, i: number, causal: boolean): number[] {
  const last = 2 * k - 1;
  const lo = p;
  const hi = last - p;
  const o = (((p - i) % k) + k) % k;
  const olo = o;
  const ohi = last - o;
  if (!causal) return [lo, olo, lo, ohi, hi, olo, hi, ohi];
  if (i === 0) return [lo, lo, hi, lo, hi, hi];
  if (o < p) return [lo, olo, hi, olo];
  return [hi, olo, hi, ohi];
}

/**
 * Adds one DualChunkSwap ring over `ranks` (ring order: position p sends to position p+1) for the
 * sequences `seqs`. Ring step i uses op slot i (after group i-1) on each rank and round/group i of
 * both phases; forward uses rounds 0..k-2, backward rounds 0..k-1 (K/V hops in 0..k-2, dK/dV hops
 * in 1..k-1). User layout = home layout (TE's loader already shards the batch this way).
 */
export function addDualChunkRing(
  b: PlanBuilder,
  ranks: ArrayLike<number>,
  seqs: ArrayLike<number>,
): RingInfo {
  const k = ranks.length;
  const causal = b.problem.mask === 'causal';
  if (k === 1) {
    // One rank: no context parallelism, no padding, one whole-sequence chunk task.
    const set = b.seqSet(seqs, 0);
    const r = ranks[0]!;
    b.homeChunk(r, set, 1, 0, true);
    const t = b.chunkTask(r, set, 1, 0, 0);
    b.forward.chunkTask(r, 0, -1, t);
    b.backward.chunkTask(r, 0, -1, t);
    return { set, parts: 1, live: 1 };
  }
  const parts = 2 * k;
  const set = b.seqSet(seqs, parts);
  const live = liveParts(b.problem.sequences, seqs, parts);
  for (let p = 0; p < k; p++) {
    for (const part of [p, parts - 1 - p]) if (part < live) b.homeChunk(ranks[p]!, set, parts, part, true);
  }
  // Compute: step i on position p (slot i, after group i-1), same tasks in both phases.
  for (let i = 0; i < k; i++)
    for (let p = 0; p < k; p++) {
      const pairs = ringStepPairs(k, p, i, causal);
      for (let j = 0; j < pairs.length; j += 2) {
        const q = pairs[j]!;
        const kv = pairs[j + 1]!;
        if (q >= live || kv >= live) continue;
        const t = b.chunkTask(ranks[p]!, set, parts, q, kv);
        b.forward.chunkTask(ranks[p]!, i, i - 1, t);
        b.backward.chunkTask(ranks[p]!, i, i - 1, t);
      }
    }
  // K/V hops: in round g position p forwards origin (p-g)'s parts to p+1 (both phases).
  for (let g = 0; g < k - 1; g++)
    for (let p = 0; p < k; p++) {
      const o = (((p - g) % k) + k) % k;
      const dst = ranks[(p + 1) % k]!;
      for (const part of [o, parts - 1 - o]) {
        if (part >= live) continue;
        b.forward.chunkTransfer(g, ranks[p]!, dst, Kind.kv, set, parts, part);
        b.backward.chunkTransfer(g, ranks[p]!, dst, Kind.kv, set, parts, part);
      }
    }
  // dK/dV chains: origin o's partial starts at o+1 (step 1) and hops one position per step,
  // arriving at o after the hop of step k-1.
  for (let o = 0; o < k; o++) {
    const parts2 = [o, parts - 1 - o];
    const contributed = [false, false];
    for (let j = 1; j < k; j++) {
      const p = (o + j) % k;
      const pairs = ringStepPairs(k, p, j, causal);
      let computes = false;
      for (let x = 0; x < pairs.length; x += 2) {
        if (pairs[x]! >= live || pairs[x + 1]! >= live) continue;
        computes = true;
        contributed[parts2.indexOf(pairs[x + 1]!)] = true;
      }
      for (let h = 0; h < 2; h++) {
        if (!contributed[h]) continue;
        const id = b.backward.chunkTransfer(
          j,
          ranks[p]!,
          ranks[(p + 1) % k]!,
          Kind.dkv,
          set,
          parts,
          parts2[h]!,
        );
        if (computes) b.backward.chunkSendAfter(id, ranks[p]!, j);
      }
    }
  }
  return { set, parts, live };
}

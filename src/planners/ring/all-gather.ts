/**
 * TransformerEngine's `all_gather` context-parallel mode for THD batches as compact chunk rows
 * (`AttnFuncWithCPAndKVAllGather`, TE @d0067d0
 * `transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py` line 3014): K/V
 * of all ranks are all-gathered, each rank computes its two local query parts against them, dK/dV
 * are reduce-scattered back (lines 4107-4123). Divergences: docs/baselines.md.
 */
import { liveParts } from '../../plan/parts.ts';
import { Kind } from '../../plan/types.ts';
import type { PlanBuilder } from '../shared/plan-builder.ts';
import { emitPhase, type Job, type Row, type VariantInfo } from './chunk-rows.ts';
/**
 * TE `all_gather` over all ranks: forward group 0 all-gathers every rank's two DualChunkSwap parts
 * (sub-round s: rank r sends to r+s); each rank computes its own parts first (no wait), then the
 * rest after group 0. Backward: the same gather, then group 1 reduce-scatters dK/dV: each rank
 * sends its partial of every other rank's part to that part's owner. With `pad` false the parts are
 * not padded (WLB-LLM's per-document sharding: an uneven split, no padding).
 */
export function addAllGather(b: PlanBuilder, seqs: ArrayLike<number>, pad = true): VariantInfo {
  const n = b.problem.world;
  const causal = b.problem.mask === 'causal';
  const parts = 2 * n;
  // TE pads every sequence to a multiple of 2N; WLB-LLM's per-document split does not (pad false).
  const set = b.seqSet(seqs, pad ? parts : 0);
  const live = liveParts(b.problem.sequences, seqs, parts);
  const mine = (r: number) => [r, parts - 1 - r].filter((x) => x < live);
  const ownerOf = (x: number) => (x < n ? x : parts - 1 - x);
  for (let r = 0; r < n; r++) for (const x of mine(r)) b.homeChunk(r, set, parts, x, true);
  const fRows: Row[] = [];
  const bRows: Row[] = [];
  const jobs: Job[] = [];
  for (let r = 0; r < n; r++) {
    const used = new Set<number>();
    for (const q of mine(r))
      for (let kv = 0; kv < live; kv++) {
        if (causal && kv > q) continue;
        const self = ownerOf(kv) === r;
        jobs.push({
          id: b.chunkTask(r, set, parts, q, kv),
          rank: r,
          slot: self ? 0 : 1,
          after: self ? -1 : 0,
        });
        if (!self) used.add(kv);
      }
    for (const rows of [fRows, bRows])
      for (let s = 1; s < n; s++)
        for (const x of mine(r))
          rows.push({
            group: 0,
            sub: s,
            src: r,
            dst: (r + s) % n,
            kind: Kind.kv,
            set,
            parts,
            part: x,
            afterSlot: -1,
          });
    for (const x of used) {
      const o = ownerOf(x);
      bRows.push({
        group: 1,
        sub: (o - r + n) % n,
        src: r,
        dst: o,
        kind: Kind.dkv,
        set,
        parts,
        part: x,
        afterSlot: 1,
      });
    }
  }
  const forwardGroups = emitPhase(b, 'forward', fRows, jobs, 1);
  const backwardGroups = emitPhase(b, 'backward', bRows, jobs, 2);
  return { forwardGroups, backwardGroups };
}

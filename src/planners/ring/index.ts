/**
 * `ring`: TransformerEngine's p2p ring attention with DualChunkSwap over all N ranks (docs/design.md,
 * "Baselines"; TE `context_parallel.py`, docs/baselines.md). Every sequence is
 * padded to a multiple of 2N and cut into 2N parts, rank r holds parts r and 2N-1-r; N-1 ring steps
 * of one round each; backward passes dK/dV partials around the ring back to their owners.
 *
 * The whole batch is one sequence set, so the plan is O(N^2) compact chunk rows whatever the
 * number of sequences. The user layout equals the home layout: TE expects its data loader to shard
 * the batch this way already (`get_batch_on_this_cp_rank`), so the ring moves no `in`/`out`.
 */

import { iota } from '../../core/gather.ts';
import { fail } from '../../core/issues.ts';
import type { Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { addDualChunkRing } from '../shared/dual-chunk-ring.ts';
import { oneRoundPerGroup, PlanBuilder } from '../shared/plan-builder.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { addAllGather } from './all-gather.ts';
import { A2A_SPLIT_TOKENS, addA2aP2pRing, checkA2aDegree } from './variants.ts';

/** Tokens of padding TE adds: each sequence rounded up to a multiple of `padTo`. */
export function paddingTokens(sequences: ArrayLike<number>, padTo: number): number {
  if (padTo <= 1) return 0;
  let pad = 0;
  for (let i = 0; i < sequences.length; i++) pad += Math.ceil(sequences[i]! / padTo) * padTo - sequences[i]!;
  return pad;
}

/** The ring variant and a2a degree of `options`, defaults filled in, validated against the problem. */
export function resolveRingOptions(
  problem: Problem,
  o: PlannerOptions,
): { variant: 'p2p' | 'a2a+p2p' | 'all_gather'; a2aDegree: number; splitTokens: number } {
  const variant = o.ringVariant ?? 'p2p';
  if (variant !== 'p2p' && variant !== 'a2a+p2p' && variant !== 'all_gather')
    fail(
      'option.ringVariant',
      `ring variant must be p2p, a2a+p2p or all_gather (got ${String(variant)})`,
      'ringVariant',
    );
  const a2aDegree = o.a2aDegree ?? Math.min(problem.gpusPerNode, problem.world);
  if (variant === 'a2a+p2p')
    checkA2aDegree(a2aDegree, problem.world, problem.model.qHeads, problem.model.kvHeads);
  const splitTokens = o.a2aSplitTokens ?? A2A_SPLIT_TOKENS;
  if (!Number.isInteger(splitTokens) || splitTokens < 1)
    fail(
      'option.a2aSplitTokens',
      `a2a split tokens must be a positive integer (got ${splitTokens})`,
      'a2aSplitTokens',
    );
  return { variant, a2aDegree: variant === 'a2a+p2p' ? a2aDegree : 1, splitTokens };
}

/**
 * Plans TE context parallelism over every rank: `p2p` (default), `a2a+p2p` or `all_gather`
 * (`options.ringVariant`; `options.a2aDegree` for `a2a+p2p`, default GPUs per node).
 */
export function planRing(problem: Problem, options: PlannerOptions = {}): Plan {
  const { variant, a2aDegree, splitTokens } = resolveRingOptions(problem, options);
  const b = new PlanBuilder(problem);
  const n = problem.world;
  const seqs = iota(problem.sequences.length);
  const padTo = n > 1 ? 2 * n : 0;
  const meta = {
    planner: 'ring',
    variant,
    ...(variant === 'a2a+p2p' ? { a2aDegree, a2aSplitTokens: splitTokens } : {}),
    padTo,
    paddingTokens: paddingTokens(problem.sequences, padTo),
    layout: 'DualChunkSwap (user layout = home layout: the loader shards the batch)',
  };
  if (variant === 'p2p' || n === 1) {
    const ranks = iota(n);
    const ring = addDualChunkRing(b, ranks, seqs);
    return b.build('ring', oneRoundPerGroup(b.forward.rounds), oneRoundPerGroup(b.backward.rounds), {
      ...meta,
      parts: ring.parts,
    });
  }
  const v = variant === 'a2a+p2p' ? addA2aP2pRing(b, seqs, a2aDegree, splitTokens) : addAllGather(b, seqs);
  return b.build('ring', v.forwardGroups, v.backwardGroups, { ...meta, parts: 2 * n });
}

/**
 * WLB-LLM's per-document CP (arXiv 2503.17924; docs/baselines.md): every document cut into 2N
 * DualChunkSwap parts without padding, K/V all-gathered, dK/dV reduce-scattered. Used by `wlb`.
 */
export function planPerDocumentAllGather(problem: Problem): Plan {
  const b = new PlanBuilder(problem);
  const n = problem.world;
  const seqs = iota(problem.sequences.length);
  if (n === 1) return planRing(problem);
  const v = addAllGather(b, seqs, false);
  return b.build('ring', v.forwardGroups, v.backwardGroups, {
    planner: 'ring',
    variant: 'per-document all-gather (unpadded)',
    parts: 2 * n,
    padTo: 0,
    paddingTokens: 0,
    layout: 'DualChunkSwap per document (user layout = home layout: the loader shards the batch)',
  });
}

/** The `ring` planner. */
export const ringPlanner: Planner = {
  name: 'ring',
  description:
    'TransformerEngine CP with DualChunkSwap (2N chunks per sequence): p2p ring (default), a2a+p2p or all_gather',
  plan: planRing,
};

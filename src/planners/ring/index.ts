/**
 * `ring`: TransformerEngine's p2p ring attention with DualChunkSwap over all N ranks (DESIGN.md,
 * "Baselines"; TE `context_parallel.py`, shared/research/peers.md section 3). Every sequence is
 * padded to a multiple of 2N and cut into 2N parts, rank r holds parts r and 2N-1-r; N-1 ring steps
 * of one round each; backward passes dK/dV partials around the ring back to their owners.
 *
 * The whole batch is one sequence set, so the plan is O(N^2) compact chunk rows whatever the
 * number of sequences. The user layout equals the home layout: TE expects its data loader to shard
 * the batch this way already (`get_batch_on_this_cp_rank`), so the ring moves no `in`/`out`.
 */

import type { Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { addDualChunkRing } from '../shared/dual-chunk-ring.ts';
import { oneRoundPerGroup, PlanBuilder } from '../shared/plan-builder.ts';
import type { Planner, PlannerOptions } from '../types.ts';

/** Tokens of padding TE adds: each sequence rounded up to a multiple of `padTo`. */
export function paddingTokens(sequences: ArrayLike<number>, padTo: number): number {
  if (padTo <= 1) return 0;
  let pad = 0;
  for (let i = 0; i < sequences.length; i++) pad += Math.ceil(sequences[i]! / padTo) * padTo - sequences[i]!;
  return pad;
}

/** Plans TE's DualChunkSwap ring over every rank. No options. */
export function planRing(problem: Problem, _options: PlannerOptions = {}): Plan {
  const b = new PlanBuilder(problem);
  const n = problem.world;
  const ranks = Int32Array.from({ length: n }, (_, i) => i);
  const seqs = Int32Array.from({ length: problem.sequences.length }, (_, i) => i);
  const ring = addDualChunkRing(b, ranks, seqs);
  const padTo = n > 1 ? 2 * n : 0;
  return b.build('ring', oneRoundPerGroup(b.forward.rounds), oneRoundPerGroup(b.backward.rounds), {
    planner: 'ring',
    parts: ring.parts,
    padTo,
    paddingTokens: paddingTokens(problem.sequences, padTo),
    layout: 'DualChunkSwap (user layout = home layout: the loader shards the batch)',
  });
}

/** The `ring` planner. */
export const ringPlanner: Planner = {
  name: 'ring',
  description:
    'TransformerEngine p2p ring attention with DualChunkSwap (2N chunks per sequence, N-1 ring steps)',
  plan: planRing,
};

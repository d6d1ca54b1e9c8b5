/**
 * `bytescale`: length-grouped context parallelism (ByteScale, arXiv 2502.21231; DESIGN.md,
 * "Baselines"). Sequences longer than the per-rank budget C run a TE DualChunkSwap ring inside a
 * group of ceil(L / C) ranks; shorter ones stay whole on one rank (no communication at all).
 * Placement rules: {@link byteScaleAssign}. The user layout equals the home layout: ByteScale's
 * global data loader already hands each rank its sequences (and ring shards), so no reshuffle.
 */

import type { Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { addDualChunkRing } from '../shared/dual-chunk-ring.ts';
import { oneRoundPerGroup, PlanBuilder } from '../shared/plan-builder.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { byteScaleAssign } from './assign.ts';

/** Plans length-grouped CP. No options (C is the problem's tokens per rank). */
export function planByteScale(problem: Problem, _options: PlannerOptions = {}): Plan {
  const { sequences, world } = problem;
  const a = byteScaleAssign(sequences, world, problem.tokensPerRank, problem.memoryTokens);
  const b = new PlanBuilder(problem);
  let paddingTokens = 0;
  const groupSizes: number[] = [];
  for (const g of a.groups) {
    addDualChunkRing(b, g.ranks, g.seqs);
    const padTo = 2 * g.ranks.length;
    for (const s of g.seqs) paddingTokens += Math.ceil(sequences[s]! / padTo) * padTo - sequences[s]!;
    groupSizes.push(g.ranks.length);
  }
  let singles = 0;
  for (let s = 0; s < sequences.length; s++) {
    const r = a.single[s]!;
    if (r < 0) continue;
    singles++;
    const len = sequences[s]!;
    b.homeRange(r, s, 0, len, true);
    const t = b.task(r, s, 0, len, 0, len);
    b.forward.task(r, 0, -1, t);
    b.backward.task(r, 0, -1, t);
  }
  return b.build('bytescale', oneRoundPerGroup(b.forward.rounds), oneRoundPerGroup(b.backward.rounds), {
    planner: 'bytescale',
    budget: problem.tokensPerRank,
    ringGroups: groupSizes.length,
    ringGroupSizes: groupSizes,
    singleRankSequences: singles,
    paddingTokens,
    overCapacityRanks: a.overCapacity,
    layout: 'length-grouped (user layout = home layout: the loader shards the batch)',
  });
}

/** The `bytescale` planner. */
export const byteScalePlanner: Planner = {
  name: 'bytescale',
  description:
    'length-grouped CP (ByteScale): long sequences ring over ceil(L/C) ranks, short ones whole on one rank',
  plan: planByteScale,
};

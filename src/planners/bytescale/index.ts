/**
 * `bytescale`: length-grouped context parallelism (ByteScale, arXiv 2502.21231; docs/design.md,
 * "Baselines"). Sequences longer than the per-rank budget C run a TE DualChunkSwap ring inside a
 * group of ranks; shorter ones stay whole on one rank (no communication at all). Placement rules
 * and their knobs (group sizing by memory or work, packing by tokens or work, power-of-two groups):
 * {@link byteScaleAssign}. The user layout equals the home layout: ByteScale's global data loader
 * already hands each rank its sequences (and ring shards), so no reshuffle.
 */

import { fail } from '../../core/issues.ts';
import type { Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { addDualChunkRing } from '../shared/dual-chunk-ring.ts';
import { oneRoundPerGroup, PlanBuilder } from '../shared/plan-builder.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { BYTESCALE_DEFAULT_RULES, type ByteScaleRules, byteScaleAssign } from './assign.ts';

/** The bytescale knobs of `options`, defaults filled in; FcpError `option.bytescale` for bad values. */
export function resolveByteScaleRules(o: PlannerOptions): ByteScaleRules {
  const {
    bytescaleSizing: sizing = BYTESCALE_DEFAULT_RULES.sizing,
    bytescalePacking: packing = BYTESCALE_DEFAULT_RULES.packing,
    bytescalePow2: powerOfTwo = BYTESCALE_DEFAULT_RULES.powerOfTwo,
  } = o;
  if (sizing !== 'memory' && sizing !== 'work')
    fail(
      'option.bytescale',
      `bytescale sizing must be memory or work (got ${String(sizing)})`,
      'bytescaleSizing',
    );
  if (packing !== 'tokens' && packing !== 'work')
    fail(
      'option.bytescale',
      `bytescale packing must be tokens or work (got ${String(packing)})`,
      'bytescalePacking',
    );
  if (typeof powerOfTwo !== 'boolean')
    fail(
      'option.bytescale',
      `bytescale pow2 must be true or false (got ${String(powerOfTwo)})`,
      'bytescalePow2',
    );
  return { sizing, packing, powerOfTwo };
}

/** Plans length-grouped CP (C is the problem's tokens per rank). */
export function planByteScale(problem: Problem, options: PlannerOptions = {}): Plan {
  const { sequences, world } = problem;
  const rules = resolveByteScaleRules(options);
  const a = byteScaleAssign(
    sequences,
    world,
    problem.tokensPerRank,
    problem.memoryTokens,
    rules,
    problem.mask === 'causal',
  );
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
    rules,
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
    'length-grouped CP (ByteScale): long sequences ring over ceil(L/C) ranks (or their work share), short ones whole on one rank',
  plan: planByteScale,
};

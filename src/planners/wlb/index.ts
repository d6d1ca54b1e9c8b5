/**
 * `wlb`: WLB-LLM's CP-level selector as the FCP paper evaluated it: an oracle that, per batch,
 * runs whichever of per-document sharding (`ring`: every rank gets an equal share of every
 * sequence) and per-sequence sharding (`bytescale`: length-grouped) the cost model says is faster
 * (WLB-LLM, arXiv 2503.17924, OSDI'25; shared/research/peers.md section 6).
 *
 * The cost model is a parameter ({@link PlanEstimate}); the registered planner uses
 * {@link flopByteEstimate} until the simulator is plugged in. The choice, both estimates and the
 * estimator's name are recorded in `plan.meta.wlb`.
 */
import type { Problem } from '../../cluster/problem.ts';
import type { Plan } from '../../plan/types.ts';
import { planByteScale } from '../bytescale/index.ts';
import { planRing } from '../ring/index.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { flopByteEstimate, type PlanEstimate } from './estimate.ts';

/** The default estimator: {@link flopByteEstimate} with its default hardware numbers. */
export const defaultWlbEstimate: PlanEstimate = (plan) => flopByteEstimate(plan);

/**
 * Plans both candidates and returns the faster one by `estimate` (ties: ring), relabelled `wlb`.
 * `estimatorName` is recorded in the plan (default: the function's name).
 */
export function planWlb(
  problem: Problem,
  options: PlannerOptions = {},
  estimate: PlanEstimate = defaultWlbEstimate,
  estimatorName: string = estimate === defaultWlbEstimate ? 'flop-byte' : estimate.name || 'custom',
): Plan {
  const ring = planRing(problem, options);
  const bytescale = planByteScale(problem, options);
  const ringMs = estimate(ring);
  const bytescaleMs = estimate(bytescale);
  const chosen = bytescaleMs < ringMs ? bytescale : ring;
  return {
    ...chosen,
    strategy: 'wlb',
    meta: {
      ...chosen.meta,
      planner: 'wlb',
      wlb: {
        estimator: estimatorName,
        estimateMs: { ring: ringMs, bytescale: bytescaleMs },
        chosen: chosen.strategy,
      },
    },
  };
}

/** The `wlb` planner (default estimator). */
export const wlbPlanner: Planner = {
  name: 'wlb',
  description: 'WLB-LLM oracle: per batch, the faster of ring and bytescale by the cost model',
  plan: (problem, options) => planWlb(problem, options),
};

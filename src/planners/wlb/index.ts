/**
 * `wlb`: WLB-LLM's CP-level selector as the FCP paper evaluated it: an oracle that, per batch,
 * runs whichever of per-document sharding (`ring`: every rank gets an equal share of every
 * sequence) and per-sequence sharding (`bytescale`: length-grouped) the cost model says is faster
 * (WLB-LLM, arXiv 2503.17924, OSDI'25; shared/research/peers.md section 6).
 *
 * The cost model is a parameter ({@link PlanEstimate}, `estimate(plan) => ms`). The registered
 * planner uses the simulator ({@link simulatorEstimate}: `simulatePlan` on its default cluster
 * preset, forward plus backward makespan), so the oracle picks the candidate the same simulator
 * will later find faster; {@link flopByteEstimate} is the simple stand-in it replaced (still
 * available). The choice, both estimates and the estimator's name are recorded in `plan.meta.wlb`.
 */

import { simulatePlan } from '../../executors/sim/index.ts';
import type { Plan } from '../../plan/types.ts';
import { resolveCluster } from '../../problem/cluster.ts';
import type { Problem } from '../../problem/problem.ts';
import { planByteScale } from '../bytescale/index.ts';
import { planRing } from '../ring/index.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { flopByteEstimate, type PlanEstimate } from './estimate.ts';

/** The simulator as an estimate: forward plus backward makespan on the default cluster preset. */
export const simulatorEstimate: PlanEstimate = (plan) => {
  const r = simulatePlan(plan);
  return r.forward.makespanMs + r.backward.makespanMs;
};

/** {@link flopByteEstimate} with its default hardware numbers. */
export const flopByteWlbEstimate: PlanEstimate = (plan) => flopByteEstimate(plan);

/** Names of the built-in estimators, recorded in `plan.meta.wlb.estimator`. */
function estimatorNameOf(estimate: PlanEstimate): string {
  if (estimate === simulatorEstimate) return `sim (${resolveCluster().name})`;
  if (estimate === flopByteWlbEstimate) return 'flop-byte';
  return estimate.name || 'custom';
}

/**
 * Plans both candidates and returns the faster one by `estimate` (ties: ring), relabelled `wlb`.
 * `estimatorName` is recorded in the plan (default: the function's name).
 */
export function planWlb(
  problem: Problem,
  options: PlannerOptions = {},
  estimate: PlanEstimate = simulatorEstimate,
  estimatorName: string = estimatorNameOf(estimate),
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

/** The `wlb` planner (the simulator as its cost model). */
export const wlbPlanner: Planner = {
  name: 'wlb',
  description: 'WLB-LLM oracle: per batch, the faster of ring and bytescale by the cost model',
  plan: (problem, options) => planWlb(problem, options),
};

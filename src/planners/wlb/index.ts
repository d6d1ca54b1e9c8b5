/**
 * `wlb`: WLB-LLM's CP-level selector as the FCP paper evaluated it: an oracle that, per batch,
 * runs whichever of per-document sharding (`ring`: every rank gets an equal share of every
 * sequence) and per-sequence sharding (`bytescale`: length-grouped) the cost model says is faster
 * (WLB-LLM, arXiv 2503.17924, OSDI'25; docs/baselines.md).
 *
 * The cost model is injected ({@link PlanEstimate}, `estimate(plan, problem) => ms`): this module
 * does not import an executor (planners sit below executors). The registry registers `wlb` with the
 * simulator on the problem's own cluster (`problem.cluster`, i.e. `--cluster`), so the oracle picks
 * the candidate the same simulator will later find faster on that machine; {@link flopByteEstimate}
 * is the simple stand-in (no executor needed). The choice, both estimates and the estimator's name
 * are recorded in `plan.meta.wlb`.
 */

import { fail } from '../../core/issues.ts';
import { progressSpan } from '../../core/progress-span.ts';
import type { Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { planByteScale } from '../bytescale/index.ts';
import { planPerDocumentAllGather, planRing } from '../ring/index.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { flopByteEstimate } from './estimate.ts';

/**
 * Estimated time of a plan made for `problem`, in milliseconds (the seam through which `wlb`
 * compares candidates). An estimate that models the network should read `problem.cluster`.
 */
export type PlanEstimate = (plan: Plan, problem: Problem, onProgress?: (fraction: number) => void) => number;

/** A named estimate, as the registry injects it. */
export interface NamedEstimate {
  readonly name: string;
  readonly estimate: PlanEstimate;
}

/**
 * {@link flopByteEstimate} with the problem cluster's peak and NIC bandwidth (no executor needed;
 * for tests and for library users without the simulator).
 */
export const flopByteWlbEstimate: NamedEstimate = {
  name: 'flop-byte',
  estimate: (plan, problem) =>
    flopByteEstimate(plan, {
      peakFlops: problem.cluster.peakTflops * 1e12,
      bandwidth: problem.cluster.nicGBps * 1e9,
    }),
};

/**
 * Plans both candidates and returns the faster one by `estimate` (ties: ring), relabelled `wlb`.
 */
export function planWlb(problem: Problem, options: PlannerOptions, estimator: NamedEstimate): Plan {
  const perDocument = options.wlbPerDocument ?? 'p2p';
  if (perDocument !== 'p2p' && perDocument !== 'all_gather')
    fail(
      'option.wlbPerDocument',
      `wlb per-document mode must be p2p or all_gather (got ${String(perDocument)})`,
      'wlbPerDocument',
    );
  // Per-document sharding: TE's p2p ring (default) or WLB-LLM's own all-gather without padding.
  // Progress (options.onProgress): the two plans are quick; costing them (the simulator, as the
  // registry injects it) is most of the time at 1024 ranks, the ring's most of that.
  const report = options.onProgress;
  const ring =
    perDocument === 'all_gather'
      ? planPerDocumentAllGather(problem)
      : planRing(problem, { ...options, ringVariant: 'p2p' });
  const bytescale = planByteScale(problem, options);
  report?.(0.15);
  const ringMs = estimator.estimate(ring, problem, progressSpan(report, 0.15, 0.8));
  const bytescaleMs = estimator.estimate(bytescale, problem, progressSpan(report, 0.8, 1));
  report?.(1);
  const chosen = bytescaleMs < ringMs ? bytescale : ring;
  return {
    ...chosen,
    strategy: 'wlb',
    meta: {
      ...chosen.meta,
      planner: 'wlb',
      wlb: {
        estimator: estimator.name,
        cluster: problem.cluster.name,
        perDocument,
        estimateMs: { ring: ringMs, bytescale: bytescaleMs },
        chosen: chosen.strategy,
      },
    },
  };
}

/** The `wlb` planner with `estimator` as its cost model (the registry passes the simulator). */
export function makeWlbPlanner(estimator: NamedEstimate): Planner {
  return {
    name: 'wlb',
    description: `WLB-LLM oracle: per batch, the faster of ring and bytescale by the cost model (${estimator.name})`,
    plan: (problem, options = {}) => planWlb(problem, options, estimator),
  };
}

/**
 * Strategy registry: every strategy of `fcp plan --strategy NAME`. Planners register here by name.
 *
 * It lives in experiments/ because it is where a planner meets an executor: `wlb` is a cost-model
 * oracle and gets the simulator injected here (planner modules never import executors).
 */
import { FcpError, fail } from '../core/issues.ts';
import { plannerLimitIssues } from '../core/limits.ts';
import { simulatePlan } from '../executors/sim/index.ts';
import { byteScalePlanner } from '../planners/bytescale/index.ts';
import { fcpPlanner } from '../planners/fcp/index.ts';
import { magiPlanner } from '../planners/magi/index.ts';
import { ringPlanner } from '../planners/ring/index.ts';
import type { Planner } from '../planners/types.ts';
import { makeWlbPlanner, type NamedEstimate } from '../planners/wlb/index.ts';

const PLANNERS = new Map<string, Planner>();

/**
 * The simulator as `wlb`'s cost model: forward plus backward simulated makespan on the problem's
 * own cluster (`problem.cluster`, so `--cluster` changes the choice).
 */
export const simulatorEstimate: NamedEstimate = {
  name: 'sim',
  estimate: (plan, problem, onProgress) => {
    // The planner's own candidate, costed many times per plan: the plan wlb returns is validated
    // wherever it is executed, so the candidates skip it.
    const r = simulatePlan(plan, {
      cluster: problem.cluster,
      skipValidation: true,
      ...(onProgress ? { onProgress } : {}),
    });
    return r.forward.makespanMs + r.backward.makespanMs;
  },
};

/** Adds a planner; registering a name twice is a bug. */
export function registerPlanner(p: Planner): void {
  if (PLANNERS.has(p.name)) throw new Error(`planner ${p.name} registered twice`);
  // Every plan request first meets the granularity limits (core/limits.ts): `--block-size 1` or
  // `--chunk-size 1` would otherwise plan for minutes or run out of memory.
  const bounded: Planner = {
    ...p,
    plan: (problem, options = {}) => {
      const issues = plannerLimitIssues(p.name, problem.sequences, options as Record<string, unknown>);
      if (issues.length > 0) throw new FcpError(issues);
      return p.plan(problem, options);
    },
  };
  PLANNERS.set(p.name, bounded);
}

registerPlanner(fcpPlanner);
registerPlanner(ringPlanner);
registerPlanner(byteScalePlanner);
registerPlanner(makeWlbPlanner(simulatorEstimate));
registerPlanner(magiPlanner);

/** The planner called `name`; FcpError `strategy.unknown` otherwise. */
export function getPlanner(name: string): Planner {
  const p = PLANNERS.get(name);
  if (!p)
    fail(
      'strategy.unknown',
      `unknown strategy ${JSON.stringify(name)}; choose one of ${plannerNames().join(', ')}`,
      'strategy',
    );
  return p;
}

/** Registered strategy names, in registration order. */
export function plannerNames(): string[] {
  return [...PLANNERS.keys()];
}

/** All registered planners. */
export function allPlanners(): Planner[] {
  return [...PLANNERS.values()];
}

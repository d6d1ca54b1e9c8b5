/**
 * Planner registry: every strategy of `fcp plan --strategy NAME`. Planners register here by name.
 *
 * This is the one place below the CLI where a planner meets an executor: `wlb` is a cost-model
 * oracle and gets the simulator injected here (planner modules themselves never import executors).
 */
import { fail } from '../core/issues.ts';
import { simulatePlan } from '../executors/sim/index.ts';
import { byteScalePlanner } from './bytescale/index.ts';
import { fcpPlanner } from './fcp/index.ts';
import { magiPlanner } from './magi/index.ts';
import { ringPlanner } from './ring/index.ts';
import type { Planner } from './types.ts';
import { makeWlbPlanner, type NamedEstimate } from './wlb/index.ts';

const PLANNERS = new Map<string, Planner>();

/**
 * The simulator as `wlb`'s cost model: forward plus backward simulated makespan on the problem's
 * own cluster (`problem.cluster`, so `--cluster` changes the choice).
 */
export const simulatorEstimate: NamedEstimate = {
  name: 'sim',
  estimate: (plan, problem) => {
    const r = simulatePlan(plan, { cluster: problem.cluster });
    return r.forward.makespanMs + r.backward.makespanMs;
  },
};

/** Adds a planner; registering a name twice is a bug. */
export function registerPlanner(p: Planner): void {
  if (PLANNERS.has(p.name)) throw new Error(`planner ${p.name} registered twice`);
  PLANNERS.set(p.name, p);
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

/**
 * Planner registry: every strategy of `fcp plan --strategy NAME`. Planners register here by name.
 */
import { fail } from '../core/issues.ts';
import { byteScalePlanner } from './bytescale/index.ts';
import { fcpPlanner } from './fcp/index.ts';
import { magiPlanner } from './magi/index.ts';
import { ringPlanner } from './ring/index.ts';
import type { Planner } from './types.ts';
import { wlbPlanner } from './wlb/index.ts';

const PLANNERS = new Map<string, Planner>();

/** Adds a planner; registering a name twice is a bug. */
export function registerPlanner(p: Planner): void {
  if (PLANNERS.has(p.name)) throw new Error(`planner ${p.name} registered twice`);
  PLANNERS.set(p.name, p);
}

registerPlanner(fcpPlanner);
registerPlanner(ringPlanner);
registerPlanner(byteScalePlanner);
registerPlanner(wlbPlanner);
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

/**
 * Laws every simulation of a valid plan obeys, whatever the strategy: what a fair comparison leans
 * on when it reads one strategy's simulated time against another's. For each phase:
 *
 * 1. The makespan is at least the busiest rank's compute time (compute is never hidden).
 * 2. The contention model is never faster than the fluid one (it only adds incast and per-flow
 *    costs to the same flows: data/network/contention.json).
 * 3. Doubling every link's bandwidth never makes a phase slower.
 * 4. Transfers that carry no bytes (`freeKinds`, every kind) never make a phase slower.
 *
 * Laws 2-4 are monotonicity: a fixed per-rank order of ops and groups, fair sharing of links and
 * no speculative choices in the engine (engine.ts) make them hold exactly; a violation is an engine
 * bug (an event handled out of order, a rate computed from stale shares). Checked by
 * bench/fuzz-sim.ts on random plans of every strategy and by test/executors/sim-laws.test.ts.
 */
import { KIND_NAMES, type Plan } from '../../plan/types.ts';
import type { ClusterSpec } from '../../problem/cluster.ts';
import { type SimOptions, simulatePlan } from './index.ts';

/** One broken law: which, in which phase, and by how much (relative to the plain run's makespan). */
export interface SimLawBreak {
  readonly law: string;
  readonly phase: 'forward' | 'backward';
  readonly by: number;
  readonly detail: string;
}

/** Relative slack for float noise in the engine's event times. */
const EPS = 1e-9;

/** Every transfer kind's code. */
const ALL_KINDS = KIND_NAMES.map((_, code) => code);

/**
 * Simulates `plan` on `cluster` five ways (as given, fluid, contention, twice the bandwidth, free
 * transfers) and returns every law broken (empty when all hold). `options`: the rest of the
 * simulation options (calibration, ...), the same for every run.
 */
export function checkSimLaws(plan: Plan, cluster: ClusterSpec, options: SimOptions = {}): SimLawBreak[] {
  const run = (c: ClusterSpec, extra: SimOptions = {}) =>
    simulatePlan(plan, { ...options, ...extra, cluster: c, skipValidation: true });
  const over = (o: Partial<ClusterSpec>): ClusterSpec => ({ ...cluster, ...o });
  const base = run(cluster);
  const fluid = cluster.network === 'fluid' ? base : run(over({ network: 'fluid' }));
  const contention = cluster.network === 'contention' ? base : run(over({ network: 'contention' }));
  const wide = run(
    over({
      nvlinkGBps: cluster.nvlinkGBps * 2,
      nicGBps: cluster.nicGBps * 2,
      linkGBps: cluster.linkGBps * 2,
      nodeNicGBps: cluster.nodeNicGBps * 2,
    }),
  );
  const free = run(cluster, { freeKinds: { forward: ALL_KINDS, backward: ALL_KINDS } });
  const breaks: SimLawBreak[] = [];
  for (const phase of ['forward', 'backward'] as const) {
    const ms = base[phase].makespanMs;
    const rel = (x: number): number => (ms > 0 ? x / ms : x);
    const check = (law: string, excess: number, detail: string): void => {
      if (rel(excess) > EPS) breaks.push({ law, phase, by: rel(excess), detail });
    };
    const busiest = Math.max(0, ...base[phase].computeMs);
    check('makespan >= busiest compute', busiest - ms, `makespan ${ms} ms, busiest compute ${busiest} ms`);
    const f = fluid[phase].makespanMs;
    const c = contention[phase].makespanMs;
    check('contention >= fluid', f - c, `fluid ${f} ms, contention ${c} ms`);
    const w = wide[phase].makespanMs;
    check('twice the bandwidth is not slower', w - ms, `${ms} ms, with twice the bandwidth ${w} ms`);
    const z = free[phase].makespanMs;
    check('free transfers are not slower', z - ms, `${ms} ms, with free transfers ${z} ms`);
  }
  return breaks;
}

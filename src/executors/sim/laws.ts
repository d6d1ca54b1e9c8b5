/**
 * Laws every simulation of a valid plan obeys, whatever the strategy: what a fair comparison leans
 * on when it reads one strategy's simulated time against another's. For each phase:
 *
 * 1. The makespan is at least the busiest rank's compute time (compute is never hidden).
 * 2. Doubling every link's bandwidth does not make a phase slower (max-min fair rates scale with
 *    the capacities; only the latencies stay).
 * 3. Transfers that carry no bytes (`freeKinds`, every kind) do not make a phase slower.
 *
 * Law 1 holds exactly; laws 2 and 3 within {@link MONOTONE_SLACK} (none of 240 random plans came
 * near it: bench/fuzz-sim.ts, session 39). A break is an engine bug: an event handled out of
 * order, a rate computed from stale shares.
 *
 * Not a law: that the contention model is never faster than the fluid one. It lowers the capacity
 * of NIC ports, and max-min fair sharing is not monotone: a flow slowed at a NIC holds less of the
 * other ports on its path (under PXN, NVLink ports), the flows beside it there end sooner, and the
 * critical path may run through them (the mechanism is inferred from which flows end earlier; no
 * single flow was traced). `magi` `longtail` at 154 ranks, 4 GPUs a node, hopper-ib, PXN ran its
 * forward 3.5% faster under contention than fluid (3.3% with the exact rate solver, so not the
 * local solver's approximation); 496 of its 11494 flows ended earlier, by up to 4 ms (bench/fuzz-sim.ts
 * --large prints such cases). Checked by bench/fuzz-sim.ts on random plans of every strategy and by
 * test/executors/sim-laws.test.ts.
 */
import { KIND_NAMES, type Plan } from '../../plan/types.ts';
import type { ClusterSpec } from '../../problem/cluster.ts';
import { type SimOptions, simulatePlan } from './index.ts';

/**
 * One law in one phase: by how much its inequality is exceeded, relative to the plain run's
 * makespan (<= 0 when it holds with room), and the slack it is allowed.
 */
export interface SimLawCheck {
  readonly law: string;
  readonly phase: 'forward' | 'backward';
  readonly by: number;
  readonly slack: number;
  readonly detail: string;
}

/** Relative slack of law 1: float noise in the engine's event times. */
const EPS = 1e-9;

/**
 * Relative slack of laws 2 and 3: latencies that do not scale with bandwidth may reorder events
 * (module comment); a few times any reordering effect seen is still no engine bug's size.
 */
export const MONOTONE_SLACK = 0.01;

/** Every transfer kind's code. */
const ALL_KINDS = KIND_NAMES.map((_, code) => code);

/** The laws `plan` breaks beyond their slack on `cluster` (empty when all hold); see {@link simLawChecks}. */
export function checkSimLaws(plan: Plan, cluster: ClusterSpec, options: SimOptions = {}): SimLawCheck[] {
  return simLawChecks(plan, cluster, options).filter((c) => c.by > c.slack);
}

/**
 * Simulates `plan` on `cluster` three ways (as given, twice the bandwidth, free transfers) and
 * returns every law's check in both phases. `options`: the rest of the simulation options
 * (calibration, ...), the same for every run.
 */
export function simLawChecks(plan: Plan, cluster: ClusterSpec, options: SimOptions = {}): SimLawCheck[] {
  const run = (c: ClusterSpec, extra: SimOptions = {}) =>
    simulatePlan(plan, { ...options, ...extra, cluster: c, skipValidation: true });
  const base = run(cluster);
  const wide = run({
    ...cluster,
    nvlinkGBps: cluster.nvlinkGBps * 2,
    nicGBps: cluster.nicGBps * 2,
    linkGBps: cluster.linkGBps * 2,
    nodeNicGBps: cluster.nodeNicGBps * 2,
  });
  const free = run(cluster, { freeKinds: { forward: ALL_KINDS, backward: ALL_KINDS } });
  const checks: SimLawCheck[] = [];
  for (const phase of ['forward', 'backward'] as const) {
    const ms = base[phase].makespanMs;
    const rel = (x: number): number => (ms > 0 ? x / ms : x);
    const check = (law: string, excess: number, detail: string, slack = MONOTONE_SLACK): void => {
      checks.push({ law, phase, by: rel(excess), slack, detail });
    };
    const busiest = Math.max(0, ...base[phase].computeMs);
    check(
      'makespan >= busiest compute',
      busiest - ms,
      `makespan ${ms} ms, busiest compute ${busiest} ms`,
      EPS,
    );
    const w = wide[phase].makespanMs;
    check('twice the bandwidth is not slower', w - ms, `${ms} ms, with twice the bandwidth ${w} ms`);
    const z = free[phase].makespanMs;
    check('free transfers are not slower', z - ms, `${ms} ms, with free transfers ${z} ms`);
  }
  return checks;
}

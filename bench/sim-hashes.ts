/**
 * Hashes simulation results over a grid of plans, to check that a simulator change meant to be a
 * pure speed-up leaves every result bit-identical: run it on the old commit (a worktree) and on
 * the new one and diff the outputs (the partner of bench/plan-hashes.ts for the planners).
 *
 * Run: npx tsx bench/sim-hashes.ts [--quick] [--large] [--only SUBSTRING]
 *
 * Grid: every strategy (fcp in modes (a) and (b), ring, bytescale, wlb, magi with each backend) x
 * batches longtail, magi, bimodal x worlds 16 and 128, under the fluid and the contention network
 * and under PXN routing, plus the exact rate mode; `--large` adds magi and fcp at 1024 ranks (the
 * runs the baselines' sweep spends its time in); `--quick` keeps world 16. Each line: the
 * configuration, sha256 of the forward and backward per-rank results (makespan, compute,
 * communication, exposed and idle time per rank, bytes, event and solve counts; every float as
 * its 64-bit pattern) and the simulation time (ms, for orientation only; not hashed).
 */
import { createHash } from 'node:crypto';
import { type SimPhaseResult, simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import type { PlannerOptions } from '../src/planners/types.ts';
import { type ClusterOverrides, resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

interface Config {
  readonly label: string;
  readonly strategy: string;
  readonly batch: string;
  readonly world: number;
  readonly cluster: ClusterOverrides;
  readonly options: PlannerOptions;
  readonly exact?: boolean;
}

const STRATEGIES: readonly [string, string, PlannerOptions][] = [
  ['fcp (a)', 'fcp', {}],
  ['fcp (b)', 'fcp', { loaderLayout: true }],
  ['ring', 'ring', {}],
  ['bytescale', 'bytescale', {}],
  ['wlb', 'wlb', {}],
  ['magi a2av', 'magi', { magiBackend: 'a2av' }],
  ['magi native', 'magi', { magiBackend: 'native', hideTailReduce: true, overlapDegree: 3 }],
];

function grid(quick: boolean, large: boolean): Config[] {
  const out: Config[] = [];
  const settings: [string, ClusterOverrides][] = [
    ['fluid', { network: 'fluid' }],
    ['contention', { network: 'contention' }],
    ['pxn', { network: 'fluid', routing: 'pxn' }],
  ];
  for (const world of quick ? [16] : [16, 128])
    for (const batch of ['longtail', 'magi', 'bimodal'])
      for (const [name, strategy, options] of STRATEGIES)
        for (const [s, cluster] of settings)
          out.push({ label: `${name} ${batch} w${world} ${s}`, strategy, batch, world, cluster, options });
  out.push({
    label: 'magi native longtail w64 exact',
    strategy: 'magi',
    batch: 'longtail',
    world: 64,
    cluster: {},
    options: { magiBackend: 'native' },
    exact: true,
  });
  if (large)
    for (const [name, strategy, options] of STRATEGIES.filter(([, s]) => s === 'magi' || s === 'fcp'))
      out.push({
        label: `${name} longtail w1024 fluid`,
        strategy,
        batch: 'longtail',
        world: 1024,
        cluster: {},
        options,
      });
  return out;
}

/** Feeds every float of a phase's results into the hash as its 64-bit pattern. */
function hashPhase(h: ReturnType<typeof createHash>, r: SimPhaseResult): void {
  const nums = [
    r.makespanMs,
    r.events,
    r.rateSolves,
    r.reshuffle.inMs,
    r.reshuffle.outMs,
    r.bytes.total,
    ...r.computeMs,
    ...r.commMs,
    ...r.idleMs,
    ...r.exposedCommMs,
  ];
  h.update(new Uint8Array(Float64Array.from(nums).buffer));
}

const argv = process.argv.slice(2);
const only = argValue(argv, '--only', '');
for (const c of grid(argv.includes('--quick'), argv.includes('--large'))) {
  if (only && !c.label.includes(only)) continue;
  const cluster = resolveCluster('hopper-ib', c.cluster);
  const problem = resolveProblem({ batch: c.batch, world: c.world, tokensPerRank: 32768, seed: 1, cluster });
  const plan = getPlanner(c.strategy).plan(problem, c.options);
  const t0 = performance.now();
  const r = simulatePlan(plan, {
    cluster,
    skipValidation: true,
    ...(c.exact ? { rates: { mode: 'exact' as const } } : {}),
  });
  const ms = performance.now() - t0;
  const h = createHash('sha256');
  hashPhase(h, r.forward);
  hashPhase(h, r.backward);
  console.log(`${c.label}: ${h.digest('hex').slice(0, 16)} ${ms.toFixed(0)}ms`);
}

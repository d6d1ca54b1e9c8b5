/**
 * What the simulator's default rate solver costs each strategy: every plan simulated with the
 * local solver (the default: a change re-balances only its neighbourhood, src/executors/sim/rates.ts)
 * and with the exact one (whole max-min component), and the MFU change from local to exact printed
 * per strategy. A comparison leans on the local solver being off by about as much for every
 * strategy; this measures it. The strategies run in the grid's configurations at 256 ranks
 * (docs/results/*: magi native, overlap 4, chunk 2048; bytescale sized and packed by work).
 *
 * Run: npx tsx bench/rate-solver.ts [--worlds 64] [--seeds 1] [--batch longtail] [--routing direct|pxn]
 *                                   [--network fluid|contention] [--cluster hopper-ib|ratio-5920]
 *                                   [--strategies 'fcp (a),fcp (b),magi,bytescale'] (names as printed)
 * (magi at 256 ranks takes 5-7 minutes with the exact solver.)
 */
import { simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import type { PlannerOptions } from '../src/planners/types.ts';
import { type NetworkModel, type Routing, resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const worlds = argValue(argv, '--worlds', '64').split(',').map(Number);
const seeds = argValue(argv, '--seeds', '1').split(',').map(Number);
const batch = argValue(argv, '--batch', 'longtail');
const routing = argValue(argv, '--routing', 'direct') as Routing;
const network = argValue(argv, '--network', 'fluid') as NetworkModel;
const clusterName = argValue(argv, '--cluster', 'hopper-ib');
const cluster = resolveCluster(clusterName, { routing, network });

/** Name, strategy and options of each plan simulated. */
const CONFIGS: readonly [string, string, PlannerOptions][] = [
  ['fcp (a)', 'fcp', {}],
  ['fcp (b)', 'fcp', { loaderLayout: true } as PlannerOptions],
  [
    'magi',
    'magi',
    { magiBackend: 'native', hideTailReduce: false, overlapDegree: 4, chunkSize: 2048 } as PlannerOptions,
  ],
  [
    'bytescale',
    'bytescale',
    { bytescaleSizing: 'work', bytescalePacking: 'work', bytescalePow2: false } as PlannerOptions,
  ],
];

const only = argValue(argv, '--strategies', CONFIGS.map(([n]) => n).join(',')).split(',');
for (const n of only)
  if (!CONFIGS.some(([name]) => name === n)) {
    console.error(`rate-solver: --strategies takes ${CONFIGS.map(([x]) => x).join(', ')} (got '${n}')`);
    process.exit(2);
  }

const pct = (a: number, b: number): string => `${b >= a ? '+' : ''}${((b / a - 1) * 100).toFixed(2)}%`;
console.log(
  `rate solver, local -> exact: ${batch}, ${clusterName} ${routing} ${network}, 32K tokens a rank (simulated MFU)`,
);
console.log(
  'world  seed  strategy    forward                     backward                    local s  exact s',
);
for (const world of worlds)
  for (const seed of seeds) {
    const problem = resolveProblem({ batch, world, tokensPerRank: 32768, seed, cluster });
    for (const [name, strategy, options] of CONFIGS) {
      if (!only.includes(name)) continue;
      const plan = getPlanner(strategy).plan(problem, options);
      const sim = (mode: 'local' | 'exact') => {
        const t = performance.now();
        const r = simulatePlan(plan, { cluster, skipValidation: true, rates: { mode } });
        return { r, s: (performance.now() - t) / 1000 };
      };
      const local = sim('local');
      const exact = sim('exact');
      const cell = (dir: 'forward' | 'backward'): string =>
        `${local.r[dir].mfu.toFixed(4)} -> ${exact.r[dir].mfu.toFixed(4)} (${pct(local.r[dir].mfu, exact.r[dir].mfu)})`.padEnd(
          28,
        );
      console.log(
        `${String(world).padStart(5)}  ${String(seed).padStart(4)}  ${name.padEnd(10)}  ${cell('forward')}${cell('backward')}${local.s.toFixed(1).padStart(7)}  ${exact.s.toFixed(1).padStart(7)}`,
      );
    }
  }

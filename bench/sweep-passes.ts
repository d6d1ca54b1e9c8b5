/**
 * What the baselines' sweep (`fcp compare --baselines best`, src/experiments/tune.ts) gains from
 * passing over its stages until a pass keeps nothing new, against one pass (both time every trial
 * on every batch, as the sweep has since session 40): per strategy, batch kind, world and cluster
 * setting, both winners, their mean simulated MFU over the batches (forward / backward) and the
 * trials each ran. A baseline whose winner changes is under-tuned by one pass.
 *
 * Run: npx tsx bench/sweep-passes.ts [--strategies magi,bytescale,wlb] [--batches longtail,magi,bimodal]
 *        [--worlds 16,32,64,128,256] [--cluster hopper-ib] [--network fluid|contention]
 *        [--routing direct|pxn] [--seeds 3]
 */
import type { SimResult } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { type Config, tuneStrategy } from '../src/experiments/tune.ts';
import { type Routing, resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue, networkArg } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const list = (k: string, d: string): string[] => argValue(argv, k, d).split(',');
const strategies = list('--strategies', 'magi');
const batches = list('--batches', 'longtail,magi,bimodal');
const worlds = list('--worlds', '16,32,64,128,256').map(Number);
const clusterName = argValue(argv, '--cluster', 'hopper-ib');
const network = networkArg(argv, 'sweep-passes');
const routing = argValue(argv, '--routing', 'direct') as Routing;
const seeds = Number(argValue(argv, '--seeds', '3'));
const cluster = resolveCluster(clusterName, { routing, network });

const mean = (rs: SimResult[], dir: 'forward' | 'backward'): string =>
  (rs.reduce((s, r) => s + r[dir].mfu, 0) / rs.length).toFixed(3);
const show = (c: Config): string =>
  Object.entries(c)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

console.log(
  `baselines' sweep, one pass -> until nothing changes: ${clusterName} ${routing} ${network}, seeds 1-${seeds}, 32K tokens a rank (simulated MFU fwd / bwd)`,
);
let changed = 0;
let cells = 0;
for (const strategy of strategies)
  for (const batch of batches)
    for (const world of worlds) {
      const problems = Array.from({ length: seeds }, (_, i) =>
        resolveProblem({ batch, world, seed: 1 + i, tokensPerRank: 32768, cluster }),
      );
      const planner = getPlanner(strategy);
      const one = tuneStrategy(planner, problems, {}, { cluster }, undefined, undefined, undefined, 1);
      const full = tuneStrategy(planner, problems, {}, { cluster });
      cells++;
      const same = show(one.config) === show(full.config);
      if (!same) changed++;
      console.log(
        `${strategy} ${batch} ${world}: ${mean(one.results, 'forward')} / ${mean(one.results, 'backward')} (${one.trials.length} trials) -> ${mean(full.results, 'forward')} / ${mean(full.results, 'backward')} (${full.trials.length} trials)${same ? '' : `  [${show(one.config)}] -> [${show(full.config)}]`}`,
      );
    }
console.log(`${changed} of ${cells} winners changed`);

/**
 * An optimistic stand-in for MagiAttention with its dynamic solver (`MAGI_ATTENTION_QO_COMM=1`,
 * not modelled: docs/baselines.md), simulated: the static `magi` plan at one overlap stage (the
 * dynamic solver forces `overlap_degree` 1, magi_attention/config.py:68-71) with its compute
 * imbalance removed for free (the busiest rank's compute excess over the mean taken off the
 * makespan). The real solver balances only to within 10% of the mean and adds Q, O and LSE bytes
 * (bench/magi-dynamic.ts), neither charged here, so its MFU would be at most about this. Printed
 * beside the tuned static configuration's MFU at overlap 4, per chunk size, mean over the seeds,
 * hopper-ib with PXN routing and the native backend (the grid's magi at 256 ranks).
 *
 * Run: npx tsx bench/magi-dynamic-bound.ts [--batches longtail,magi,bimodal] [--worlds 256]
 *        [--chunks 2048,4096] [--seeds 1,2,3] [--network fluid|contention]
 * (256 ranks: about a minute per batch kind and chunk.)
 */

import type { SimPhaseResult } from '../src/executors/sim/index.ts';
import { simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import type { PlannerOptions } from '../src/planners/types.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue, networkArg } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const list = (k: string, d: string): string[] => argValue(argv, k, d).split(',');
const batches = list('--batches', 'longtail,magi,bimodal');
const worlds = list('--worlds', '256').map(Number);
const chunks = list('--chunks', '2048,4096').map(Number);
const seeds = list('--seeds', '1,2,3').map(Number);
const network = networkArg(argv, 'magi-dynamic-bound');
const cluster = resolveCluster('hopper-ib', { routing: 'pxn', network });

/** MFU with the busiest rank's compute excess over the mean taken off the makespan. */
const rebalanced = (p: SimPhaseResult): number => {
  const max = Math.max(...p.computeMs);
  const mean = p.computeMs.reduce((a, b) => a + b, 0) / p.computeMs.length;
  return (p.mfu * p.makespanMs) / (p.makespanMs - (max - mean));
};

console.log(
  `magi, native backend, hopper-ib pxn ${network}, seeds ${seeds.join(',')} (simulated MFU, forward / backward, mean over seeds)`,
);
console.log('batch      world  chunk  static, overlap 4    static, overlap 1    overlap 1 rebalanced');
for (const batch of batches)
  for (const world of worlds)
    for (const chunk of chunks) {
      const sum = [0, 0, 0, 0, 0, 0];
      for (const seed of seeds) {
        const problem = resolveProblem({ batch, world, tokensPerRank: 32768, seed, cluster });
        const run = (overlapDegree: number) => {
          const options = { magiBackend: 'native', chunkSize: chunk, overlapDegree } as PlannerOptions;
          return simulatePlan(getPlanner('magi').plan(problem, options), { cluster, skipValidation: true });
        };
        const four = run(4);
        const one = run(1);
        const xs = [
          four.forward.mfu,
          four.backward.mfu,
          one.forward.mfu,
          one.backward.mfu,
          rebalanced(one.forward),
          rebalanced(one.backward),
        ];
        xs.forEach((x, i) => {
          sum[i]! += x / seeds.length;
        });
      }
      const pair = (i: number): string => `${sum[i]!.toFixed(3)} / ${sum[i + 1]!.toFixed(3)}`.padEnd(21);
      console.log(
        `${batch.padEnd(10)} ${String(world).padStart(5)}  ${String(chunk).padStart(5)}  ${pair(0)}${pair(2)}${pair(4)}`,
      );
    }

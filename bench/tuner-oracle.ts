/**
 * How far the self-tuner's choice is from the best of its own candidates (simulated): per batch,
 * FCP mode (b) as `fcp plan` runs it (the tuner picks a group size, relays or not, and the swap
 * variant by the planner's estimate, transfers/timeline.ts), then every such candidate planned
 * alone (`tune: false` with the knobs pinned: the group sizes the tuner plans at that world,
 * tune-candidates.ts, each with relays off and on and with swaps inside nodes and anywhere when
 * the world spans nodes) and simulated; the oracle is the one
 * with the least simulated forward plus backward makespan. The gap bounds what a better chooser
 * (an estimate closer to the simulator) could add with these candidates; the caps, the placement
 * and the op order are the tuner's in every candidate. `--mode a`: mode (a), whose tuner plans
 * every block size the budget buys (tune-candidates.ts, BLOCK_SIZE_CANDIDATES) with each group
 * size of DEFAULT_CANDIDATES; the candidates are those pairs pinned (`tune: false`), and where the
 * budget buys one across nodes (256 ranks and more), that one with relays as the tuner plans it
 * and without.
 *
 * Run: npx tsx bench/tuner-oracle.ts [--mode a|b] [--batches longtail,magi,bimodal] [--worlds 64,128,256]
 *                                    [--seeds 1,2,3] [--network fluid|contention] [--cluster hopper-ib]
 *                                    [--routing direct|pxn]
 */

import { simulatePlan } from '../src/executors/sim/index.ts';
import type { Plan } from '../src/plan/types.ts';
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import {
  BLOCK_SIZE_CANDIDATES,
  blockSizeCandidates,
  DEFAULT_BUDGET_MS,
  DEFAULT_CANDIDATES,
  LOADER_CANDIDATES,
  LOADER_MIN_CANDIDATES,
  tuneCandidates,
} from '../src/planners/fcp/tune-candidates.ts';
import { spansNodes } from '../src/planners/fcp/tuner.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { type Problem, resolveProblem } from '../src/problem/problem.ts';
import { argValue, batchGrid } from './fcp-replay.ts';

const args = process.argv.slice(2);
const { batches, worlds, seeds, network } = batchGrid(args, '64,128,256', '1,2,3');
const modeA = argValue(args, '--mode', 'b') === 'a';
const clusterName = argValue(args, '--cluster', 'hopper-ib');
const routing = argValue(args, '--routing', '');
const cluster = resolveCluster(clusterName, {
  network,
  ...(routing === 'pxn' || routing === 'direct' ? { routing } : {}),
});

interface Outcome {
  readonly f: number;
  readonly b: number;
  readonly ms: number;
}

const run = (plan: Plan): Outcome => {
  const r = simulatePlan(plan, { cluster });
  return { f: r.forward.mfu, b: r.backward.mfu, ms: r.forward.makespanMs + r.backward.makespanMs };
};

/**
 * The pinned candidates of a problem: the group sizes the tuner plans for it without a budget
 * (tuner.ts, tunedPipeline: the default budget's count, at least LOADER_MIN_CANDIDATES), each
 * with and without relays and with both swap variants where the world spans nodes.
 */
function candidates(p: Problem): { name: string; o: FcpPlannerOptions }[] {
  const out: { name: string; o: FcpPlannerOptions }[] = [];
  const multiNode = spansNodes(p);
  if (modeA) {
    const pairs = tuneCandidates(p.world, DEFAULT_BUDGET_MS, DEFAULT_CANDIDATES.length);
    const sizes = BLOCK_SIZE_CANDIDATES.slice(0, blockSizeCandidates(p.world, DEFAULT_BUDGET_MS, pairs));
    // Where the budget buys one candidate across nodes the tuner's fetches with relays (tuner.ts):
    // that one and the direct plan beside it.
    const relays = pairs === 1 && multiNode ? [false, true] : [false];
    for (const blockSize of sizes)
      for (const { coalesce } of DEFAULT_CANDIDATES.slice(0, pairs))
        for (const fanOut of relays)
          out.push({
            name: `b${blockSize}/c${coalesce}${fanOut ? '+relay' : ''}`,
            o: { tune: false, blockSize, coalesce, ...(fanOut ? { fanOut } : {}) },
          });
    return out;
  }
  const count = Math.max(
    LOADER_MIN_CANDIDATES,
    tuneCandidates(p.world, DEFAULT_BUDGET_MS, LOADER_CANDIDATES.length),
  );
  for (const { coalesce } of LOADER_CANDIDATES.slice(0, count))
    for (const fanOut of multiNode ? [false, true] : [false])
      for (const loaderSwaps of multiNode ? (['node', 'any'] as const) : (['node'] as const))
        out.push({
          name: `c${coalesce}${fanOut ? '+relay' : ''}/${loaderSwaps}`,
          o: { loaderLayout: true, tune: false, coalesce, fanOut, loaderSwaps },
        });
  return out;
}

const f3 = (x: number): string => x.toFixed(3);
console.log(
  `FCP mode (${modeA ? 'a' : 'b'}): the tuner's choice against the best of its candidates (simulated, ${network}, ${clusterName}${routing !== '' ? `, ${routing} routing` : ''})`,
);
console.log('batch     world  seed  tuner fwd/bwd  oracle fwd/bwd  oracle               oracle/tuner time');
/** Forward plus backward makespans summed over every batch: the tuner's and the oracle's. */
const all = { tuned: 0, oracle: 0 };
for (const batch of batches)
  for (const world of worlds) {
    const sum = { tf: 0, tb: 0, of: 0, ob: 0 };
    for (const seed of seeds) {
      const t0 = performance.now();
      const p = resolveProblem({ batch, world, tokensPerRank: 32768, seed, cluster });
      const tuned = run(fcpPlanner.plan(p, modeA ? {} : { loaderLayout: true }));
      let best = tuned;
      let bestName = 'tuner';
      for (const c of candidates(p)) {
        const r = run(fcpPlanner.plan(p, c.o));
        if (r.ms < best.ms) {
          best = r;
          bestName = c.name;
        }
      }
      all.tuned += tuned.ms;
      all.oracle += best.ms;
      sum.tf += tuned.f;
      sum.tb += tuned.b;
      sum.of += best.f;
      sum.ob += best.b;
      console.log(
        `${batch.padEnd(9)} ${String(world).padStart(5)}  ${String(seed).padStart(4)}  ${f3(tuned.f)}/${f3(tuned.b)}    ${f3(best.f)}/${f3(best.b)}     ${bestName.padEnd(20)} ${f3(best.ms / tuned.ms)}`,
      );
      process.stderr.write(
        `  ${batch} ${world} seed ${seed}: ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
      );
    }
    const n = seeds.length;
    console.log(
      `${batch.padEnd(9)} ${String(world).padStart(5)}  mean  ${f3(sum.tf / n)}/${f3(sum.tb / n)}    ${f3(sum.of / n)}/${f3(sum.ob / n)}`,
    );
  }
console.log(`all batches: oracle / tuner forward + backward time ${(all.oracle / all.tuned).toFixed(4)}`);

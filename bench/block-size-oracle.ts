/**
 * How well mode (a)'s self-tuner chooses the block size (simulated): per batch, FCP as `fcp plan`
 * runs it (the tuner plans the block sizes its budget buys, tune-candidates.ts, and keeps the least
 * estimate), and each of BLOCK_SIZE_CANDIDATES pinned (`blockSize` given; the group sizes still
 * tuned). Prints, per world and over all, the mean MFU difference against 4096 pinned (the block
 * size before session 16) of the tuner's plan and of the oracle (the pinned size with the least
 * simulated forward plus backward makespan), ± the standard error over batches.
 *
 * Run: npx tsx bench/block-size-oracle.ts [--batches longtail,magi,bimodal] [--worlds 16,32,64,128]
 *        [--seeds 4,5,6,7,8,9] [--network fluid|contention] [--cluster hopper-ib|ratio-5920] [--jsonl]
 *        [--loader-layout] (mode (b): its block size is not tuned, so `tuned` is 4096 there)
 */
import { simulatePlan } from '../src/executors/sim/index.ts';
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import { BLOCK_SIZE_CANDIDATES } from '../src/planners/fcp/tune-candidates.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue, batchGrid } from './fcp-replay.ts';

const args = process.argv.slice(2);
const { batches, worlds, seeds, network } = batchGrid(args, '16,32,64,128', '4,5,6,7,8,9');
const clusterName = argValue(args, '--cluster', 'hopper-ib');
const cluster = resolveCluster(clusterName, { network });
// Mode (b) pins the block size (its layout's): there `tuned` is 4096 and only the oracle moves.
const loader = args.includes('--loader-layout') ? { loaderLayout: true } : {};

interface Diff {
  readonly tf: number;
  readonly tb: number;
  readonly of: number;
  readonly ob: number;
}
const byWorld = new Map<number, Diff[]>();
for (const batch of batches)
  for (const world of worlds)
    for (const seed of seeds) {
      const p = resolveProblem({ batch, world, tokensPerRank: 32768, seed, cluster });
      const sim = (blockSize?: number) => {
        const r = simulatePlan(
          fcpPlanner.plan(p, blockSize === undefined ? loader : { ...loader, blockSize }),
          { cluster },
        );
        return { f: r.forward.mfu, b: r.backward.mfu, ms: r.forward.makespanMs + r.backward.makespanMs };
      };
      const tuned = sim();
      const pinned = BLOCK_SIZE_CANDIDATES.map((size) => ({ size, ...sim(size) }));
      const base = pinned[0]!;
      const oracle = pinned.reduce((x, y) => (y.ms < x.ms ? y : x));
      if (args.includes('--jsonl'))
        console.log(JSON.stringify({ batch, world, seed, tuned, pinned, oracle: oracle.size }));
      const d = { tf: tuned.f - base.f, tb: tuned.b - base.b, of: oracle.f - base.f, ob: oracle.b - base.b };
      byWorld.set(world, [...(byWorld.get(world) ?? []), d]);
      process.stderr.write(`  ${batch} ${world} seed ${seed}\n`);
    }

const ms = (xs: number[]): string => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const v = xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1);
  return `${m >= 0 ? '+' : ''}${m.toFixed(4)} ± ${Math.sqrt(v / xs.length).toFixed(4)}`;
};
console.log(
  `FCP mode ${'loaderLayout' in loader ? '(b)' : '(a)'}, block size tuned and oracle against 4096 pinned (simulated, ${clusterName} ${network}; MFU difference, mean ± standard error)`,
);
console.log('world  batches  tuned fwd            tuned bwd            oracle fwd           oracle bwd');
const row = (name: string, ds: Diff[]): void =>
  console.log(
    `${name.padStart(5)}  ${String(ds.length).padStart(7)}  ${[
      ms(ds.map((d) => d.tf)),
      ms(ds.map((d) => d.tb)),
      ms(ds.map((d) => d.of)),
      ms(ds.map((d) => d.ob)),
    ]
      .map((s) => s.padEnd(19))
      .join('  ')}`,
  );
for (const [w, ds] of byWorld) row(String(w), ds);
row('all', [...byWorld.values()].flat());

/**
 * Per-rank start and tail of FCP's phases (issue 15, deliverable 4), simulated: for each batch,
 * world and seed, plans FCP, replays the plan on the simulator and prints per phase the MFU, the
 * makespan, and per rank (mean / max) when the first compute op starts, the exposed communication
 * and the idle time after the rank's last op (its tail).
 *
 * Run: npx tsx bench/fcp-timeline.ts [--worlds 16,64,256] [--batch longtail] [--seeds 1,2,3]
 *                                    [--loader-layout] [--network fluid|contention] [--cluster hopper-ib]
 */

import { sequencePairs } from '../src/model/attention.ts';
import type { NetworkModel } from '../src/problem/cluster.ts';
import { argValue, planForReplay, replayPhase } from './fcp-replay.ts';

const args = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(args, k, d);
const worlds = val('--worlds', '16,64,256').split(',').map(Number);
const seeds = val('--seeds', '1').split(',').map(Number);
const batch = val('--batch', 'longtail');
const loaderLayout = args.includes('--loader-layout');
const network = val('--network', 'fluid') as NetworkModel;
const clusterName = val('--cluster', 'hopper-ib');

const f1 = (x: number): string => x.toFixed(1);
const meanMax = (a: Float64Array | number[]): string => {
  let s = 0;
  let m = 0;
  for (const v of a) {
    s += v;
    m = Math.max(m, v);
  }
  return `${f1(s / a.length)}/${f1(m)}`;
};

console.log(
  `batch ${batch}${loaderLayout ? ' (loader layout)' : ''}, ${clusterName} ${network}, seeds ${seeds.join(',')}; simulated`,
);
console.log(
  'world seed phase   mfu    makespan  firstOp(mean/max) exposed(mean/max) compute(mean/max) tail(mean/max)',
);
for (const world of worlds) {
  const sum = { f: 0, b: 0 };
  for (const seed of seeds) {
    const replayed = planForReplay({ batch, world, seed, clusterName, network, loaderLayout });
    const { plan, kernel, cluster } = replayed;
    let pairs = 0;
    for (const L of plan.sequences) pairs += sequencePairs(plan.mask === 'causal', L);
    for (const dir of ['forward', 'backward'] as const) {
      const { prep, run } = replayPhase(replayed, dir, true);
      const first = new Float64Array(world).fill(run.makespanMs);
      const last = new Float64Array(world);
      for (let op = 0; op < prep.opCount; op++) {
        const r = prep.opRank[op]!;
        first[r] = Math.min(first[r]!, run.opStart[op]!);
        last[r] = Math.max(last[r]!, run.opEnd[op]!);
      }
      const tail = last.map((t) => run.makespanMs - t);
      const mfu = kernel.flops(dir, pairs) / (world * cluster.peakTflops * 1e9 * run.makespanMs);
      if (dir === 'forward') sum.f += mfu;
      else sum.b += mfu;
      console.log(
        [
          String(world).padStart(5),
          String(seed).padStart(4),
          dir.slice(0, 3).padEnd(5),
          mfu.toFixed(3),
          f1(run.makespanMs).padStart(8),
          meanMax(first).padStart(16),
          meanMax(run.exposedMs).padStart(16),
          meanMax(run.computeMs).padStart(16),
          meanMax(tail).padStart(14),
        ].join('  '),
      );
    }
  }
  console.log(
    `world ${world}: mean fwd ${(sum.f / seeds.length).toFixed(3)} bwd ${(sum.b / seeds.length).toFixed(3)}`,
  );
}

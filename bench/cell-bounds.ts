/**
 * What bounds one acceptance-grid cell of FCP (simulated): per world and direction, FCP's MFU
 * beside two upper bounds read from the same simulation, mean over the seeds:
 *
 * - `no idle`: the busiest rank's compute as the makespan (MFU x makespan / max compute): what
 *   hiding every wait would give with today's balance;
 * - `balanced`: the simulator's kernel MFU (useful FLOPs over the peak times the summed compute:
 *   perfect balance and no exposed communication), the grid's `kernels` line.
 *
 * With `--strongest F,B` (the strongest tuned baseline's forward and backward MFU of that cell,
 * from the headline's tables) it prints each as a ratio, so a miss reads as idle-bound (the
 * `no idle` ratio clears the target), balance-bound (only `balanced` does) or kernel-bound
 * (neither). Session 35 made this reading by hand (docs/results.md, "Session 35").
 *
 * Run: npx tsx bench/cell-bounds.ts [--batch longtail] [--worlds 256] [--seeds 1,2,3]
 *        [--cluster hopper-ib] [--network fluid|contention] [--loader-layout] [--pxn]
 *        [--strongest 0.553,0.456]
 */

import { simulatePlan } from '../src/executors/sim/index.ts';
import { argValue, networkArg, planForReplay } from './fcp-replay.ts';

const args = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(args, k, d);
const fail = (msg: string): never => {
  console.error(`cell-bounds: ${msg}`);
  process.exit(2);
};
const list = (k: string, d: string): number[] =>
  val(k, d)
    .split(',')
    .map((x) => {
      const n = Number(x);
      if (!Number.isFinite(n) || n <= 0)
        fail(`${k} takes positive numbers separated by commas (got '${val(k, d)}')`);
      return n;
    });
const network = networkArg(args, 'cell-bounds');
const worlds = list('--worlds', '256');
const seeds = list('--seeds', '1,2,3');
const strongest = args.includes('--strongest') ? list('--strongest', '') : null;
if (strongest !== null && strongest.length !== 2) fail('--strongest takes two numbers: forward,backward');
const batch = val('--batch', 'longtail');
const clusterName = val('--cluster', 'hopper-ib');
const loaderLayout = args.includes('--loader-layout');
const mode = loaderLayout ? 'b' : 'a';

const f3 = (x: number): string => x.toFixed(3);
const ratio = (x: number, d: number): string =>
  strongest === null ? '' : ` (${(x / strongest[d]!).toFixed(3)}x)`;
console.log(
  `FCP (${mode}), ${batch}, ${clusterName} ${network}${args.includes('--pxn') ? ', pxn' : ''}, seeds ${seeds.join(',')} (simulated; mean over seeds)`,
);
console.log('world  phase     MFU               no idle           balanced');
for (const world of worlds) {
  const sum = [
    [0, 0, 0],
    [0, 0, 0],
  ];
  for (const seed of seeds) {
    const r = planForReplay({
      batch,
      world,
      seed,
      clusterName,
      network,
      loaderLayout,
      ...(args.includes('--pxn') ? { routing: 'pxn' as const } : {}),
    });
    const sim = simulatePlan(r.plan, { cluster: r.cluster, skipValidation: true });
    [sim.forward, sim.backward].forEach((p, d) => {
      const maxCompute = Math.max(...p.computeMs);
      sum[d]![0]! += p.mfu;
      sum[d]![1]! += maxCompute > 0 ? (p.mfu * p.makespanMs) / maxCompute : 0;
      sum[d]![2]! += p.kernelMfu;
    });
  }
  for (const d of [0, 1]) {
    const [mfu, noIdle, balanced] = sum[d]!.map((x) => x / seeds.length) as [number, number, number];
    console.log(
      `${String(world).padStart(5)}  ${d === 0 ? 'forward ' : 'backward'}  ${`${f3(mfu)}${ratio(mfu, d)}`.padEnd(16)}  ${`${f3(noIdle)}${ratio(noIdle, d)}`.padEnd(16)}  ${f3(balanced)}${ratio(balanced, d)}`,
    );
  }
}

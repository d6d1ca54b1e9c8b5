/**
 * Simulator speed: plans the `longtail` batch (32K tokens per rank, seed 1) with each strategy at
 * each world size, then times `simulatePlan` (both phases, default options) and prints a table.
 * Planning time is reported but not part of the simulator's time; `sim cpu s` is the process CPU
 * time of the simulation (user + system), less sensitive than wall time to other load on the
 * machine (the simulator is single-threaded). Each row runs in a fresh plan but a warm process:
 * with `--repeat N` the best of N runs is shown. Targets (issue 5): a 256-rank
 * plan in <= 2 s, a 4096-rank plan in <= 60 s.
 *
 *   npx tsx bench/simulator.ts [--strategies fcp,ring,...] [--worlds 16,256,4096] [--batch longtail] [--repeat 1]
 *
 * Defaults skip ring above 1024 ranks: its plan alone is O(N^2) rows (17M transfers per phase at
 * 4096) and takes minutes to build.
 */

import { simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { resolveProblem } from '../src/problem/problem.ts';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : fallback;
}

const strategies = arg('strategies', 'fcp,ring,bytescale,magi').split(',');
const worlds = arg('worlds', '16,64,256,1024,4096').split(',').map(Number);
const batch = arg('batch', 'longtail');
const repeat = Number(arg('repeat', '1'));
const explicitWorlds = process.argv.includes('--worlds');

const header = [
  'strategy',
  'world',
  'plan s',
  'sim s',
  'sim cpu s',
  'flows f/b',
  'events f/b',
  'MFU f/b',
  'heap MB',
];
const rows: string[][] = [];
const WIDTH = [10, 6, 7, 7, 9, 16, 16, 12, 8];
const print = (cells: string[]): void =>
  console.log(cells.map((c, i) => (i < 2 ? c.padEnd(WIDTH[i]!) : c.padStart(WIDTH[i] ?? 8))).join('  '));
print(header);
for (const world of worlds)
  for (const s of strategies) {
    if (s === 'ring' && world > 1024 && !explicitWorlds) continue;
    const problem = resolveProblem({ world, batch, seed: 1 });
    let plan: ReturnType<ReturnType<typeof getPlanner>['plan']>;
    const p0 = performance.now();
    try {
      plan = getPlanner(s).plan(problem);
    } catch (e) {
      const cells = [s, String(world), 'n/a', `planner failed: ${(e as Error).message.slice(0, 60)}`];
      rows.push(cells);
      console.log(cells.join('  '));
      continue;
    }
    const planS = (performance.now() - p0) / 1000;
    let best = Number.POSITIVE_INFINITY;
    let bestCpu = Number.POSITIVE_INFINITY;
    let r: ReturnType<typeof simulatePlan> | undefined;
    for (let k = 0; k < repeat; k++) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      r = simulatePlan(plan);
      best = Math.min(best, (performance.now() - t0) / 1000);
      const c = process.cpuUsage(c0);
      bestCpu = Math.min(bestCpu, (c.user + c.system) / 1e6);
    }
    const res = r!;
    const cells = [
      s,
      String(world),
      planS.toFixed(2),
      best.toFixed(2),
      bestCpu.toFixed(2),
      `${res.forward.flows}/${res.backward.flows}`,
      `${res.forward.events}/${res.backward.events}`,
      `${res.forward.mfu.toFixed(3)}/${res.backward.mfu.toFixed(3)}`,
      (process.memoryUsage().heapUsed / 1e6).toFixed(0),
    ];
    rows.push(cells);
    print(cells);
  }

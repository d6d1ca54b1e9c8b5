/**
 * Plans one problem repeatedly and prints wall and CPU time per plan: a steady loop to profile
 * (`node --cpu-prof --import tsx bench/prof-run.ts 256 15`) or to compare two checkouts on a busy
 * machine (CPU time is less disturbed by other processes than wall time).
 *
 * Run: npx tsx bench/prof-run.ts [world 256] [reps 10] [batch longtail] [--loader-layout] [--fan-out]
 *                                 [--search least|relays|one-cap|full] (mode (b)'s search level)
 */
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const search = argValue(argv, '--search', '') || undefined;
const pos = argv.filter((a, i) => !a.startsWith('--') && argv[i - 1] !== '--search');
const world = Number(pos[0] ?? 256);
const reps = Number(pos[1] ?? 10);
const p = resolveProblem({ batch: pos[2] ?? 'longtail', world, tokensPerRank: 32768, seed: 1 });
const opts: Partial<FcpPlannerOptions> = {
  ...(argv.includes('--loader-layout') ? { loaderLayout: true } : {}),
  ...(argv.includes('--fan-out') ? { fanOut: true } : {}),
  ...(search !== undefined ? { loaderSearch: search as NonNullable<FcpPlannerOptions['loaderSearch']> } : {}),
};
fcpPlanner.plan(p, opts);
const c0 = process.cpuUsage();
const t0 = performance.now();
let best = Number.POSITIVE_INFINITY;
for (let i = 0; i < reps; i++) {
  const t = performance.now();
  fcpPlanner.plan(p, opts);
  best = Math.min(best, performance.now() - t);
}
const cpu = process.cpuUsage(c0);
const f = (x: number): string => x.toFixed(1);
console.log(
  `world ${world}: wall ${f((performance.now() - t0) / reps)} ms/plan (best ${f(best)}), cpu ${f((cpu.user + cpu.system) / 1000 / reps)} ms/plan`,
);

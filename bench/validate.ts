/**
 * Benchmark of the plan validator (rules 1-5 plus the rule-6 report) on large plans.
 * Run: npx tsx bench/validate.ts [strategy:world[:mask],...]
 * Default: fcp at 256, 1024 and 4096 ranks, ring at 64 and 256 (compact chunk rows), magi at 4096
 * (explicit rows), all on `longtail` at 32K tokens per rank, seed 1. Each row: one warm-up, then
 * best and median wall time of 3 runs, and the best CPU time (user, all threads, GC included).
 */

import { getPlanner } from '../src/experiments/strategies.ts';
import { validatePlan } from '../src/plan/validate.ts';
import { resolveProblem } from '../src/problem/problem.ts';

const DEFAULT = 'fcp:256,fcp:1024,fcp:4096,ring:64,ring:256,magi:4096';
const cases = (process.argv[2] ?? DEFAULT).split(',').map((c) => {
  const [strategy = 'fcp', world = '256', mask = 'causal'] = c.split(':');
  return { strategy, world: Number(world), mask };
});
const rows = (t: object | undefined): number => (t ? (Object.values(t)[0] as Int32Array).length : 0);
const head = [
  'strategy',
  'world',
  'mask',
  'tokens',
  'task rows',
  'transfer rows',
  'chunk rows',
  'best ms',
  'median ms',
  'cpu ms',
  'issues',
];
const out: string[][] = [head];
for (const c of cases) {
  const plan = getPlanner(c.strategy).plan(
    resolveProblem({ world: c.world, mask: c.mask, batch: 'longtail', seed: 1 }),
    {},
  );
  validatePlan(plan); // warm-up
  const wall: number[] = [];
  let cpu = Number.POSITIVE_INFINITY;
  let result = validatePlan(plan);
  for (let i = 0; i < 3; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    result = validatePlan(plan);
    wall.push(performance.now() - t0);
    cpu = Math.min(cpu, process.cpuUsage(c0).user / 1000);
  }
  wall.sort((a, b) => a - b);
  const chunkRows =
    rows(plan.chunkTasks) + rows(plan.forward.chunkTransfers) + rows(plan.backward.chunkTransfers);
  out.push([
    c.strategy,
    String(c.world),
    c.mask,
    result.report.tokens.toLocaleString('en-US'),
    rows(plan.tasks).toLocaleString('en-US'),
    (rows(plan.forward.transfers) + rows(plan.backward.transfers)).toLocaleString('en-US'),
    chunkRows.toLocaleString('en-US'),
    wall[0]!.toFixed(0),
    wall[1]!.toFixed(0),
    cpu.toFixed(0),
    String(result.issues.length + result.omitted),
  ]);
}
const width = head.map((_, i) => Math.max(...out.map((r) => r[i]!.length)));
for (const r of out)
  console.log(r.map((cell, i) => (i < 3 ? cell.padEnd(width[i]!) : cell.padStart(width[i]!))).join('  '));

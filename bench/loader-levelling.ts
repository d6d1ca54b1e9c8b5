/**
 * What levelling costs mode (b)'s layout (placement/loader-layout.ts), per token cap: the capped
 * placement's modelled per-phase compute imbalance, the same after levelling to equal tokens, the
 * busiest rank's K/V time (placement/loader-comm.ts) and two figures a cap choice can use: the
 * planner's (`proxy`: the busiest rank of a home-first placement of the levelled layout, plus K/V;
 * loader-caps.ts, layoutAtCap, which the planner runs) and the layout's own (`direct`: max forward
 * + max backward of the levelled layout, plus K/V). `*` marks the cap the planner keeps. Costs are
 * modelled kernel ms (phase-cost.ts), no simulation.
 *
 * Run: npx tsx bench/loader-levelling.ts [--batch magi] [--world 128] [--seed 3]
 */
import { KernelTime } from '../src/planners/fcp/kernel-time.ts';
import { LOADER_CAPS, layoutAtCap, maxOf } from '../src/planners/fcp/loader-caps.ts';
import { resolveFcpOptions } from '../src/planners/fcp/options.ts';
import { computeImbalance } from '../src/planners/fcp/placement/distribute.ts';
import { tokenImbalance } from '../src/planners/fcp/placement/loader-layout.ts';
import { layoutPhaseMs } from '../src/planners/fcp/placement/phase-cost.ts';
import { weightGeometry } from '../src/planners/fcp/placement/place.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const args = process.argv.slice(2);
const batch = argValue(args, '--batch', 'magi');
const world = Number(argValue(args, '--world', '128'));
const seed = Number(argValue(args, '--seed', '3'));
const problem = resolveProblem({ batch, world, seed, tokensPerRank: 32768 });
const o = resolveFcpOptions({});
const kernel = new KernelTime(problem.model, o.calibration);
const { sequences, mask } = problem;
const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

const rows: string[][] = [];
let kept = -1;
let best = Number.POSITIVE_INFINITY;
for (const [k, cap] of LOADER_CAPS.entries()) {
  const c = layoutAtCap(problem, o, kernel, cap);
  // The planner keeps the first cap of least cost (index.ts, planForLoaderLayout).
  if (c.cost < best) {
    best = c.cost;
    kept = k;
  }
  const m = { sequences, mask, blockSize: c.blockSize, grid: weightGeometry(o), kernel };
  const before = layoutPhaseMs(c.home, world, m);
  const after = layoutPhaseMs(c.layout, world, m);
  rows.push([
    String(cap),
    pct(tokenImbalance(c.home, world)),
    `${pct(computeImbalance(before.fwd))} / ${pct(computeImbalance(before.bwd))}`,
    `${pct(computeImbalance(after.fwd))} / ${pct(computeImbalance(after.bwd))}`,
    c.kvMs.toFixed(2),
    c.cost.toFixed(2),
    (maxOf(after.fwd) + maxOf(after.bwd) + c.kvMs).toFixed(2),
  ]);
}
rows[kept]![0] = `${rows[kept]![0]} *`;
const head = [
  'cap',
  'placed tokens',
  'placed fwd / bwd',
  'levelled fwd / bwd',
  'K/V ms',
  'proxy ms',
  'direct ms',
];
console.log(`loader levelling (modelled): ${batch}, ${world} ranks, seed ${seed}`);
console.log(`| ${head.join(' | ')} |`);
console.log(`|${head.map(() => '---').join('|')}|`);
for (const r of rows) console.log(`| ${r.join(' | ')} |`);

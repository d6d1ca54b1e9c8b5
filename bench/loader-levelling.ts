/**
 * What levelling costs mode (b)'s layout (placement/loader-layout.ts), per token cap: the capped
 * placement's modelled per-phase compute imbalance, the same after levelling to equal tokens, the
 * busiest rank's K/V time (placement/loader-comm.ts) and the two figures the cap choice could use:
 * the planner's (`proxy`: the busiest rank of a home-first placement of the levelled layout, plus
 * K/V) and the layout's own (`direct`: max forward + max backward of the levelled layout, plus
 * K/V). `*` marks the cap the planner keeps. Costs are modelled kernel ms (phase-cost.ts), no
 * simulation.
 *
 * Run: npx tsx bench/loader-levelling.ts [--batch magi] [--world 128] [--seed 3]
 */
import { kvBytesPerToken } from '../src/model/attention.ts';
import { plannerContext } from '../src/planners/fcp/context.ts';
import { KernelTime } from '../src/planners/fcp/kernel-time.ts';
import { resolveFcpOptions } from '../src/planners/fcp/options.ts';
import { computeImbalance } from '../src/planners/fcp/placement/distribute.ts';
import { homeLayoutOf, homeRuns } from '../src/planners/fcp/placement/layout.ts';
import { kvTrafficMs } from '../src/planners/fcp/placement/loader-comm.ts';
import { levelTokens, tokenImbalance } from '../src/planners/fcp/placement/loader-layout.ts';
import { layoutPhaseMs } from '../src/planners/fcp/placement/phase-cost.ts';
import { placeBlocks, tileGeometry } from '../src/planners/fcp/placement/place.ts';
import { linkModel } from '../src/planners/fcp/transfers/links.ts';
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
const mean = Math.ceil(sequences.reduce((a, b) => a + b, 0) / world);
const links = linkModel(problem.cluster, problem.gpusPerNode);
const kvBytes = kvBytesPerToken(problem.model);
const grid = tileGeometry(o);
const max = (x: Float64Array): number => x.reduce((m, v) => Math.max(m, v), 0);
const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

// The caps of src/planners/fcp/index.ts (LOADER_CAPS), in its order.
const caps = [Number.POSITIVE_INFINITY, 1.2, 1.15, 1.1, 1.05, 1.02];
const rows: string[][] = [];
let best = Number.POSITIVE_INFINITY;
let kept = -1;
for (const [k, cap] of caps.entries()) {
  const memoryTokens = Math.min(problem.memoryTokens, Math.ceil(cap * mean));
  const placed = placeBlocks(plannerContext({ ...problem, memoryTokens }, o, kernel), true);
  const home = homeLayoutOf(homeRuns(placed.blocks, placed.placement.blockRank, world));
  const layout = levelTokens(home, sequences, world, mask);
  const blockSize = placed.blocks.blockSizeOfSeq;
  const m = {
    sequences,
    mask,
    blockSize,
    grid: grid ?? { tmax: 1 << 30, minTile: 1 << 30, wholeMax: 1 << 30 },
    kernel,
  };
  const before = layoutPhaseMs(home, world, m);
  const after = layoutPhaseMs(layout, world, m);
  const kv = kvTrafficMs(layout, sequences, mask, world, links, kvBytes);
  const levelled = placeBlocks(plannerContext({ ...problem, userLayout: layout }, o, kernel, blockSize));
  const proxy = max(levelled.placement.computeLoad) + kv;
  if (proxy < best) {
    best = proxy;
    kept = k;
  }
  rows.push([
    String(cap),
    pct(tokenImbalance(home, world)),
    `${pct(computeImbalance(before.fwd))} / ${pct(computeImbalance(before.bwd))}`,
    `${pct(computeImbalance(after.fwd))} / ${pct(computeImbalance(after.bwd))}`,
    kv.toFixed(2),
    proxy.toFixed(2),
    (max(after.fwd) + max(after.bwd) + kv).toFixed(2),
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

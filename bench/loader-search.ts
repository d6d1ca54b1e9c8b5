/**
 * Planning time of each level of mode (b)'s layout search (src/planners/fcp/loader-search.ts): the
 * measurements behind its size model (`LOADER_SEARCHES[].ms`). Per world and batch, one warm-up
 * plan of every level, then `reps` rounds that plan every level once in turn (interleaved, so a
 * drift of this shared host's speed hits every level alike); the table gives the best round per
 * level, and the mean over the batches next to the model's value.
 *
 * Run: npx tsx bench/loader-search.ts [--worlds 16,64,256] [--batches longtail,magi] [--reps 2]
 */
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import { LOADER_SEARCHES, loaderSearchMs } from '../src/planners/fcp/loader-search.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const args = process.argv.slice(2);
const arg = (k: string, d: string): string => argValue(args, k, d);
const worlds = arg('--worlds', '16,64,256').split(',').map(Number);
const batches = arg('--batches', 'longtail,magi').split(',');
const reps = Math.max(1, Number(arg('--reps', '2')));

const header = ['world', 'batch', ...LOADER_SEARCHES.map((l) => l.name)];
const rows: string[][] = [];
for (const world of worlds) {
  const sums = new Float64Array(LOADER_SEARCHES.length);
  for (const batch of batches) {
    const problem = resolveProblem({ batch, world, tokensPerRank: 32768, seed: 1 });
    const best = new Float64Array(LOADER_SEARCHES.length).fill(Number.POSITIVE_INFINITY);
    for (let r = -1; r < reps; r++)
      LOADER_SEARCHES.forEach((level, i) => {
        const t = performance.now();
        const options: FcpPlannerOptions = { loaderLayout: true, loaderSearch: level.name };
        fcpPlanner.plan(problem, options);
        if (r >= 0) best[i] = Math.min(best[i]!, performance.now() - t);
      });
    best.forEach((ms, i) => {
      sums[i]! += ms / batches.length;
    });
    rows.push([String(world), batch, ...Array.from(best, (ms) => ms.toFixed(0))]);
    process.stderr.write(`world ${world} ${batch} done\n`);
  }
  rows.push([String(world), 'mean', ...Array.from(sums, (ms) => ms.toFixed(0))]);
  rows.push([String(world), 'model', ...LOADER_SEARCHES.map((l) => loaderSearchMs(l, world).toFixed(0))]);
}
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]): string => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
console.log(
  `mode (b) planning time by search level, ms (best of ${reps} interleaved rounds after a warm-up)`,
);
console.log(line(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of rows) console.log(line(r));

/**
 * Two diagnostics of FCP's placement that session 28 measured (docs/results.md, "Session 28"):
 *
 * - Short tails: the last row of a sequence held by several ranks, when it is short (under half
 *   the default block size, `--short`) and sits on another rank than the row before it. Under a
 *   causal mask such a row needs the K/V of the whole sequence before it (and, in the backward,
 *   sends dK,dV partials of all of it home) for little work of its own: `longtail` 128 ranks seed
 *   2, mode (b), 120 tokens of a 282K sequence on rank 66 left it 7.7 ms of `dkv` tail.
 *   Counted on the plan's home layout: rows, their tokens, and the K/V tokens before them.
 * - Mode (b)'s capped placement (loader-caps.ts, the cap 1.1 of the one-cap search): the greedy's
 *   compute imbalance, the refinement's steps against its budget, and the imbalance it ends at.
 *
 * Run: npx tsx bench/tail-blocks.ts [--worlds 128,256] [--seeds 1,2,3] [--batch longtail] [--mode a|b]
 *                                   [--short 0.5] [--capped] (only the capped placement: no plan)
 */
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import { KernelTime } from '../src/planners/fcp/kernel-time.ts';
import { layoutAtCap } from '../src/planners/fcp/loader-caps.ts';
import { resolveFcpOptions } from '../src/planners/fcp/options.ts';
import { computeImbalance } from '../src/planners/fcp/placement/distribute.ts';
import { rowsBySeq } from '../src/planners/fcp/placement/layout.ts';
import { refineStepBudget } from '../src/planners/fcp/placement/refine.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const args = process.argv.slice(2);
const worlds = argValue(args, '--worlds', '128,256').split(',').map(Number);
const seeds = argValue(args, '--seeds', '1,2,3').split(',').map(Number);
const batch = argValue(args, '--batch', 'longtail');
const mode = argValue(args, '--mode', 'b');
const short = Number(argValue(args, '--short', '0.5'));
const cappedOnly = args.includes('--capped');
const o = resolveFcpOptions({});
const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

console.log(
  `${batch}, mode (${mode}): short tails (last row of a multi-rank sequence, under ${short * o.blockSize} tokens, away from the row before it)` +
    `${mode === 'b' ? "; mode (b)'s capped placement (cap 1.1)" : ''}`,
);
for (const world of worlds)
  for (const seed of seeds) {
    const problem = resolveProblem({ batch, world, seed, tokensPerRank: 32768 });
    const parts: string[] = [`${world} ranks seed ${seed}:`];
    if (mode === 'b') {
      const t0 = performance.now();
      const c = layoutAtCap(problem, o, new KernelTime(problem.model, o.calibration), 1.1, false);
      const p = c.placed.placement;
      parts.push(
        `capped placement greedy ${pct(p.greedyImbalance)} -> ${pct(computeImbalance(p.computeLoad))} in ${p.refineSteps} of ${refineStepBudget(o.refineSteps, world)} steps (${Math.round(performance.now() - t0)} ms);`,
      );
    }
    if (!cappedOnly) {
      const plan = fcpPlanner.plan(problem, mode === 'b' ? { loaderLayout: true } : {});
      // Rows of each sequence by start (layout.ts, rowsBySeq).
      const rows = rowsBySeq(plan.homeLayout, plan.sequences.length);
      let n = 0;
      let tokens = 0;
      let kv = 0;
      for (let s = 0; s < plan.sequences.length; s++) {
        const last = rows.off[s + 1]! - 1;
        const prev = last - 1;
        if (prev < rows.off[s]!) continue;
        if (rows.length[last]! < short * o.blockSize && rows.rank[last] !== rows.rank[prev]) {
          n++;
          tokens += rows.length[last]!;
          kv += rows.start[last]!;
        }
      }
      parts.push(`${n} short tails away, ${tokens} tokens, needing ${kv} tokens of K/V before them`);
    }
    console.log(parts.join(' '));
  }

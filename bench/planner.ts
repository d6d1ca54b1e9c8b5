/**
 * Benchmark of the FCP planner: planning time by stage and plan size at 16..4096 ranks, and plan
 * quality (balance, reshuffle bytes, communication) on the paper's workload.
 *
 * Run: npx tsx bench/planner.ts [--worlds 16,64,256,1024,4096] [--reps 3] [--seed 1]
 *                              [--tokens-per-rank 32768] [--batch longtail] [--quality] [--validate]
 *                              [--fan-out] (two-hop K/V: the self-tuner also tries relays)
 *                              [--untuned] (self-tuning off) [--plan-budget-ms 200] (the tuner's budget)
 *                              [--loader-layout] (deployment mode (b): `first` and `best` are the
 *                              wall time of the whole planner, its token-cap placements included;
 *                              the stage columns are those of its final pipeline)
 *
 * Self-tuning is on, as in `fcp plan`: the times are all candidates' together (they share one
 * placement), and column `tuned` says how many the size model allowed and which was kept.
 *
 * Speed table: per world, `first` is the first planning run in this process (includes JIT warm-up
 * of that size), the stage columns are the best of `reps` further runs. Quality table (--quality):
 * compute imbalance with the per-sequence block refinement and with fixed 4K blocks (after the
 * greedy and after refinement; and plain LPT: fixed 4K blocks, no affinity, no refinement), reshuffle
 * bytes with and without the locality tie-break, and the validator's communication imbalance.
 * --validate also runs the validator on every plan of the speed table (slow at 4096 ranks).
 */

import { cpus, loadavg } from 'node:os';
import { assert } from '../src/core/assert.ts';
import type { Plan } from '../src/plan/types.ts';
import { validatePlan } from '../src/plan/validate.ts';
import type { FcpStats } from '../src/planners/fcp/index.ts';
import { fcpPlanner, planFcp, type StageTimings } from '../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { type Problem, resolveProblem } from '../src/problem/problem.ts';

interface Args {
  worlds: number[];
  reps: number;
  seed: number;
  tokensPerRank: number;
  batch: string;
  quality: boolean;
  validate: boolean;
  fanOut: boolean;
  loaderLayout: boolean;
  untuned: boolean;
  budget: number | undefined;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    worlds: [16, 64, 256, 1024, 4096],
    reps: 3,
    seed: 1,
    tokensPerRank: 32768,
    batch: 'longtail',
    quality: false,
    validate: false,
    fanOut: false,
    loaderLayout: false,
    untuned: false,
    budget: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--worlds' && v) a.worlds = v.split(',').map(Number);
    else if (k === '--reps' && v) a.reps = Number(v);
    else if (k === '--seed' && v) a.seed = Number(v);
    else if (k === '--tokens-per-rank' && v) a.tokensPerRank = Number(v);
    else if (k === '--batch' && v) a.batch = v;
    else if (k === '--quality') a.quality = true;
    else if (k === '--validate') a.validate = true;
    else if (k === '--fan-out') a.fanOut = true;
    else if (k === '--loader-layout') a.loaderLayout = true;
    else if (k === '--untuned') a.untuned = true;
    else if (k === '--plan-budget-ms' && v) a.budget = Number(v);
    else continue;
    const flag = ['--quality', '--validate', '--fan-out', '--loader-layout', '--untuned'].includes(k);
    if (!flag) i++;
  }
  return a;
}

const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;
const ms = (x: number): string => x.toFixed(1);

function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padStart(w[i]!)).join('  ');
  return [line(head), line(w.map((n) => '-'.repeat(n))), ...rows.map(line)].join('\n');
}

/**
 * One planning run: `planFcp`'s own stage timings, or in mode (b) the whole `fcpPlanner.plan` call
 * timed from outside (`total`; the stages are those of its final pipeline, meta.timings).
 */
function planOnce(
  problem: Problem,
  opts: FcpPlannerOptions,
  loaderLayout: boolean,
): { timings: StageTimings; plan: Plan } {
  if (!loaderLayout) return planFcp(problem, opts);
  const t0 = performance.now();
  const plan = fcpPlanner.plan(problem, { ...opts, loaderLayout: true });
  const total = performance.now() - t0;
  const stages = (plan.meta as { timings?: StageTimings } | undefined)?.timings;
  assert(stages !== undefined, 'the loader-layout plan carries its final pipeline timings');
  return { timings: { ...stages, total }, plan };
}

const sum = (r: Record<string, number>): number => Object.values(r).reduce((x, y) => x + y, 0);

function speed(a: Args): void {
  const rows: string[][] = [];
  for (const world of a.worlds) {
    const problem = resolveProblem({ batch: a.batch, world, tokensPerRank: a.tokensPerRank, seed: a.seed });
    const opts: FcpPlannerOptions = {
      ...(a.fanOut ? { fanOut: true } : {}),
      ...(a.untuned ? { tune: false } : {}),
      ...(a.budget !== undefined ? { planBudgetMs: a.budget } : {}),
    };
    const first = planOnce(problem, opts, a.loaderLayout);
    let best: StageTimings = first.timings;
    for (let i = 0; i < a.reps; i++) {
      const { timings } = planOnce(problem, opts, a.loaderLayout);
      if (timings.total < best.total) best = timings;
    }
    const st = first.plan.meta?.stats as FcpStats;
    // What the self-tuner (on by default) tried and kept: candidates, the kept group size (+relays).
    const tuning = first.plan.meta?.tuning as
      | { candidates: { coalesce: number; fanOut: boolean }[]; chosen: number }
      | undefined;
    const kept = tuning?.candidates[tuning.chosen];
    const tuned = kept
      ? `${tuning.candidates.length}: c${kept.coalesce}${kept.fanOut ? '+relay' : ''}`
      : 'off';
    let valid = '';
    if (a.validate) valid = validatePlan(first.plan).issues.length === 0 ? 'ok' : 'INVALID';
    rows.push([
      String(world),
      ms(first.timings.total),
      ms(best.total),
      ms(best.blocks),
      ms(best.distribute),
      ms(best.layout),
      ms(best.forward),
      ms(best.backward),
      String(st.units),
      String(st.tasks),
      String(sum(st.forward.transfers) + sum(st.backward.transfers)),
      `${sum(st.forward.rounds)}/${sum(st.backward.rounds)}`,
      `${st.forward.delta.kv}/${st.backward.delta.kv}`,
      `${st.forward.groups}/${st.backward.groups}`,
      pct(st.computeImbalance),
      tuned,
      ...(a.validate ? [valid] : []),
    ]);
  }
  const load = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  console.log(
    `FCP planner speed: ${a.batch}, ${a.tokensPerRank} tokens/rank, causal, seed ${a.seed}${a.loaderLayout ? ', loader layout (mode b)' : ''}${a.fanOut ? ', fan-out' : ''}${a.untuned ? ', self-tuning off' : ', self-tuning on (tuned: candidates planned, the one kept)'}; ms (first run, then best of ${a.reps} by stage); load average after ${load} on ${cpus().length} cores`,
  );
  console.log(
    table(
      [
        'world',
        'first',
        'best',
        'blocks',
        'distrib',
        'layout',
        'forward',
        'backward',
        'units',
        'tasks',
        'transfers',
        'rounds f/b',
        'Δkv f/b',
        'groups f/b',
        'imbal',
        'tuned',
        ...(a.validate ? ['valid'] : []),
      ],
      rows,
    ),
  );
}

function quality(a: Args): void {
  const rows: string[][] = [];
  for (const world of a.worlds) {
    const problem = resolveProblem({ batch: a.batch, world, tokensPerRank: a.tokensPerRank, seed: a.seed });
    const run = (o: FcpPlannerOptions) => {
      const { plan } = planFcp(problem, o);
      return { plan, stats: plan.meta?.stats as FcpStats };
    };
    const def = run({});
    const fixed = run({ fixedBlocks: true });
    // What docs/design.md calls plain LPT: fixed 4K blocks, no affinity, no refinement.
    const plainLpt = run({ fixedBlocks: true, noAffinity: true, refineSteps: 0 });
    const noLoc = run({ noLocality: true });
    const report = validatePlan(def.plan).report;
    const gb = (x: number): string => (x / 1e9).toFixed(1);
    rows.push([
      String(world),
      pct(def.stats.greedyImbalance),
      pct(def.stats.computeImbalance),
      pct(fixed.stats.greedyImbalance),
      pct(fixed.stats.computeImbalance),
      pct(plainLpt.stats.computeImbalance),
      pct(report.computeImbalance),
      gb(def.stats.reshuffleBytes),
      gb(noLoc.stats.reshuffleBytes),
      `${(100 * (1 - def.stats.reshuffleBytes / noLoc.stats.reshuffleBytes)).toFixed(0)}%`,
      gb(report.forward.bytes.kv),
      gb(report.backward.bytes.kv + report.backward.bytes.dkv),
      pct(report.forward.commImbalance),
      pct(report.backward.commImbalance),
      `${report.forward.kvDelta}/${report.backward.kvDelta}`,
      `${report.forward.congestion}/${report.backward.congestion}`,
    ]);
  }
  console.log(
    `\nFCP plan quality: ${a.batch}, ${a.tokensPerRank} tokens/rank, causal, seed ${a.seed}, default options`,
  );
  console.log(
    table(
      [
        'world',
        'greedy',
        'imbal',
        '4K greedy',
        '4K imbal',
        '4K plain LPT',
        'imbal (validator)',
        'reshuffle GB',
        'no-locality GB',
        'saved',
        'kv GB fw',
        'kv+dkv GB bw',
        'comm imb fw',
        'comm imb bw',
        'Δkv f/b',
        'congestion f/b',
      ],
      rows,
    ),
  );
}

const args = parseArgs(process.argv.slice(2));
speed(args);
if (args.quality) quality(args);

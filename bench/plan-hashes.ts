/**
 * Hashes FCP plan files over a grid of configurations, to check that a planner change meant to be
 * a pure speed-up leaves every plan byte-identical: run it on the old commit (a worktree) and on
 * the new one and diff the outputs.
 *
 * Run: npx tsx bench/plan-hashes.ts [--quick] [--large] [--only SUBSTRING] [--untuned]
 *
 * Grid: worlds 16, 64, 256 x batches longtail, magi, bimodal x mode (a) / (b) x fanOut off / on
 * (36 plans, 32K tokens per rank, causal), plus a few small full-mask and tuning-off ones; `--large`
 * adds 1024 ranks (longtail, both modes) and 4096 (longtail, mode (a)); `--quick` keeps worlds 16
 * and 64. Each line: the configuration, sha256 of `planToJson` (the bytes `fcp plan` writes) and
 * the planning time (ms, for orientation only; not part of the hash). `--untuned` adds `tune: false`
 * to every configuration (the self-tuner off: compares a speed-up against a commit from before the
 * tuner was on by default).
 */
import { createHash } from 'node:crypto';
import { planToJson } from '../src/plan/io.ts';
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { type ProblemOptions, resolveProblem } from '../src/problem/problem.ts';

interface Config {
  readonly label: string;
  readonly problem: ProblemOptions;
  readonly options: FcpPlannerOptions;
}

function grid(quick: boolean, large: boolean): Config[] {
  const out: Config[] = [];
  const worlds = quick ? [16, 64] : [16, 64, 256];
  for (const world of worlds)
    for (const batch of ['longtail', 'magi', 'bimodal'])
      for (const loaderLayout of [false, true])
        for (const fanOut of [false, true])
          out.push({
            label: `${batch} w${world} ${loaderLayout ? '(b)' : '(a)'}${fanOut ? ' fanOut' : ''}`,
            problem: { batch, world, tokensPerRank: 32768, seed: 1 },
            options: { loaderLayout, ...(fanOut ? { fanOut } : {}) },
          });
  for (const seed of [2, 3])
    for (const mask of ['causal', 'full'] as const)
      out.push({
        label: `longtail w24 t4096 s${seed} ${mask} b512`,
        problem: { batch: 'longtail', world: 24, tokensPerRank: 4096, seed, mask },
        options: { blockSize: 512 },
      });
  out.push({
    label: 'longtail w64 tune:false fanOut',
    problem: { batch: 'longtail', world: 64, tokensPerRank: 32768, seed: 1 },
    options: { fanOut: true, tune: false },
  });
  out.push({
    label: 'longtail w64 commCoalesce 1',
    problem: { batch: 'longtail', world: 64, tokensPerRank: 32768, seed: 1 },
    options: { commCoalesce: 1 },
  });
  out.push({
    label: 'magi w64 contention',
    problem: {
      batch: 'magi',
      world: 64,
      tokensPerRank: 32768,
      seed: 1,
      cluster: resolveCluster('hopper-ib', { network: 'contention' }),
    },
    options: {},
  });
  if (large) {
    for (const loaderLayout of [false, true])
      out.push({
        label: `longtail w1024 ${loaderLayout ? '(b)' : '(a)'}`,
        problem: { batch: 'longtail', world: 1024, tokensPerRank: 32768, seed: 1 },
        options: { loaderLayout },
      });
    out.push({
      label: 'longtail w4096 (a)',
      problem: { batch: 'longtail', world: 4096, tokensPerRank: 32768, seed: 1 },
      options: {},
    });
  }
  return out;
}

const argv = process.argv.slice(2);
const only = argv.includes('--only') ? argv[argv.indexOf('--only') + 1] : undefined;
for (const c of grid(argv.includes('--quick'), argv.includes('--large'))) {
  if (only !== undefined && !c.label.includes(only)) continue;
  const t0 = performance.now();
  const options = argv.includes('--untuned') ? { ...c.options, tune: false } : c.options;
  const plan = fcpPlanner.plan(resolveProblem(c.problem), options);
  const ms = performance.now() - t0;
  const hash = createHash('sha256').update(planToJson(plan)).digest('hex').slice(0, 16);
  console.log(`${c.label.padEnd(36)} ${hash} ${ms.toFixed(0)}ms`);
}

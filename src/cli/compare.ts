/**
 * `fcp compare`: plan every (strategy, world size, batch) and simulate it; print a table of mean
 * MFU per strategy and world size; write DIR/compare.json (one row per strategy, world and batch)
 * and plots (PNG and SVG) of MFU and imbalance against world size. DIR is assembled under a
 * temporary name and renamed into place, so a failure never leaves a half-written folder.
 *
 * Batch b of n uses seed `--seed` + b; every strategy sees the same batches.
 */

import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { fail } from '../core/issues.ts';
import { checkOutputFolder, makeSiblingTemp, replaceFolder } from '../core/outputs.ts';
import { progressSpan } from '../core/progress-span.ts';
import { type SimOptions, type SimResult, simulatePlan } from '../executors/sim/index.ts';
import { getPlanner } from '../experiments/strategies.ts';
import { sweepCandidatesFrom, unionCandidates } from '../experiments/sweep-from.ts';
import {
  type BaselinesMode,
  defaultConfig,
  parseBaselinesMode,
  sweepStages,
  tuneStrategy,
} from '../experiments/tune.ts';
import { checkA2aDegree } from '../planners/ring/variants.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { torusShapeNote } from '../problem/cluster.ts';
import { type Problem, resolveProblem } from '../problem/problem.ts';
import { type Progress, silentProgress } from '../report/progress.ts';
import {
  addPlannerOptions,
  addProblemOptions,
  intListOption,
  intOption,
  plannerOptionsFrom,
  problemOptionsFrom,
} from './common.ts';
import {
  type CompareRow,
  compareCharts,
  compareCsv,
  formatCompareTable,
  formatConfigs,
  summarise,
} from './compare-format.ts';
import { addOutputOptions, outputOf } from './output.ts';
import { addSimOptions, freeKindsLine, networkLabel, simOptionsFrom } from './simulate.ts';

/**
 * Share of a compare step's time its planning takes, for progress (FCP at 4096 ranks: planning 6
 * s, validation 8 s, simulation 18 s; the baselines plan faster).
 */
const PLAN_SHARE = 0.2;

/** Format tag of compare.json. */
export const COMPARE_FORMAT = 'fcp-compare/1';

/** What {@link runCompare} needs. */
export interface CompareOptions {
  strategies: readonly string[];
  worlds: readonly number[];
  /** Generator name or batch file. */
  batch: string;
  batches: number;
  /** Seed of batch 0. */
  seed: number;
  tokensPerRank: number;
  mask: string;
  gpusPerNode: number;
  /** Problem overrides (model shape, memory). */
  problem?: Record<string, unknown>;
  planner: PlannerOptions;
  sim: SimOptions;
  progress?: Progress;
  /** `default`: each baseline as configured by default; `best`: each one's best from its sweep (experiments/tune.ts). */
  baselines?: BaselinesMode;
  /** `--a2a-degree`: the only a2a degree the ring's sweep tries. */
  a2aDegree?: number;
  /**
   * `--sweep-from`: per baseline, the only configurations its sweep screens besides its default
   * (the winners of an earlier `--baselines best` run, experiments/sweep-from.ts).
   */
  sweepFrom?: Readonly<Record<string, readonly PlannerOptions[]>>;
}

/**
 * Most batches per world size: each plans and simulates every strategy (seconds apiece at scale);
 * `--batches 99999999999` stopped with an internal error (bench/fuzz-cli.ts, session 39).
 */
export const MAX_BATCHES = 10000;

/** FcpError `option.batches` unless `batches` is an integer from 1 to {@link MAX_BATCHES}. */
function requireBatches(batches: number): number {
  if (!Number.isInteger(batches) || batches < 1 || batches > MAX_BATCHES)
    fail(
      'option.batches',
      `--batches must be an integer from 1 to ${MAX_BATCHES} (got ${batches})`,
      'batches',
    );
  return batches;
}

/** Plans and simulates every combination; rows in (world, batch, strategy) order. */
export function runCompare(o: CompareOptions): CompareRow[] {
  if (o.strategies.length === 0) fail('option.strategies', '--strategies lists no strategy', 'strategies');
  if (o.worlds.length === 0) fail('option.world', '--world lists no world size', 'world');
  requireBatches(o.batches);
  const planners = o.strategies.map((s) => getPlanner(s));
  const progress = o.progress ?? silentProgress;
  const best = o.baselines === 'best';
  const rows: CompareRow[] = [];
  for (const world of o.worlds) {
    const problems = Array.from({ length: o.batches }, (_, b) =>
      resolveProblem({
        ...(o.problem ?? {}),
        batch: o.batch,
        world,
        seed: o.seed + b,
        tokensPerRank: o.tokensPerRank,
        mask: o.mask,
        gpusPerNode: o.gpusPerNode,
        cluster: o.sim.cluster ?? 'hopper-ib',
      }),
    );
    if (o.a2aDegree !== undefined && o.strategies.includes('ring'))
      checkA2aDegree(o.a2aDegree, world, problems[0]!.model.qHeads, problems[0]!.model.kvHeads);
    // Per strategy: its config and one result per batch (best: the sweep's winner, per world).
    const byStrategy = planners.map((p) => {
      if (best && sweepStages(p.name, problems[0]!, o.a2aDegree).length > 0) {
        progress.step(`${p.name} world ${world}: tuning`);
        const t = tuneStrategy(p, problems, o.planner, o.sim, o.a2aDegree, undefined, o.sweepFrom?.[p.name]);
        return { config: t.config, results: t.results };
      }
      const config = {
        ...defaultConfig(p.name, problems[0]!),
        ...pickKnobs(p.name, problems[0]!, o.planner),
      };
      const results = problems.map((problem, b) => {
        progress.step(`${p.name} world ${world} batch ${b}`);
        // The step's fraction: planning, then the simulator's (its validation included).
        const tell = o.sim.onProgress;
        if (!tell) return simulatePlan(p.plan(problem, o.planner), o.sim);
        const plan = p.plan(problem, { ...o.planner, onProgress: progressSpan(tell, 0, PLAN_SHARE) });
        return simulatePlan(plan, { ...o.sim, onProgress: progressSpan(tell, PLAN_SHARE, 1) });
      });
      return { config, results };
    });
    for (let b = 0; b < o.batches; b++)
      planners.forEach((p, i) => {
        const s = byStrategy[i]!;
        rows.push(rowOf(p.name, world, b, o.seed + b, s.results[b]!, s.config));
      });
  }
  progress.done();
  return rows;
}

/** The command line's values of the knobs `strategy`'s default config names (so rows say what ran). */
function pickKnobs(strategy: string, problem: Problem, options: PlannerOptions): PlannerOptions {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(defaultConfig(strategy, problem)))
    if (options[k as keyof PlannerOptions] !== undefined) out[k] = options[k as keyof PlannerOptions];
  return out as PlannerOptions;
}

function rowOf(
  strategy: string,
  world: number,
  batch: number,
  seed: number,
  r: SimResult,
  config: PlannerOptions,
): CompareRow {
  return {
    strategy,
    world,
    batch,
    seed,
    mfuForward: r.forward.mfu,
    mfuBackward: r.backward.mfu,
    mfu: r.mfu,
    makespans: { forwardMs: r.forward.makespanMs, backwardMs: r.backward.makespanMs },
    imbalances: {
      computeForward: r.forward.computeImbalance,
      commForward: r.forward.commImbalance,
      computeBackward: r.backward.computeImbalance,
      commBackward: r.backward.commImbalance,
    },
    bytes: { forward: r.forward.bytes.total, backward: r.backward.bytes.total },
    kernelMfu: { forward: r.forward.kernelMfu, backward: r.backward.kernelMfu },
    exposedCommMs: { forward: r.forward.meanExposedCommMs, backward: r.backward.meanExposedCommMs },
    maxExposedCommMs: { forward: r.forward.maxExposedCommMs, backward: r.backward.maxExposedCommMs },
    tokenImbalance: r.userTokenImbalance,
    config,
  };
}

/** `compare --out` folders, recognised by their compare.json (core/outputs.ts: never another folder). */
export const COMPARE_FOLDER = {
  option: '--out',
  what: 'fcp compare output',
  isOwn: (dir: string): boolean => {
    try {
      return readFileSync(join(dir, 'compare.json'), 'utf8').slice(0, 200).includes(`"${COMPARE_FORMAT}"`);
    } catch {
      return false;
    }
  },
};

/** Writes compare.json and the plots into `outDir` through a temporary folder and a rename. */
export async function writeCompare(
  outDir: string,
  doc: object,
  charts: Record<string, unknown>,
): Promise<void> {
  const target = checkOutputFolder(outDir, COMPARE_FOLDER);
  // Render first: a failing chart leaves nothing behind. vega is loaded only here: it costs half a
  // second of every CLI start otherwise.
  const { renderChart } = await import('../report/plots.ts');
  const rendered: [string, { svg: string; png: Uint8Array }][] = [];
  for (const [name, spec] of Object.entries(charts))
    rendered.push([name, await renderChart(spec as Parameters<typeof renderChart>[0])]);
  const tmp = makeSiblingTemp(target, '--out');
  try {
    chmodSync(tmp, 0o755); // mkdtemp makes it private; results are meant to be shared
    writeFileSync(join(tmp, 'compare.json'), `${JSON.stringify(doc, null, 1)}\n`);
    for (const [name, r] of rendered) {
      writeFileSync(join(tmp, `${name}.svg`), r.svg);
      writeFileSync(join(tmp, `${name}.png`), r.png);
    }
    replaceFolder(tmp, target);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    fail(
      'io.write',
      `cannot write ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}; choose a writable --out folder`,
      'out',
    );
  }
}

/** Registers `fcp compare`. */
export function register(program: Command): void {
  const cmd = program
    .command('compare')
    .description('plan and simulate strategies over world sizes and batches; table, compare.json and plots')
    .option('--strategies <list>', 'comma-separated strategies', 'fcp,ring,bytescale,wlb,magi')
    .option('--batches <n>', 'batches per world size (seeds seed..seed+n-1)', '1')
    .option('-o, --out <dir>', 'output folder for compare.json and plots')
    .option(
      '--baselines <mode>',
      'default: each baseline as configured by default; best: each one tuned by its own sweep per world (docs/baselines.md)',
      'default',
    )
    .option(
      '--a2a-degree <n>',
      'ring a2a+p2p: the a2a degree the sweep tries (must divide the world and the heads)',
    )
    .option(
      '--sweep-from <compare.json[,compare.json...]>',
      "with --baselines best: each baseline's sweep screens only its default and its winners in those earlier runs (same batch and setting; docs/baselines.md)",
    );
  addOutputOptions(cmd, {
    json: 'compare.json (the summary and every row; simulated)',
    csv: 'the summary, one row per strategy and world: MFU mean/min/max over batches (simulated)',
  });
  addProblemOptions(cmd, { world: '16,32,64,128,256' });
  addPlannerOptions(cmd);
  addSimOptions(cmd, false);
  cmd.action(async (o: Record<string, unknown>) => {
    const out = outputOf('compare', o);
    // The output folder is checked before minutes of simulation, not after them.
    if (o.out !== undefined) checkOutputFolder(String(o.out), COMPARE_FOLDER);
    const strategies = String(o.strategies)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const worlds = intListOption(o.world, 'world');
    for (const w of worlds)
      if (w < 1) fail('option.world', `world sizes must be positive (got ${w})`, 'world');
    // Before the progress weights, which allocate one entry per batch.
    const batches = requireBatches(intOption(o.batches, 'batches'));
    const po = problemOptionsFrom({ ...o, world: worlds[0] ?? 1 });
    const problem: Record<string, unknown> = {};
    for (const k of ['qHeads', 'kvHeads', 'headDim', 'memoryTokens'] as const)
      if (po[k] !== undefined) problem[k] = po[k];
    const gpusPerNode = po.gpusPerNode ?? 8;
    const sim = simOptionsFrom(o, { gpusPerNode });
    // FCP plans with the kernel tables it is simulated with (its time model reads them); the
    // file records the options as given, the tables by name in `calibration`.
    const given = plannerOptionsFrom(o);
    const planner = {
      ...given,
      ...(sim.calibration !== undefined ? { calibration: sim.calibration } : {}),
    };
    const baselines = parseBaselinesMode(o.baselines);
    const a2aDegree = o.a2aDegree === undefined ? undefined : intOption(o.a2aDegree, 'a2aDegree');
    let sweepFrom: Record<string, PlannerOptions[]> | undefined;
    if (o.sweepFrom !== undefined) {
      if (baselines !== 'best') fail('option.sweepFrom', '--sweep-from needs --baselines best', 'sweepFrom');
      // Several files (comma-separated): the union of their winners, in the order given.
      const lists = String(o.sweepFrom)
        .split(',')
        .map((file) => {
          let doc: unknown;
          try {
            doc = JSON.parse(readFileSync(file, 'utf8'));
          } catch (e) {
            const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
            return fail('option.sweepFrom', `--sweep-from: cannot read ${file} (${why})`, 'sweepFrom');
          }
          return sweepCandidatesFrom(doc, COMPARE_FORMAT, {
            batch: String(po.batch),
            cluster: sim.cluster?.name ?? 'hopper-ib',
            network: sim.engine?.network ?? sim.cluster?.network ?? 'fluid',
          });
        });
      sweepFrom = unionCandidates(lists);
    }
    // Planning and simulating a world of N ranks costs about N times one rank: weight the steps
    // by their world for the estimate (tuning steps run a sweep: weighted by its stages).
    const tuned = new Set<string>();
    if (baselines === 'best') {
      const p0 = resolveProblem({ ...po, cluster: sim.cluster ?? 'hopper-ib' });
      for (const s of strategies) if (sweepStages(s, p0, a2aDegree).length > 0) tuned.add(s);
    }
    const weights = worlds.flatMap((w) =>
      strategies.flatMap((s) => (tuned.has(s) ? [w * batches] : Array.from({ length: batches }, () => w))),
    );
    for (const w of worlds) {
      const torus = sim.cluster ? torusShapeNote(sim.cluster, w) : null;
      if (torus !== null) out.note(torus);
    }
    const progress = out.progress(weights.length, weights);
    // One simulation of a large world can take seconds of synchronous work: its fraction keeps
    // the progress lines coming.
    sim.onProgress = (f) => progress.fraction(f);
    const rows = runCompare({
      strategies,
      worlds,
      batch: String(po.batch),
      batches,
      seed: po.seed ?? 1,
      tokensPerRank: po.tokensPerRank ?? 32768,
      mask: po.mask ?? 'causal',
      gpusPerNode,
      problem,
      planner,
      sim,
      progress,
      baselines,
      ...(a2aDegree !== undefined ? { a2aDegree } : {}),
      ...(sweepFrom !== undefined ? { sweepFrom } : {}),
    });
    const summary = summarise(rows, strategies, worlds);
    const doc = {
      format: COMPARE_FORMAT,
      strategies,
      worlds,
      batch: po.batch,
      batches,
      seed: po.seed,
      tokensPerRank: po.tokensPerRank,
      mask: po.mask,
      cluster: sim.cluster,
      engine: sim.engine?.name ?? 'builtin',
      network: sim.engine?.network ?? sim.cluster?.network ?? 'fluid',
      kernel: sim.kernel,
      calibration: sim.calibration?.sources ?? 'default',
      rates: sim.rates,
      // What-if (--free-kinds): these kinds carried no bytes; absent in a real comparison.
      ...(sim.freeKinds !== undefined ? { freeKinds: sim.freeKinds } : {}),
      plannerOptions: given,
      baselines,
      // The earlier run whose winners restricted the sweeps (absent: the full sweep).
      ...(o.sweepFrom !== undefined ? { sweepFrom: String(o.sweepFrom) } : {}),
      summary,
      rows,
    };
    if (out.json) out.printJson(doc);
    else if (out.csv) out.printCsv(...compareCsv(summary));
    else {
      out.text(
        networkLabel(
          sim.engine?.network ?? sim.cluster?.network ?? 'fluid',
          sim.cluster?.routing,
          sim.engine?.name ?? 'builtin',
          'simulated',
        ),
      );
      out.text(formatCompareTable(summary, strategies, worlds));
      if (baselines === 'best') out.text(formatConfigs(rows));
      if (sim.freeKinds !== undefined) out.text(freeKindsLine(sim.freeKinds));
    }
    if (o.out !== undefined) {
      await writeCompare(String(o.out), doc, compareCharts(summary, strategies, String(po.batch)));
      out.wrote(join(String(o.out), 'compare.json'), 'with mfu.{png,svg}, imbalance.{png,svg}');
    }
  });
}

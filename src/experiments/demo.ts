/**
 * The demo pipeline: batch -> every strategy's plan -> validator -> simulator, a weak-scaling sweep,
 * and the CPU runtime's numerical check on a scaled-down batch; returns the raw {@link Results}.
 *
 * Options are validated up front (resolveDemoOptions, demo-options.ts) so that bad input fails in
 * milliseconds, before any planning. A strategy that fails to plan or simulate does not stop the
 * demo: its row records the error and the report shows it.
 */
import { GENERATOR_NAMES } from '../batch/generators.ts';
import { FcpError } from '../core/issues.ts';
import { median } from '../core/stats.ts';
import type { ModelShape, Plan } from '../plan/types.ts';
import { type Problem, type ProblemOptions, resolveProblem } from '../problem/problem.ts';
import { lengthHistogram, placementOf, roundsOf } from '../report/extract.ts';
import { type Progress, silentProgress } from '../report/progress.ts';
import {
  type Ablation,
  type BusyProfile,
  type NumericsRun,
  type Placement,
  type ProblemSummary,
  type Provenance,
  type RankMemory,
  RESULTS_FORMAT,
  type Results,
  type RoundStructure,
  type ScalingPoint,
  type StrategyRun,
  type Timeline,
} from '../report/results.ts';
import { busyProfile, compactTimeline, sampleRanks } from '../report/timeline.ts';
import {
  checkPlan,
  configOf,
  memoryOf,
  NUMERICS_TOLERANCE,
  NumericsCheck,
  type SimNumbers,
  simulate,
} from './checks.ts';
import { ABLATION, DEMO_DEFAULTS, type ResolvedDemoOptions } from './demo-options.ts';
import { getPlanner } from './strategies.ts';

/**
 * Attention shape of the numerical check: tiny (2 query heads on 1 KV head, so GQA is exercised,
 * head dim 16, float32) because the check is about the plan's data movement, not the model, and
 * the CPU runtime and the float64 reference must finish in seconds on two cores.
 */
export const NUMERICS_MODEL: ModelShape = { qHeads: 2, kvHeads: 1, headDim: 16, bytesPerElement: 4 };

const message = (e: unknown): string =>
  e instanceof FcpError
    ? e.issues.map((i) => `${i.code}: ${i.message}`).join('; ')
    : String((e as Error)?.message ?? e);

/** A row for a strategy that could not be planned or simulated. */
function failedRun(strategy: string, world: number, valid: boolean, error: string): StrategyRun {
  return {
    strategy,
    world,
    valid,
    issueCodes: [],
    issueCount: 0,
    mfuForward: 0,
    mfuBackward: 0,
    forwardMs: 0,
    backwardMs: 0,
    computeImbalance: 0,
    commImbalance: 0,
    bytes: [],
    totalBytes: 0,
    rounds: { forward: 0, backward: 0 },
    groups: { forward: 0, backward: 0 },
    congestion: { forward: 0, backward: 0 },
    error,
  };
}

/** What the main run (every strategy at the demo's world size) produced. */
interface MainRun {
  runs: StrategyRun[];
  timelines: Timeline[];
  busy: BusyProfile[];
  memory: RankMemory[];
  placement: Placement | null;
  rounds: RoundStructure[];
  scaling: ScalingPoint[];
}

/** Plans, validates and simulates every strategy on the main problem. */
function mainRun(o: ResolvedDemoOptions, problem: Problem, progress: Progress, notes: string[]): MainRun {
  const out: MainRun = {
    runs: [],
    timelines: [],
    busy: [],
    memory: [],
    placement: null,
    rounds: [],
    scaling: [],
  };
  for (const strategy of o.strategies) {
    progress.step(`${strategy}: plan, validate, simulate (${problem.world} ranks)`);
    let plan: Plan;
    const t0 = performance.now();
    try {
      plan = getPlanner(strategy).plan(problem);
    } catch (e) {
      out.runs.push(failedRun(strategy, problem.world, false, `planning failed: ${message(e)}`));
      notes.push(`${strategy} could not plan the batch: ${message(e)}`);
      continue;
    }
    const planMs = performance.now() - t0;
    const check = checkPlan(plan);
    const config = configOf(plan);
    out.memory.push(memoryOf(plan, problem.memoryTokens));
    if (strategy === o.focus) {
      out.placement = placementOf(plan);
      out.rounds.push(roundsOf(plan, 'forward'));
    }
    const traced = o.timeline.includes(strategy);
    let sim: SimNumbers;
    try {
      sim = simulate(plan, o.cluster, { trace: traced, gpusPerNode: problem.gpusPerNode });
    } catch (e) {
      out.runs.push(failedRun(strategy, problem.world, check.valid, `simulation failed: ${message(e)}`));
      notes.push(`${strategy}: the simulator failed: ${message(e)}`);
      continue;
    }
    const { trace, ...numbers } = sim;
    out.runs.push({
      strategy,
      world: problem.world,
      ...check,
      ...numbers,
      ...(config !== undefined ? { config } : {}),
      planMs: Math.round(planMs * 1000) / 1000,
    });
    if (traced) {
      if (trace)
        for (const phase of ['forward', 'backward'] as const) {
          const events = trace[phase];
          const sample = sampleRanks(problem.world, events, o.timelineRanks);
          out.timelines.push(
            compactTimeline(strategy, phase, problem.world, events, o.timelineRanks, {
              ranks: sample.ranks,
              ...(sample.description ? { sample: sample.description } : {}),
            }),
          );
          out.busy.push(busyProfile(strategy, phase, problem.world, events));
        }
      else notes.push(`the simulator returned no per-rank events for ${strategy}; its timeline is not drawn`);
    }
    if (o.scaling.includes(problem.world))
      out.scaling.push({
        strategy,
        world: problem.world,
        mfuForward: sim.mfuForward,
        mfuBackward: sim.mfuBackward,
        valid: check.valid,
        ...(config !== undefined ? { config } : {}),
      });
  }
  return out;
}

/** FCP's ablation steps ({@link ABLATION}) simulated on the main problem. */
function ablationRun(
  o: ResolvedDemoOptions,
  problem: Problem,
  progress: Progress,
  notes: string[],
): Ablation | null {
  const steps: Ablation['steps'] = [];
  for (const a of ABLATION) {
    progress.step(`ablation: fcp ${a.label} (${problem.world} ranks)`);
    try {
      const plan = getPlanner('fcp').plan(problem, a.options);
      const sim = simulate(plan, o.cluster, { trace: false, gpusPerNode: problem.gpusPerNode });
      steps.push({ step: a.step, label: a.label, mfuForward: sim.mfuForward, mfuBackward: sim.mfuBackward });
    } catch (e) {
      notes.push(`ablation: fcp ${a.label} failed: ${message(e)}`);
      return null;
    }
  }
  return { world: problem.world, steps };
}

/** The weak-scaling sweep: every strategy at every other world size of `o.scaling`. */
function sweep(
  o: ResolvedDemoOptions,
  mainWorld: number,
  progress: Progress,
  notes: string[],
): ScalingPoint[] {
  const out: ScalingPoint[] = [];
  for (const world of o.scaling) {
    if (world === mainWorld) continue;
    for (const strategy of o.strategies) {
      progress.step(`weak scaling: ${strategy} at ${world} ranks`);
      try {
        const p = resolveProblem({ ...o.problem, world });
        const plan = getPlanner(strategy).plan(p);
        const valid = checkPlan(plan).valid;
        const sim = simulate(plan, o.cluster, { trace: false, gpusPerNode: p.gpusPerNode });
        const config = configOf(plan);
        out.push({
          strategy,
          world,
          mfuForward: sim.mfuForward,
          mfuBackward: sim.mfuBackward,
          valid,
          ...(config !== undefined ? { config } : {}),
        });
      } catch (e) {
        notes.push(`weak scaling: ${strategy} at ${world} ranks failed: ${message(e)}`);
      }
    }
  }
  return out;
}

/** The problem of the numerical check: the demo's batch scaled down, with {@link NUMERICS_MODEL}. */
function numericsProblem(
  o: ResolvedDemoOptions,
  n: { world: number; tokensPerRank: number },
): ProblemOptions {
  const { qHeads, kvHeads, headDim, bytesPerElement, memoryTokens, ...rest } = o.problem;
  const generated = typeof o.problem.batch === 'string' && GENERATOR_NAMES.includes(o.problem.batch);
  return {
    ...rest,
    // A batch file is sized for the cluster, not for the CPU runtime: check a small generated batch.
    batch: generated ? o.problem.batch! : DEMO_DEFAULTS.batch,
    model: NUMERICS_MODEL,
    world: n.world,
    tokensPerRank: n.tokensPerRank,
  };
}

/** Runs every strategy's plan of the small problem on the CPU runtime against the reference. */
async function numericsRuns(
  o: ResolvedDemoOptions,
  small: ProblemOptions,
  progress: Progress,
): Promise<NumericsRun[]> {
  const out: NumericsRun[] = [];
  const p = resolveProblem(small);
  const check = new NumericsCheck(p.sequences, p.model, p.mask, p.seed);
  try {
    for (const strategy of o.strategies) {
      progress.step(
        `numerics: ${strategy} on the CPU runtime (${p.world} ranks x ${p.tokensPerRank} tokens)`,
      );
      const base = {
        strategy,
        world: p.world,
        tokensPerRank: p.tokensPerRank,
        sequences: p.sequences.length,
      };
      try {
        const plan = getPlanner(strategy).plan(p);
        const valid = checkPlan(plan).valid;
        out.push({ ...base, valid, ...(await check.check(plan)) });
      } catch (e) {
        out.push({
          ...base,
          valid: false,
          relError: { o: 0, dq: 0, dk: 0, dv: 0 },
          tolerance: NUMERICS_TOLERANCE,
          ok: false,
          error: message(e),
        });
      }
    }
  } finally {
    await check.close();
  }
  return out;
}

/** Sizes and length histogram of the main batch. */
function problemSummary(problem: Problem, cluster: string): ProblemSummary {
  const lens = problem.sequences;
  let longest = 0;
  let total = 0;
  for (let i = 0; i < lens.length; i++) {
    longest = Math.max(longest, lens[i]!);
    total += lens[i]!;
  }
  return {
    batch: problem.batchName,
    world: problem.world,
    tokensPerRank: problem.tokensPerRank,
    seed: problem.seed,
    mask: problem.mask,
    model: { ...problem.model },
    cluster,
    sequences: lens.length,
    totalTokens: total,
    longest,
    medianLength: median(lens),
    lengthHistogram: lengthHistogram(lens),
  };
}

/**
 * Runs the demo and returns its results. `provenance` is recorded as given (the CLI passes the
 * command line); `progress` is told before each step.
 */
export async function runDemo(
  options: ResolvedDemoOptions,
  provenance: Provenance,
  progress: Progress = silentProgress,
): Promise<Results> {
  const o = options;
  const notes: string[] = [];
  const problem = resolveProblem(o.problem);
  const main = mainRun(o, problem, progress, notes);
  const ablation = o.ablation ? ablationRun(o, problem, progress, notes) : null;
  const scaling = [...main.scaling, ...sweep(o, problem.world, progress, notes)].sort(
    (a, b) => a.world - b.world || o.strategies.indexOf(a.strategy) - o.strategies.indexOf(b.strategy),
  );
  const generated = typeof o.problem.batch === 'string' && GENERATOR_NAMES.includes(o.problem.batch);
  if (!generated) {
    notes.push(
      'weak scaling needs a generated batch (--batch GENERATOR); it was not run for this batch file',
    );
    if (o.numerics)
      notes.push(
        `the numerical check draws a small ${DEMO_DEFAULTS.batch} batch, since the batch file is too large for the CPU runtime`,
      );
  }
  const n = o.numerics ?? {
    world: DEMO_DEFAULTS.numericsWorld,
    tokensPerRank: DEMO_DEFAULTS.numericsTokensPerRank,
  };
  const small = numericsProblem(o, n);
  const checked = o.numerics ? await numericsRuns(o, small, progress) : [];
  return {
    format: RESULTS_FORMAT,
    provenance,
    problem: problemSummary(problem, o.cluster),
    strategies: [...o.strategies],
    runs: main.runs,
    scaling,
    timelines: main.timelines,
    busy: main.busy,
    memory: main.memory,
    ablation,
    origin: 'demo',
    placement: main.placement,
    rounds: main.rounds,
    numerics: {
      world: n.world,
      tokensPerRank: n.tokensPerRank,
      model: { ...NUMERICS_MODEL },
      runs: checked,
      ...(o.numerics ? {} : { skipped: 'the numerical check was turned off (--no-numerics)' }),
    },
    notes,
  };
}

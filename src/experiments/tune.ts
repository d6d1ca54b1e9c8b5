/**
 * Tuning the baselines as their users would (`fcp compare --baselines best`): for each baseline a
 * small, documented sweep of its own knobs, run per (batch generator, world size) over the same
 * batches the comparison uses; the configuration with the least total simulated time (forward plus
 * backward makespan, summed over the batches) wins, and its results are the ones reported. One
 * configuration per (generator, world), not one per batch: a user tunes for a workload and a
 * scale, not for each step.
 *
 * The sweep is a coordinate search on the total over the batches: start from the default
 * configuration, then for each stage try every value of that stage's knobs on top of the best so
 * far (each on every batch), keeping the best, and pass over the stages again until a whole pass
 * keeps nothing new (at most {@link MAX_PASSES}; configurations already tried are not simulated
 * again). One pass missed interactions: MagiAttention under PXN routing at 256 ranks (`magi` batch, seed 1) kept
 * the a2av backend, screened at the default overlap and chunk, where the native backend with the
 * overlap and chunk found later runs the forward at 0.439 MFU against 0.362 (session 40,
 * bench/sweep-passes.ts). Stages, in order (see docs/baselines.md "Tuning"):
 * - ring: TE `cp_comm_type` p2p, a2a+p2p with the a2a group = a node and half a node (only degrees
 *   that divide the world and the Q and K/V heads), all_gather.
 * - bytescale: group sizing x packing (memory/tokens, memory/work, work/tokens, work/work), then
 *   power-of-two groups on or off.
 * - wlb: the per-sequence candidate's rules (bytescale memory/tokens or work/work); the
 *   per-document candidate (TE p2p ring, or WLB-LLM's unpadded all-gather).
 * - magi: backend (a2av, native) x hidden tail reduce; then `overlap_degree` 1-4 (the docs'
 *   recommended range); then the chunk size (2048 as in Magi's benchmark, the default
 *   total/(8N), 8192).
 * FCP is never tuned here: it runs with the options given on the command line.
 */

import { FcpError, fail } from '../core/issues.ts';
import { type SimOptions, type SimResult, simulatePlan } from '../executors/sim/index.ts';
import type { Plan } from '../plan/types.ts';
import { requireValidPlan } from '../plan/validate.ts';
import type { Planner, PlannerOptions } from '../planners/types.ts';
import type { Problem } from '../problem/problem.ts';

/** `--baselines`: the baselines' default configurations, or each one's best from its sweep. */
export type BaselinesMode = 'default' | 'best';

/** Parses `--baselines`; FcpError `option.baselines` otherwise. */
export function parseBaselinesMode(v: unknown): BaselinesMode {
  if (v === undefined || v === 'default') return 'default';
  if (v === 'best') return 'best';
  return fail(
    'option.baselines',
    `--baselines must be default or best (got ${JSON.stringify(v)})`,
    'baselines',
  );
}

/** The knobs a configuration sets (a subset of the planner options). */
export type Config = PlannerOptions;

/** Each baseline's default configuration, as recorded in compare rows (`config`). */
export function defaultConfig(strategy: string, problem: Problem): Config {
  switch (strategy) {
    case 'ring':
      return { ringVariant: 'p2p' };
    case 'bytescale':
      return { bytescaleSizing: 'memory', bytescalePacking: 'tokens', bytescalePow2: false };
    case 'wlb':
      return {
        bytescaleSizing: 'memory',
        bytescalePacking: 'tokens',
        bytescalePow2: false,
        wlbPerDocument: 'p2p',
      };
    case 'magi':
      return {
        magiBackend: 'a2av',
        hideTailReduce: false,
        overlapDegree: 2,
        chunkSize: defaultMagiChunk(problem),
      };
    default:
      return {};
  }
}

const defaultMagiChunk = (p: Problem): number => {
  let total = 0;
  for (let i = 0; i < p.sequences.length; i++) total += p.sequences[i]!;
  return Math.max(1, Math.ceil(total / (8 * p.world)));
};

/** a2a degrees worth trying: a node and half a node, when they divide the world and the heads. */
export function a2aDegrees(p: Problem, only?: number): number[] {
  const cands = only !== undefined ? [only] : [p.gpusPerNode, p.gpusPerNode / 2];
  return [...new Set(cands)].filter(
    (a) =>
      Number.isInteger(a) &&
      a > 1 &&
      p.world % a === 0 &&
      p.model.qHeads % a === 0 &&
      p.model.kvHeads % a === 0,
  );
}

/** The sweep stages of `strategy` for problems like `p` (empty: not tunable). */
export function sweepStages(strategy: string, p: Problem, a2aDegree?: number): Config[][] {
  switch (strategy) {
    case 'ring':
      return [
        [
          { ringVariant: 'p2p' },
          ...a2aDegrees(p, a2aDegree).map((a): Config => ({ ringVariant: 'a2a+p2p', a2aDegree: a })),
          { ringVariant: 'all_gather' },
        ],
      ];
    case 'bytescale': {
      const rules: Config[] = [];
      for (const s of ['memory', 'work'] as const)
        for (const k of ['tokens', 'work'] as const) rules.push({ bytescaleSizing: s, bytescalePacking: k });
      return [rules, [{ bytescalePow2: false }, { bytescalePow2: true }]];
    }
    case 'wlb':
      return [
        [
          { bytescaleSizing: 'memory', bytescalePacking: 'tokens' },
          { bytescaleSizing: 'work', bytescalePacking: 'work' },
        ],
        [{ wlbPerDocument: 'p2p' }, { wlbPerDocument: 'all_gather' }],
      ];
    case 'magi': {
      const d = defaultMagiChunk(p);
      return [
        [
          { magiBackend: 'a2av', hideTailReduce: false },
          { magiBackend: 'a2av', hideTailReduce: true },
          { magiBackend: 'native', hideTailReduce: false },
          { magiBackend: 'native', hideTailReduce: true },
        ],
        [1, 2, 3, 4].map((overlapDegree) => ({ overlapDegree })),
        [...new Set([2048, d, 8192])].map((chunkSize) => ({ chunkSize })),
      ];
    }
    default:
      return [];
  }
}

/**
 * Most passes over the stages (the first included). Each later pass tries only combinations not
 * screened yet, so it costs a few trials; the search stops earlier once a pass keeps nothing new.
 */
export const MAX_PASSES = 4;

/** One configuration tried, with its simulated time summed over the batches. */
export interface Trial {
  config: Config;
  totalMs: number;
}

/** Result of {@link tuneStrategy}. */
export interface TuneResult {
  /** The winning configuration (the default when nothing beat it). */
  config: Config;
  /** Simulated results of the winner, one per problem. */
  results: SimResult[];
  /** Their total forward plus backward makespan, ms. */
  totalMs: number;
  /** Every configuration tried, in order. */
  trials: Trial[];
}

const keyOf = (c: Config): string =>
  JSON.stringify(Object.fromEntries(Object.entries(c).sort(([a], [b]) => (a < b ? -1 : 1))));

/**
 * Runs `planner`'s sweep over `problems` (the batches of one world size) and returns the best
 * configuration by total simulated time. `base` are the command line's planner options (knobs the
 * sweep sets override them). `a2aDegree` restricts the ring's a2a candidates to that degree.
 * `candidates`, when given, replaces the sweep's stages by one stage of these configurations
 * (`fcp compare --sweep-from`: at 4096 ranks each baseline's own winners at 1024,
 * docs/baselines.md "At 1024 ranks and more"); the default is still tried. `passes` bounds the
 * passes over the stages (one: the sweep before session 40, for bench/sweep-passes.ts).
 */
export function tuneStrategy(
  planner: Planner,
  problems: readonly Problem[],
  base: PlannerOptions,
  sim: SimOptions,
  a2aDegree?: number,
  onTrial?: (t: Trial) => void,
  candidates?: readonly Config[],
  passes = MAX_PASSES,
): TuneResult {
  const p0 = problems[0];
  if (!p0) return fail('option.batches', 'nothing to tune: no batch', 'batches');
  // Every trial runs on every batch, so the search climbs the objective it reports (the total over
  // the batches). It used to screen on the first batch only and run the screen's winner and the
  // default on the others: one batch ranks near ties by chance, and with the passes below the
  // screen's winner for magi at 32 ranks (longtail, PXN, seeds 1-3) was 0.013 forward MFU below a
  // configuration the first batch ranked below six others (session 40, bench/sweep-passes.ts).
  const screen = new Map<string, number>();
  const trials: Trial[] = [];
  const time = (r: SimResult) => r.forward.makespanMs + r.backward.makespanMs;
  // The plans and results of the best so far (the default first), kept so that the result needs no
  // second run (planning and simulation are deterministic; only the validation, skipped while
  // screening, is still owed). At 1024 ranks one wlb plan (it plans and simulates a TE p2p ring
  // candidate) is minutes on the shared machine.
  type Run = { plans: Plan[]; results: SimResult[]; totalMs: number };
  let won: Run | undefined;
  let lastRun: Run | undefined;
  /** Plans and simulates `config` on every batch without validation. */
  const runAll = (config: Config, validate: boolean): Run => {
    const plans = problems.map((p) => planner.plan(p, { ...base, ...config }));
    const results = plans.map((plan) => simulatePlan(plan, { ...sim, skipValidation: !validate }));
    return { plans, results, totalMs: results.reduce((x, r) => x + time(r), 0) };
  };
  const trial = (config: Config): number | undefined => {
    const key = keyOf(config);
    const hit = screen.get(key);
    lastRun = undefined;
    if (hit !== undefined) return hit;
    try {
      // Screening skips the validator: at 1024 ranks validation (with its plan report) was 52%
      // of a trial's time (profiled: 71 s of 136 s for one ring plan). The planners are ours and
      // the configuration that wins is validated on every batch below, so no result reported
      // comes from an unvalidated plan.
      lastRun = runAll(config, false);
    } catch (err) {
      // A configuration the planner refuses for this batch (e.g. a degree that does not fit)
      // is skipped, like a user's failed launch; anything else is a bug.
      if (err instanceof FcpError && err.code.startsWith('option.')) return undefined;
      throw err;
    }
    const ms = lastRun.totalMs;
    screen.set(key, ms);
    const t = { config, totalMs: ms };
    trials.push(t);
    onTrial?.(t);
    return ms;
  };
  const dflt = defaultConfig(planner.name, p0);
  let best: Config = dflt;
  let bestMs = trial(dflt) ?? Number.POSITIVE_INFINITY;
  won = lastRun;
  const stages = candidates ? [candidates] : sweepStages(planner.name, p0, a2aDegree);
  for (let pass = 0; pass < passes; pass++) {
    const before = keyOf(best);
    for (const stage of stages)
      for (const knob of stage) {
        const c = { ...best, ...knob };
        const ms = trial(c);
        // Strictly less: on a tie the earlier configuration (the default first) stays.
        if (ms !== undefined && ms < bestMs) {
          best = c;
          bestMs = ms;
          // A trial better than the best is never a repeat (its time would have been kept), so
          // it just ran: only the best's run is held (a plan at scale is large).
          won = lastRun;
        }
      }
    // A pass that kept nothing new is a fixed point: the next one would only re-read the screen.
    if (keyOf(best) === before) break;
  }
  // The default refused by the planner and nothing better: run it validated, which throws.
  const run = won ?? runAll(best, true);
  if (!sim.skipValidation) for (const plan of run.plans) requireValidPlan(plan);
  return { config: best, results: run.results, totalMs: run.totalMs, trials };
}

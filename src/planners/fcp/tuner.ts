/**
 * FCP's self-tuner (issue 15, deliverable 5), on by default: plans with each candidate the budget
 * allows ({@link tuneCandidates}, `planBudgetMs`, default 200; in mode (b) at least
 * {@link LOADER_MIN_CANDIDATES}) and keeps the one whose estimated forward plus backward makespan
 * (the planner's own timeline model, transfers/timeline.ts; never the simulator) is least, ties to
 * the earlier candidate. The candidates are {@link DEFAULT_CANDIDATES} ({@link LOADER_CANDIDATES}
 * in mode (b)), or {@link TUNE_CANDIDATES} with `fanOut` (relays need a second colouring, so `kv`
 * rounds become Δ of the direct edges plus the relay rounds: only when asked for). They differ
 * only in the phases' knobs, so blocks, placement and layout are planned once and shared. Mode (a)
 * also plans the block sizes the budget buys ({@link BLOCK_SIZE_CANDIDATES}, each a whole
 * pipeline) unless `blockSize` is given. In mode (b) across nodes one more candidate, the chosen
 * group size with relays, is tried beyond the budget ({@link loaderRelays}); so it is with `fanOut`
 * across nodes when the budget buys one candidate (mode (a) from 256 ranks on), and in mode (a)
 * across nodes, `fanOut` not given, when the budget buys two or more (the chosen block and group
 * size with relays). A `coalesce` other
 * than the default, or `tune: false`, plans with the options as given (then `fanOut` forces
 * relays). `meta.tuning` records every candidate's estimate, the choice and the budget; timings
 * add up all candidates. `search` (mode (b)'s level, loader-search.ts) fixes the candidate count
 * and whether relays are tried.
 *
 * (Choosing mode (b)'s swap variant on each variant's first candidate, then tuning only the
 * winner, saved two of its six phase pairs at 256 ranks but flipped one `longtail` batch at 1024
 * ranks (of seeds 1-3) to a plan 0.07 MFU worse forward: docs/results.md, "Session 16",
 * docs/experiments/staged-swaps.patch.)
 */

import { assert } from '../../core/assert.ts';
import { progressSpan } from '../../core/progress-span.ts';
import type { Problem } from '../../problem/problem.ts';
import { KernelTime } from './kernel-time.ts';
import type { LoaderSearch } from './loader-search.ts';
import { FCP_DEFAULTS, type FcpPlannerOptions, resolveFcpOptions } from './options.ts';
import {
  type PipelineResult,
  PROGRESS_SHARE,
  type Prepared,
  prepare,
  runPhases,
  runPipeline,
  type StageTimings,
} from './pipeline.ts';
import { linkModel } from './transfers/links.ts';
import {
  BLOCK_SIZE_CANDIDATES,
  blockSizeCandidates,
  DEFAULT_BUDGET_MS,
  DEFAULT_CANDIDATES,
  LOADER_CANDIDATES,
  LOADER_MIN_CANDIDATES,
  TUNE_CANDIDATES,
  type TuneCandidate,
  tuneCandidates,
} from './tune-candidates.ts';

/** One planned candidate as `meta.tuning` records it (mode (a) also records its block size). */
export interface TriedCandidate {
  readonly blockSize?: number;
  readonly coalesce: number;
  readonly fanOut: boolean;
  /** Mode (a)'s NIC swaps (placement/nic-swaps.ts) in the placement: only the last candidate's. */
  readonly nicSwaps?: boolean;
  readonly estimateMs: number;
}

/** What the self-tuner records in a plan's `meta.tuning`. */
export interface TuningRecord {
  readonly candidates: readonly TriedCandidate[];
  /** Index of the kept candidate. */
  readonly chosen: number;
  readonly budgetMs: number;
}

/** Forward plus backward estimate of a run, ms. */
const estimate = (r: PipelineResult): number => r.estimateMs.forward + r.estimateMs.backward;

/**
 * Plans `problem` self-tuned (module comment) and returns the kept candidate's result, its plan's
 * `meta` carrying the tuning record.
 */
export function tunedPipeline(
  problem: Problem,
  options: FcpPlannerOptions,
  homeFromUser: Int32Array | null,
  search: LoaderSearch | null,
  kernel?: KernelTime,
): PipelineResult {
  // A coalesce other than the default pins it (the command line always passes the default).
  const fixed = options.coalesce !== undefined && options.coalesce !== FCP_DEFAULTS.coalesce;
  if (options.tune === false || fixed) {
    const run = runPipeline(problem, options, homeFromUser, kernel, options.onProgress);
    options.onProgress?.(1);
    return run;
  }
  // The candidates and how many of them are planned whatever the budget.
  const [list, least]: [readonly TuneCandidate[], number] =
    options.fanOut === true
      ? [TUNE_CANDIDATES, 1]
      : homeFromUser !== null
        ? [LOADER_CANDIDATES, LOADER_MIN_CANDIDATES]
        : [DEFAULT_CANDIDATES, 1];
  const budgetMs = options.planBudgetMs ?? DEFAULT_BUDGET_MS;
  const resolved = resolveFcpOptions(options); // a bad budget is an option error before any planning
  // Mode (b): the budget chose the search level (loader-search.ts), whose candidate count is
  // either fixed or the default budget's (as measured there).
  const sizedBy = search === null ? budgetMs : DEFAULT_BUDGET_MS;
  const count = search?.candidates ?? Math.max(least, tuneCandidates(problem.world, sizedBy, list.length));
  // Mode (a) across nodes with a budget that buys one candidate (256 ranks and more by default):
  // that candidate fetches with two-hop relays (fetch.ts, `fanOut`; forward only) instead of
  // directly: one phase pair either way, about 12% more planning time at 256 ranks. Simulated, 256
  // ranks, seeds 1-3 of each batch kind, forward / both phases MFU: hopper-ib +0.0090 ± 0.0049 /
  // +0.0031 ± 0.0017, PXN +0.0126 ± 0.0048 / +0.0038 ± 0.0014, PXN contention +0.0124 ± 0.0037 /
  // +0.0042 ± 0.0011, ratio-5920 +0.0015 ± 0.0009 / +0.0003 ± 0.0003 (docs/results.md, "Session
  // 29"). Where the budget buys two or more, the direct candidates stay: relays in all of them were
  // mixed there (hopper-ib 32 ranks -0.0033 ± 0.0021 forward). `fanOut` given decides instead.
  const across = spansNodes(problem);
  const oneAcrossNodes = count === 1 && across;
  // Mode (a) across nodes with `fanOut` not given: relays decided by the tuner, not the user.
  const modeAAcross = homeFromUser === null && options.fanOut === undefined && across;
  const relayOnly = modeAAcross && count === 1;
  // Mode (a) also tunes the block size unless one is given (the command line passes
  // `--block-size` only when given): each is a whole pipeline.
  const pinnedBlock = homeFromUser !== null || options.blockSize !== undefined;
  const sizes = pinnedBlock
    ? [options.blockSize ?? FCP_DEFAULTS.blockSize]
    : BLOCK_SIZE_CANDIDATES.slice(0, blockSizeCandidates(problem.world, budgetMs, count));
  // One memoised kernel-time model for every block size (it reads only the model and calibration).
  const km = kernel ?? new KernelTime(problem.model, resolved.calibration);
  // Progress (options.onProgress): one step per planned candidate, the relay candidate included
  // when it may be planned.
  // With `fanOut` asked for and a budget that buys one candidate (the direct plan, the first of
  // TUNE_CANDIDATES), the relay variant is planned beyond the budget too, as mode (b)'s is:
  // otherwise `--fan-out` plans no relay at all from 256 ranks on (mode (a), default budget).
  // Mode (a) across nodes where the budget buys two or more direct candidates (below 256 ranks by
  // default) plans the chosen one's relay variant too, kept on any lower estimate (mode (a) takes
  // no RELAY_MARGIN, below): relays in every candidate were mixed there (Session 29).
  // Simulated, seeds 1-3 of each batch kind, 16-128 ranks, B - A of forward / both phases MFU,
  // measured when the variant was still kept on a 1% lead: PXN +0.0029 ± 0.0013 / +0.0009 ± 0.0004 (7 up, 0 down;
  // `magi` 128 +0.017 forward), hopper-ib direct +0.0020 ± 0.0008 / +0.0007 ± 0.0003 (9 up, 1
  // down); docs/results.md, "Session 34".
  const aRelay = modeAAcross && count > 1;
  const mayRelay =
    ((search === null || search.relays) && loaderRelays(problem, options, homeFromUser)) ||
    (options.fanOut === true && oneAcrossNodes) ||
    aRelay;
  // Mode (a) across nodes where the budget buys two or more candidates and `nicSwaps` is not given:
  // the chosen candidate is planned once more with the NIC swaps in its placement
  // (placement/nic-swaps.ts), kept on any lower estimate. Always on, the swaps were mixed (16 ranks
  // lost, 32 gained; docs/results.md, "Session 24"); chosen by the estimate, simulated, B - A of
  // forward / backward / both MFU at 16-64 ranks, seeds 1-3 of each batch kind: hopper-ib +0.0032
  // ± 0.0017 / -0.0003 ± 0.0007 / +0.0005 ± 0.0007, PXN +0.0022 ± 0.0012 / +0.0010 ± 0.0005 /
  // +0.0013 ± 0.0005 (9 up, 0 down); held-out seeds 4-6 +0.0024 ± 0.0010 / +0.0002 ± 0.0008 and
  // PXN +0.0007 ± 0.0011 / +0.0005 ± 0.0002; ratio-5920 +0.0002 ± 0.0004 / +0.0005 ± 0.0004;
  // contention under PXN +0.0008 ± 0.0011 / +0.0006 ± 0.0005 (docs/results.md, "Session 45").
  const mayNic = modeAAcross && count > 1 && options.nicSwaps === undefined;
  const steps = sizes.length * count + (mayRelay ? 1 : 0) + (mayNic ? 1 : 0);
  let stepsDone = 0;
  const stepDone = (): void => options.onProgress?.(Math.min(1, ++stepsDone / steps));
  // Within a step: `f` of the current candidate done (its stages, pipeline.ts PROGRESS_SHARE; the
  // shared placement counts towards a block size's first candidate).
  const within = (f: number): void => options.onProgress?.(Math.min(1, (stepsDone + f) / steps));
  const tried: TriedCandidate[] = [];
  const total: StageTimings = { blocks: 0, distribute: 0, layout: 0, forward: 0, backward: 0, total: 0 };
  // The kept candidate so far: its run, estimate, shared placement and index in `tried`.
  const keep: { run: PipelineResult | null; ms: number; shared: Prepared | null; index: number } = {
    run: null,
    ms: Number.POSITIVE_INFINITY,
    shared: null,
    index: 0,
  };
  /** Adds a run's timings and record; keeps it when its estimate beats the kept one's by `margin`. */
  const consider = (
    run: PipelineResult,
    c: Omit<TriedCandidate, 'estimateMs'>,
    shared: Prepared,
    margin: number,
  ): void => {
    for (const k of Object.keys(total) as (keyof StageTimings)[]) total[k] += run.timings[k];
    const ms = estimate(run);
    tried.push({ ...c, estimateMs: Math.round(ms * 1000) / 1000 });
    if (ms < keep.ms * (1 - margin)) {
      keep.run = run;
      keep.ms = ms;
      keep.shared = shared;
      keep.index = tried.length - 1;
    }
  };
  for (const blockSize of sizes) {
    const o = pinnedBlock ? options : { ...options, blockSize };
    const rec = homeFromUser === null ? { blockSize } : {};
    const shared = prepare(problem, o, homeFromUser, km);
    const p = PROGRESS_SHARE.prepare;
    within(p);
    for (let i = 0; i < count; i++) {
      const c = relayOnly ? { ...list[i]!, fanOut: true } : list[i]!;
      const onStage = i === 0 ? progressSpan(within, p, 1) : within;
      const run = runPhases(shared, resolveFcpOptions({ ...o, ...c }), i === 0, onStage);
      consider(run, { ...rec, ...c }, shared, 0);
      stepDone();
    }
  }
  assert(keep.shared !== null, 'at least one candidate is planned');
  /**
   * Plans the kept candidate again with relays as `fanOut` says and the options in `extra`, from its
   * placement or, with `ownPlacement` (the change moves blocks), from a new one; kept on `margin`.
   * Mode (a) records (and plans with) the chosen block size, as its other candidates.
   */
  const variant = (
    fanOut: boolean,
    extra: { nicSwaps?: true },
    ownPlacement: boolean,
    margin: number,
  ): void => {
    const chosen = tried[keep.index]!;
    const rec = { ...(chosen.blockSize !== undefined ? { blockSize: chosen.blockSize } : {}), ...extra };
    const c: TuneCandidate = { coalesce: chosen.coalesce, fanOut };
    const o = { ...options, ...rec };
    const shared = ownPlacement ? prepare(problem, o, homeFromUser, km) : keep.shared!;
    consider(
      runPhases(shared, resolveFcpOptions({ ...o, ...c }), false, within),
      { ...rec, ...c },
      shared,
      margin,
    );
    stepDone();
  };
  // Mode (b) across nodes, mode (a) across nodes (`fanOut` with a one-candidate budget, or not
  // given with two or more): the chosen group size again with two-hop relays; the block size is
  // the chosen one's, as for the direct candidates. Mode (a) keeps it on any lead, mode (b) on
  // RELAY_MARGIN's.
  if (mayRelay) variant(true, {}, false, homeFromUser === null ? 0 : RELAY_MARGIN);
  // The chosen candidate (relays or not) with the NIC swaps (mayNic above): its own placement.
  if (mayNic) variant(tried[keep.index]!.fanOut, { nicSwaps: true }, true, 0);
  const kept = keep.run;
  assert(kept !== null, 'at least one candidate is planned');
  const plan = kept.plan;
  const tuning: TuningRecord = { candidates: tried, chosen: keep.index, budgetMs };
  plan.meta = { ...plan.meta, tuning };
  Object.defineProperty(plan.meta, 'timings', { value: total, enumerable: false });
  Object.defineProperty(plan.meta, 'estimateMs', { value: kept.estimateMs, enumerable: false });
  return { ...kept, plan, timings: total };
}

/**
 * Relative lead in the estimate mode (b)'s relay candidate needs over the direct plan. Near ties are
 * noise of the estimate (simulated, mode (b), seeds 1-3, fwd MFU): relays lost where their estimate
 * led by 0.2% (bimodal 256 fluid seed 1: 0.610 -> 0.600) and 0.56% (longtail 256 contention seed
 * 1: 0.592 -> 0.578), and won or tied at leads of 0.9-7% (magi 256 fluid seeds 1-3 +0.011 to
 * +0.037, bimodal 256 seed 2 equal, longtail and magi 1024 every seed +0.02 to +0.13). Mode (a)'s
 * relay variant needs no lead: with a 1% lead against none, 16-128 ranks, seeds 1-3 of each batch
 * kind, B - A of forward MFU: PXN +0.0021 ± 0.0011 (15 up, 4 down), hopper-ib direct +0.0016 ±
 * 0.0006 (14 up, 3 down), PXN contention +0.0030 ± 0.0010 (17 up, 2 down), ratio-5920 PXN
 * +0.0003 ± 0.0002; backward -0.0001 to -0.0002 (docs/results.md, "Session 34").
 */
const RELAY_MARGIN = 0.01;

/**
 * Whether the self-tuner also tries two-hop relays (fetch.ts, `fanOut`) beyond the budget's
 * candidates: in mode (b) (`homeFromUser`) on more than one node, unless `fanOut` is given (true:
 * the relay candidates are in the list already; false: never). In mode (b) only K/V moves, and the
 * ranks of a long sequence's node all need nearly all of its K/V: one NIC fetch per node instead
 * of one per rank (simulated, fluid, seed 1, forward MFU direct -> relayed, coalesce 16: longtail
 * 1024 0.495 -> 0.544; magi 256 0.477 -> 0.548; longtail 256 seed 3 0.564 -> 0.547, hence a
 * candidate judged by the estimate, not a rule). Relays add `kv` rounds beyond Δ; without them the
 * plan keeps exactly Δ of the direct fetch graph.
 */
function loaderRelays(
  problem: Problem,
  options: FcpPlannerOptions,
  homeFromUser: Int32Array | null,
): boolean {
  if (homeFromUser === null || options.fanOut !== undefined) return false;
  return spansNodes(problem);
}

/** Whether the problem's ranks span more than one node (relays cross nodes only). */
export function spansNodes(problem: Problem): boolean {
  const g = linkModel(problem.cluster, problem.gpusPerNode).nodeSize;
  return g > 1 && problem.world > g;
}

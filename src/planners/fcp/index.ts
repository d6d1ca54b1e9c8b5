/**
 * The FCP planner (docs/design.md, FCP's planner) as a pipeline of named stages over one context
 * object (context.ts), listed in {@link planFcp}:
 *
 *   context     problem, options, kernel time model (kernel-time.ts), the cluster's links
 *               (transfers/links.ts), user rows
 *   place       placement/: blocks and zig-zag units (blocks.ts), their compute weights
 *               (weights.ts), multi-dimensional LPT with affinity and the locality tie-break plus
 *               refinement (distribute.ts, refine.ts), retried with smaller blocks when memory is
 *               tight (place.ts)
 *   layout      home runs (placement/layout.ts), reshuffle pieces (transfers/reshuffle.ts), remote
 *               K/V requests (transfers/fetch.ts)
 *   forward     forward.ts: `in`, `kv` (exactly Δ rounds, transfers/rounds.ts), tiled tasks
 *               (grid.ts, grid-tasks.ts, tasks.ts), ordered compute ops (order.ts), `out` pushes
 *               placed on the estimated timeline (transfers/timeline.ts), groups (transfers/groups.ts)
 *   backward    backward.ts: the forward's tasks and rounds again, `dkv` and `out` pushes
 *   assemble    the plan file and `meta.stats`
 *
 * The stages themselves are in pipeline.ts, helpers both phases share in phase.ts; this module keeps
 * the self-tuner and mode (b)'s loader layout (levelled, then refined by token swaps:
 * placement/token-swap.ts). Same problem and options give a byte-identical plan:
 * every stage is deterministic (ties broken by ids) and nothing reads the clock except the stage
 * timings, which are attached to `meta` as a non-enumerable property so that they never reach the
 * plan file.
 */

import { assert } from '../../core/assert.ts';
import { kvBytesPerToken } from '../../model/attention.ts';
import type { Layout, Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { KernelTime } from './kernel-time.ts';
import { type CapLayout, LOADER_CAPS, layoutAtCap, maxOf } from './loader-caps.ts';
import { type LoaderSearch, loaderSearch } from './loader-search.ts';
import { FCP_DEFAULTS, type FcpPlannerOptions, resolveFcpOptions } from './options.ts';
import {
  type FcpResult,
  type PipelineResult,
  type Prepared,
  prepare,
  runPhases,
  runPipeline,
  type StageTimings,
} from './pipeline.ts';
import { computeImbalance } from './placement/distribute.ts';
import { kvTrafficMs } from './placement/loader-comm.ts';
import { TOKEN_BAND, tokenBounds, tokenImbalance } from './placement/loader-layout.ts';
import { weightGeometry } from './placement/place.ts';
import { type PhaseLoads, refineLoaderLayout, type SwapResult } from './placement/token-swap.ts';
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

export type { FcpResult, FcpStats, StageTimings } from './pipeline.ts';
export { tuneCandidates } from './tune-candidates.ts';

/** Plans `problem` with FCP (self-tuned, see {@link tunedPipeline}); returns the plan and the stage timings. */
export function planFcp(problem: Problem, options: FcpPlannerOptions = {}): FcpResult {
  return tunedPipeline(problem, options, null, null);
}

/**
 * Self-tuning (issue 15, deliverable 5), on by default: plans with each candidate the budget
 * allows ({@link tuneCandidates}, `planBudgetMs`, default 200; in mode (b) at least
 * {@link LOADER_MIN_CANDIDATES}) and keeps the one whose estimated
 * forward plus backward makespan (the planner's own timeline model, transfers/timeline.ts; never
 * the simulator) is least, ties to the earlier candidate. The candidates are
 * {@link DEFAULT_CANDIDATES} ({@link LOADER_CANDIDATES} in mode (b)), or {@link TUNE_CANDIDATES} with `fanOut` (relays need a second
 * colouring, so `kv` rounds become Δ of the direct edges plus the relay rounds: only when asked
 * for). They differ only in the phases' knobs, so blocks, placement and layout are planned once
 * and shared. In mode (b) across nodes one more candidate, the chosen group size with relays, is
 * tried beyond the budget ({@link loaderRelays}). A `coalesce` other than the default, or `tune:
 * false`, plans with the options as given (then `fanOut` forces relays). `meta.tuning` records every candidate's estimate, the
 * choice and the budget; timings add up all candidates. `search` (mode (b)'s level,
 * loader-search.ts) fixes the candidate count and whether relays are tried.
 */
function tunedPipeline(
  problem: Problem,
  options: FcpPlannerOptions,
  homeFromUser: Int32Array | null,
  search: LoaderSearch | null,
  kernel?: KernelTime,
): PipelineResult {
  // A coalesce other than the default pins it (the command line always passes the default).
  const fixed = options.coalesce !== undefined && options.coalesce !== FCP_DEFAULTS.coalesce;
  if (options.tune === false || fixed) return runPipeline(problem, options, homeFromUser, kernel);
  // The candidates and how many of them are planned whatever the budget.
  const [list, least]: [readonly TuneCandidate[], number] =
    options.fanOut === true
      ? [TUNE_CANDIDATES, 1]
      : homeFromUser !== null
        ? [LOADER_CANDIDATES, LOADER_MIN_CANDIDATES]
        : [DEFAULT_CANDIDATES, 1];
  const budgetMs = options.planBudgetMs ?? DEFAULT_BUDGET_MS;
  resolveFcpOptions(options); // a bad budget is an option error before any planning
  // Mode (b): the budget chose the search level (loader-search.ts), whose candidate count is
  // either fixed or the default budget's (as measured there).
  const sizedBy = search === null ? budgetMs : DEFAULT_BUDGET_MS;
  const count = search?.candidates ?? Math.max(least, tuneCandidates(problem.world, sizedBy, list.length));
  // Mode (a) also tunes the block size (BLOCK_SIZE_CANDIDATES) unless one is given (the command
  // line passes `--block-size` only when given): each is a whole pipeline.
  const pinnedBlock = homeFromUser !== null || options.blockSize !== undefined;
  const sizes = pinnedBlock
    ? [options.blockSize ?? FCP_DEFAULTS.blockSize]
    : BLOCK_SIZE_CANDIDATES.slice(0, blockSizeCandidates(problem.world, budgetMs, count));
  let best: PipelineResult | null = null;
  let bestMs = Number.POSITIVE_INFINITY;
  let chosen = 0;
  let bestShared: Prepared | null = null;
  // Mode (a)'s candidates record their block size (mode (b)'s come from its layout, per sequence).
  const tried: { blockSize?: number; coalesce: number; fanOut: boolean; estimateMs: number }[] = [];
  const total: StageTimings = { blocks: 0, distribute: 0, layout: 0, forward: 0, backward: 0, total: 0 };
  for (const blockSize of sizes) {
    const o = pinnedBlock ? options : { ...options, blockSize };
    const rec = homeFromUser === null ? { blockSize } : {};
    const shared = prepare(problem, o, homeFromUser, kernel);
    for (let i = 0; i < count; i++) {
      const c = list[i]!;
      const run = runPhases(shared, resolveFcpOptions({ ...o, ...c }), i === 0);
      for (const k of Object.keys(total) as (keyof StageTimings)[]) total[k] += run.timings[k];
      const ms = run.estimateMs.forward + run.estimateMs.backward;
      tried.push({ ...rec, ...c, estimateMs: Math.round(ms * 1000) / 1000 });
      if (ms < bestMs) {
        best = run;
        bestMs = ms;
        bestShared = shared;
        chosen = tried.length - 1;
      }
    }
  }
  assert(best !== null, 'at least one candidate is planned');
  // Mode (b) across nodes: the chosen group size again with two-hop relays (loaderRelays).
  if ((search === null || search.relays) && loaderRelays(problem, options, homeFromUser)) {
    // Mode (b) only: the block size is the layout's, as for the direct candidates.
    const c: TuneCandidate = { coalesce: tried[chosen]!.coalesce, fanOut: true };
    const run = runPhases(bestShared!, resolveFcpOptions({ ...options, ...c }), false);
    for (const k of Object.keys(total) as (keyof StageTimings)[]) total[k] += run.timings[k];
    const ms = run.estimateMs.forward + run.estimateMs.backward;
    tried.push({ ...c, estimateMs: Math.round(ms * 1000) / 1000 });
    if (ms < bestMs * (1 - RELAY_MARGIN)) {
      best = run;
      bestMs = ms;
      chosen = tried.length - 1;
    }
  }
  const plan = best.plan;
  const estimateMs = best.estimateMs;
  plan.meta = { ...plan.meta, tuning: { candidates: tried, chosen, budgetMs } };
  Object.defineProperty(plan.meta, 'timings', { value: total, enumerable: false });
  Object.defineProperty(plan.meta, 'estimateMs', { value: estimateMs, enumerable: false });
  return { ...best, plan, timings: total };
}

/**
 * Relative lead in the estimate the relay candidate needs over the direct plan. Near ties are noise
 * of the estimate (simulated, mode (b), seeds 1-3, fwd MFU): relays lost where their estimate led
 * by 0.2% (bimodal 256 fluid seed 1: 0.610 -> 0.600) and 0.56% (longtail 256 contention seed 1:
 * 0.592 -> 0.578), and won or tied at leads of 0.9-7% (magi 256 fluid seeds 1-3 +0.011 to
 * +0.037, bimodal 256 seed 2 equal, longtail and magi 1024 every seed +0.02 to +0.13).
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
  const g = linkModel(problem.cluster, problem.gpusPerNode).nodeSize;
  return g > 1 && problem.world > g;
}

/** The FCP planner, registered as `fcp`. */
export const fcpPlanner: Planner = {
  name: 'fcp',
  description:
    'Flexible Context Parallelism: balanced blocks anywhere, congestion-free rounds, pipelined and coalesced',
  plan(problem: Problem, options: PlannerOptions = {}): Plan {
    if (!options.loaderLayout) return planFcp(problem, options).plan;
    return planForLoaderLayout(problem, options);
  },
};

/**
 * Most exchanges of the loader layout's refinement (token-swap.ts). The first few carry most of
 * the gain (modelled max fwd + max bwd, longtail seed 1, 8 / 32 / 64 exchanges: 16 ranks 264.6 /
 * 263.4 / 263.4 ms from 269.2; 128 ranks 244.0 / 242.8 / 241.3 from 246.4; 256 ranks 285.5 /
 * 285.5 / 285.5 from 288.1), and each costs a few ms of planning (up to ~18 ms at 16 ranks, where
 * ranks hold the most rows).
 */
const SWAP_STEPS = 32;

/** Lighter ranks tried as partners of a busiest rank per exchange. */
const SWAP_PARTNERS = 6;

/** Modelled compute imbalance (max / mean - 1) of each phase, rounded to 1e-4. */
function phaseImbalance(l: PhaseLoads): { forward: number; backward: number } {
  const r = (x: number): number => Math.round(x * 1e4) / 1e4;
  return { forward: r(computeImbalance(l.fwd)), backward: r(computeImbalance(l.bwd)) };
}

/**
 * `loaderLayout`, deployment mode (b) (placement/loader-layout.ts): place the blocks under each of
 * {@link LOADER_CAPS}, level the resulting home layout's tokens to the mean within
 * {@link TOKEN_BAND} (the rest of the model runs per token in this layout), keep the levelled
 * layout whose busiest rank has the least modelled compute, refine it within the band by token
 * swaps (placement/token-swap.ts: lower max fwd + max bwd, each phase modelled apart), and plan
 * with it as both the user and the home layout: the loader delivers it once per step, so no
 * attention layer reshuffles. The swaps (simulated, longtail, 3 batches, fwd/bwd compute
 * imbalance at 16 / 64 / 256 ranks: 3.8/4.6% -> 1.1/2.7%, 3.2/3.2% -> 0.8/1.5%, 3.3/3.8% ->
 * 2.2/2.8%; MFU 0.590/0.470 -> 0.606/0.476, 0.607/0.499 -> 0.620/0.505, 0.596/0.480 ->
 * 0.601/0.481). `meta.loaderLayout` records the token imbalance, the cap chosen, the compute
 * imbalance of the placement before levelling, the swaps applied, the modelled per-phase
 * compute imbalance before and after them, and the search level (`search`, loader-search.ts: a
 * given `planBudgetMs` may narrow the caps, the swap variants and the candidates; without one,
 * from `ONE_CAP_FROM` ranks on only the cap 1.1 is tried).
 */
function planForLoaderLayout(problem: Problem, options: PlannerOptions): Plan {
  const rest: PlannerOptions = { ...options };
  delete rest.loaderLayout;
  const o = resolveFcpOptions(rest);
  const kernel = new KernelTime(problem.model, o.calibration);
  const { sequences, world, mask } = problem;
  const links = linkModel(problem.cluster, problem.gpusPerNode);
  const kvBytes = kvBytesPerToken(problem.model);
  let best: CapLayout | null = null;
  // How much of the search the budget buys (loader-search.ts; no budget: all of it).
  const fo = options as FcpPlannerOptions;
  const search = loaderSearch(world, fo.planBudgetMs, fo.loaderSearch);
  for (const cap of search.caps ?? LOADER_CAPS) {
    const c = layoutAtCap(problem, o, kernel, cap);
    if (best === null || c.cost < best.cost) best = c;
  }
  assert(best !== null, 'at least one cap is tried');
  const total = sequences.reduce((a, b) => a + b, 0);
  const swapModel = { sequences, mask, blockSize: best.blockSize, grid: weightGeometry(o), kernel };
  const bounds = tokenBounds(total, world, TOKEN_BAND);
  const refine = (nodeSize: number): SwapResult =>
    refineLoaderLayout(best.layout, world, swapModel, {
      ...bounds,
      steps: SWAP_STEPS,
      partners: SWAP_PARTNERS,
      nodeSize,
    });
  // Swaps kept inside nodes (or to ranks that fetch the sequence already) against swaps anywhere:
  // both layouts are planned (tuned) and the plan with the lower estimate is kept. Choosing by
  // modelled compute plus the busiest rank's K/V time, as the caps are, missed what the free swaps
  // add on the NIC for the other ranks: longtail at 1024 ranks, seed 2, it took the free swaps
  // (391.5 against 393.8 ms) and the forward fell to 0.463 MFU against 0.566 with the node swaps.
  // By the plans' estimates (simulated, fluid, 3 batches, fwd/bwd MFU): longtail 1024 0.520/0.455
  // -> 0.571/0.459, 64 0.618/0.506 -> 0.620/0.505, 256 0.598/0.480 -> 0.596/0.481, 16 unchanged;
  // magi 64 0.575/0.471 -> 0.577/0.478, 128 0.544/0.450 -> 0.551/0.445, 256 0.524/0.450 ->
  // 0.535/0.450 (`fcp compare --strategies fcp --loader-layout --batches 3`). It costs one more
  // tuned pipeline in mode (b) on more than one node. Self-tuning off (`tune: false`: no candidate
  // is planned beside the one asked for) keeps the modelled choice.
  const near = refine(links.nodeSize);
  // A search without swaps anywhere plans them only when pinned (`loaderSwaps: 'any'`).
  const skipFree = !search.swapsAnywhere && fo.loaderSwaps !== 'any';
  const free = links.nodeSize >= world || skipFree ? near : refine(world);
  const planOf = (r: SwapResult): PipelineResult =>
    tunedPipeline({ ...problem, userLayout: r.layout }, rest, best.blockSize, search, kernel);
  // The swaps kept without planning both: the only ones (one node), the pinned ones, or with
  // self-tuning off the modelled choice; null: plan both.
  const decided = (): SwapResult | null => {
    if (free === near) return near;
    if (fo.loaderSwaps !== undefined) return fo.loaderSwaps === 'any' ? free : near;
    if (fo.tune !== false) return null;
    const kvOf = (l: Layout): number =>
      o.balance === 'time' ? kvTrafficMs(l, sequences, mask, world, links, kvBytes) : 0;
    const cost = (r: SwapResult): number => maxOf(r.after.fwd) + maxOf(r.after.bwd) + kvOf(r.layout);
    return cost(free) < cost(near) ? free : near;
  };
  let swap = decided();
  let second: PipelineResult;
  if (swap !== null) second = planOf(swap);
  else {
    const nearPlan = planOf(near);
    const freePlan = planOf(free);
    const ms = (r: PipelineResult): number => r.estimateMs.forward + r.estimateMs.backward;
    const takeFree = ms(freePlan) < ms(nearPlan);
    swap = takeFree ? free : near;
    second = takeFree ? freePlan : nearPlan;
  }
  const plan = second.plan;
  plan.meta = {
    ...plan.meta,
    loaderLayout: {
      tokenImbalance: tokenImbalance(swap.layout, world),
      tokenCap: Number.isFinite(best.cap) ? best.cap : null,
      placedComputeImbalance: computeImbalance(best.placed.placement.computeLoad),
      swaps: swap === near ? 'node' : 'any',
      search: search.name,
      swapSteps: swap.steps,
      levelledImbalance: phaseImbalance(swap.before),
      swappedImbalance: phaseImbalance(swap.after),
    },
  };
  Object.defineProperty(plan.meta, 'timings', { value: second.timings, enumerable: false });
  Object.defineProperty(plan.meta, 'estimateMs', { value: second.estimateMs, enumerable: false });
  return plan;
}

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
 * The stages themselves are in pipeline.ts, helpers both phases share in phase.ts and phase-ops.ts, the self-tuner in
 * tuner.ts; this module keeps mode (b)'s loader layout (levelled, then refined by token swaps:
 * placement/token-swap.ts). Same problem and options give a byte-identical plan:
 * every stage is deterministic (ties broken by ids) and nothing reads the clock except the stage
 * timings, which are attached to `meta` as a non-enumerable property so that they never reach the
 * plan file.
 */

import { assert } from '../../core/assert.ts';
import { progressSpan } from '../../core/progress-span.ts';
import { kvBytesPerToken } from '../../model/attention.ts';
import type { Layout, Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { KernelTime } from './kernel-time.ts';
import { type CapLayout, capKept, LOADER_CAPS, layoutAtCap, maxOf } from './loader-caps.ts';
import { loaderSearch } from './loader-search.ts';
import { type FcpPlannerOptions, type LoaderSwaps, resolveFcpOptions } from './options.ts';
import type { FcpResult, PipelineResult } from './pipeline.ts';
import { computeImbalance } from './placement/distribute.ts';
import { kvTrafficMs } from './placement/loader-comm.ts';
import { TOKEN_BAND, tokenBounds, tokenImbalance } from './placement/loader-layout.ts';
import { weightGeometry } from './placement/place.ts';
import { type PhaseLoads, refineLoaderLayout, type SwapResult } from './placement/token-swap.ts';
import { linkModel } from './transfers/links.ts';
import { type TuningRecord, tunedPipeline } from './tuner.ts';

export type { FcpResult, FcpStats, StageTimings } from './pipeline.ts';
export { tuneCandidates } from './tune-candidates.ts';
export type { TriedCandidate, TuningRecord } from './tuner.ts';

/** Plans `problem` with FCP (self-tuned, tuner.ts); returns the plan and the stage timings. */
export function planFcp(problem: Problem, options: FcpPlannerOptions = {}): FcpResult {
  return tunedPipeline(problem, options, null, null);
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
 * ranks hold the most rows). Since then the layouts changed: at 256 ranks (`longtail` seeds 1-3,
 * ratio-5920) all 32 are used, and 128 lower the modelled forward imbalance from 1.6% to 0.8-0.9%
 * on two seeds, but they were measured to lose MFU on hopper-ib: the further exchanges put pieces
 * of long sequences on ranks whose K/V then arrives late, a wait no exchange score of K/V volume
 * foresaw (simulated; docs/results.md, "Session 29" and "Session 32").
 */
const SWAP_STEPS = 32;

/**
 * Exchanges of the long swap variants (`node-long`, `any-long`): where a refinement used all
 * {@link SWAP_STEPS}, the self-tuner carries it on to this many and plans the result with the
 * candidate (group size, relays) its short plan chose, keeping it where its estimate is lower.
 * More exchanges lower the modelled compute imbalance (longtail 256 ranks ratio-5920 seeds 2-3:
 * forward 1.66 / 1.62% -> 0.89 / 0.82%) but can put pieces of long sequences on ranks whose K/V
 * then arrives late: taking them always lost on hopper-ib (simulated, session 32: -0.0023 ±
 * 0.0017 forward MFU) and won on ratio-5920 (+0.0013 ± 0.0003). Judged by the plan's own
 * estimate, which sees the late K/V, both phases together gain on every setting measured, most at
 * 1024 ranks (simulated, B - A: +0.0002 to +0.0007 at 64-256, +0.0042 at 1024; the forward alone
 * lost 0.0012 under PXN on held-out seeds); planning at 256 ranks takes 23% (`longtail`) to 90%
 * (`magi`) longer (docs/results.md, "Session 44").
 */
const LONG_SWAP_STEPS = 128;

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
 * layout whose busiest rank has the least modelled compute among the caps whose placement kept
 * the first cap's block sizes (loader-caps.ts, capKept), refine it within the band by token
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
  const caps = search.caps ?? LOADER_CAPS;
  // Progress (options.onProgress) by stage, roughly as the time goes at 256 ranks: the capped
  // placements to 0.25, the swaps to 0.35, the tuned pipelines the rest.
  const report = options.onProgress;
  // Blocks of the first (loosest) cap: a later cap whose placement shrank them is not kept
  // (loader-caps.ts, capKept).
  let reference: Int32Array | null = null;
  for (let i = 0; i < caps.length; i++) {
    const c = layoutAtCap(problem, o, kernel, caps[i]!, caps.length > 1, reference);
    if (capKept(c.blockSize, reference) && (best === null || c.cost < best.cost)) best = c;
    reference ??= c.blockSize;
    report?.((0.25 * (i + 1)) / caps.length);
  }
  assert(best !== null, 'at least one cap is tried');
  const total = sequences.reduce((a, b) => a + b, 0);
  const swapModel = { sequences, mask, blockSize: best.blockSize, grid: weightGeometry(o), kernel };
  const bounds = tokenBounds(total, world, TOKEN_BAND);
  /** Token swaps of `from` (default: the levelled layout), at most `steps` exchanges. */
  const refine = (nodeSize: number, from = best.layout, steps = SWAP_STEPS): SwapResult =>
    refineLoaderLayout(from, world, swapModel, { ...bounds, steps, partners: SWAP_PARTNERS, nodeSize });
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
  report?.(0.3);
  // A search without swaps anywhere plans them only when pinned (`loaderSwaps: 'any'`).
  const pinned = fo.loaderSwaps;
  const anyPinned = pinned === 'any' || pinned === 'any-long';
  const skipFree = !search.swapsAnywhere && !anyPinned;
  const free = links.nodeSize >= world || skipFree ? near : refine(world);
  /**
   * The long variant of `r` (LONG_SWAP_STEPS): its refinement continued from where it stopped, or
   * null where it stopped short of SWAP_STEPS (nothing left to exchange) or gains no exchange.
   */
  const longer = (r: SwapResult, nodeSize: number): SwapResult | null => {
    if (r.steps < SWAP_STEPS) return null;
    const more = refine(nodeSize, r.layout, LONG_SWAP_STEPS - r.steps);
    return more.steps === 0 ? null : { ...more, steps: r.steps + more.steps, before: r.before };
  };
  // A pinned long variant (the self-tuner carries on both refinements itself, below).
  const nearLong = pinned === 'node-long' ? longer(near, links.nodeSize) : null;
  const freeLong = pinned === 'any-long' ? longer(free, world) : null;
  report?.(0.35);
  /** Plans a swap variant with `extra` options; `lo`, `hi`: its share of the progress. */
  const planOf = (r: SwapResult, lo = 0.35, hi = 1, extra: FcpPlannerOptions = {}): PipelineResult =>
    tunedPipeline(
      { ...problem, userLayout: r.layout },
      { ...rest, ...extra, ...(report ? { onProgress: progressSpan(report, lo, hi) } : {}) },
      best.blockSize,
      search,
      kernel,
    );
  // The swaps kept without planning both: the only ones (one node), the pinned ones, or with
  // self-tuning off the modelled choice; null: plan both.
  const decided = (): SwapResult | null => {
    // A pinned long variant that gains nothing is its short one.
    if (pinned === 'node-long') return nearLong ?? near;
    if (pinned === 'any-long') return freeLong ?? free;
    if (free === near) return near;
    if (pinned !== undefined) return pinned === 'any' ? free : near;
    if (fo.tune !== false) return null;
    const kvOf = (l: Layout): number =>
      o.balance === 'time' ? kvTrafficMs(l, sequences, mask, world, links, kvBytes) : 0;
    const cost = (r: SwapResult): number => maxOf(r.after.fwd) + maxOf(r.after.bwd) + kvOf(r.layout);
    return cost(free) < cost(near) ? free : near;
  };
  let swap = decided();
  let second: PipelineResult;
  let swapName: LoaderSwaps;
  if (swap !== null) {
    second = planOf(swap);
    swapName =
      swap === nearLong ? 'node-long' : swap === freeLong ? 'any-long' : swap === near ? 'node' : 'any';
  } else {
    const ms = (r: PipelineResult): number => r.estimateMs.forward + r.estimateMs.backward;
    const nearPlan = planOf(near, 0.35, 0.6);
    const freePlan = planOf(free, 0.6, 0.85);
    const takeFree = ms(freePlan) < ms(nearPlan);
    swap = takeFree ? free : near;
    second = takeFree ? freePlan : nearPlan;
    swapName = takeFree ? 'any' : 'node';
    // Each refinement carried on (LONG_SWAP_STEPS), planned with its short plan's chosen candidate
    // only (group size and relays): a pipeline each, kept on a lower estimate and recorded as the
    // last candidate of that short plan's tuning record. Both: a long variant of the short loser
    // can beat the short winner (`magi` 1024 ranks seed 2, contention: node-long 157.4 ms against
    // any 158.6 and node 165.9).
    const longs = [
      [near, nearPlan, links.nodeSize, 'node-long'],
      [free, freePlan, world, 'any-long'],
    ] as const;
    for (const [k, [short, shortPlan, nodeSize, name]] of longs.entries()) {
      const long = longer(short, nodeSize);
      if (long === null) continue;
      const t = shortPlan.plan.meta?.tuning as TuningRecord;
      const c = t.candidates[t.chosen]!;
      const pick = { coalesce: c.coalesce, fanOut: c.fanOut };
      const probe = planOf(long, 0.85 + 0.075 * k, 0.925 + 0.075 * k, { ...pick, tune: false });
      if (ms(probe) < ms(second)) {
        const tried = { ...pick, estimateMs: Math.round(ms(probe) * 1000) / 1000 };
        const tuning: TuningRecord = {
          ...t,
          candidates: [...t.candidates, tried],
          chosen: t.candidates.length,
        };
        probe.plan.meta = { ...probe.plan.meta, tuning };
        swap = long;
        second = probe;
        swapName = name;
      }
    }
    report?.(1);
  }
  const plan = second.plan;
  plan.meta = {
    ...plan.meta,
    loaderLayout: {
      tokenImbalance: tokenImbalance(swap.layout, world),
      tokenCap: Number.isFinite(best.cap) ? best.cap : null,
      placedComputeImbalance: computeImbalance(best.placed.placement.computeLoad),
      swaps: swapName,
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

/**
 * The stages of one FCP planning run (listed in index.ts): `prepare` (context, placement, layout:
 * what the self-tuner's candidates share) and `runPhases` (forward, backward and assemble with one
 * candidate's phase options), with the stage clock and the plan's statistics (`meta.stats`).
 * index.ts keeps the self-tuner and the loader layout (mode (b)) on top of these.
 */

import { progressSpan } from '../../core/progress-span.ts';
import { PLAN_FORMAT, type Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { type BackwardResult, planBackward } from './backward.ts';
import { type PlanBalance, planBalance } from './balance.ts';
import { type PhaseContext, type PlannerContext, plannerContext } from './context.ts';
import { type ForwardResult, planForward } from './forward.ts';
import type { KernelTime } from './kernel-time.ts';
import { LayoutMemo } from './layout-memo.ts';
import { type FcpOptions, type FcpPlannerOptions, optionsToJson, resolveFcpOptions } from './options.ts';
import type { PhaseStats } from './phase.ts';
import { computeImbalance } from './placement/distribute.ts';
import { homeLayoutOf, homeRuns } from './placement/layout.ts';
import { type Placed, placeBlocks, tileGeometry } from './placement/place.ts';
import { fetchRequests } from './transfers/fetch-requests.ts';
import { movedTokens, reshuffleBytes, reshufflePieces } from './transfers/reshuffle.ts';

/** Largest message (K/V or reshuffle piece) when tasks are not tiled, in tokens. */
const FETCH_CHUNK = 4096;

/** Milliseconds spent in each stage of one planning run. */
export type StageTimings = Record<
  'blocks' | 'distribute' | 'layout' | 'forward' | 'backward' | 'total',
  number
>;

/** FCP's statistics, written to `plan.meta.stats` (read by `fcp plan` and bench/planner.ts). */
export interface FcpStats {
  blocks: number;
  units: number;
  blockSize: { min: number; max: number };
  homeRuns: number;
  tasks: number;
  balance: 'time' | 'pairs';
  computeImbalance: number;
  greedyImbalance: number;
  refineSteps: number;
  /** Mode (a)'s per-phase exchanges applied (placement/phase-swaps.ts); absent when none. */
  phaseSwaps?: number;
  /** Mode (a)'s swaps spreading the cross-node reshuffle over the NICs (placement/nic-swaps.ts); absent when none. */
  nicSwaps?: number;
  memoryAttempts: number;
  maxHomeTokens: number;
  movedTokens: number;
  reshuffleBytes: number;
  forward: PhaseStats;
  backward: PhaseStats;
  /** Communication (all bytes, NIC bytes) and home-token balance of the plan (balance.ts). */
  planBalance: PlanBalance;
}

/** A plan and how long each stage took. */
export interface FcpResult {
  readonly plan: Plan;
  readonly timings: StageTimings;
}

/** Runs named stages and records how long each took. */
export class StageClock {
  private readonly ms = new Map<string, number>();

  run<T>(name: string, stage: () => T): T {
    const t0 = performance.now();
    const out = stage();
    this.ms.set(name, (this.ms.get(name) ?? 0) + performance.now() - t0);
    return out;
  }

  get(name: string): number {
    return this.ms.get(name) ?? 0;
  }
}
/** What one pipeline run returns (the plan, timings, the placement and the planner's own estimate). */
export type PipelineResult = FcpResult & {
  placed: Placed;
  estimateMs: { forward: number; backward: number };
};

/** What the candidates of one tuning share: the placement and the layout, and their stage times. */
export interface Prepared {
  readonly phases: PhaseContext;
  readonly placed: Placed;
  readonly ms: { context: number; place: number; layout: number };
}

/**
 * Stages `context`, `place` and `layout` (none of them reads a phase knob: coalesce, fanOut).
 * `kernel`: a time model to share (built for the problem's model and the options' calibration).
 */
export function prepare(
  problem: Problem,
  options: FcpPlannerOptions,
  homeFromUser: Int32Array | null,
  kernel?: KernelTime,
): Prepared {
  const clock = new StageClock();
  const ctx = clock.run('context', () =>
    plannerContext(problem, resolveFcpOptions(options), kernel, homeFromUser),
  );
  const placed = clock.run('place', () => placeBlocks(ctx));
  const phases = clock.run('layout', () => layoutStage(ctx, placed));
  return {
    phases,
    placed,
    ms: { context: clock.get('context'), place: clock.get('place'), layout: clock.get('layout') },
  };
}

/**
 * Shares of a pipeline's time, for progress: `prepare` of a whole run, `forward` of the phases
 * (mode (a), 4096 ranks, `fcp plan --world 4096` "planning stages": blocks, distribute and
 * layout about 2.0 of 6.7 s, forward 2.5 and backward 2.1 s).
 */
export const PROGRESS_SHARE = { prepare: 0.3, forward: 0.55 } as const;

/**
 * Stages `forward`, `backward` and `assemble` with the phase options `o` over a prepared placement;
 * `first`: this run is charged the shared stages' time (later candidates reuse them for free).
 * `onStage`: the fraction of this call done, after the forward ({@link PROGRESS_SHARE}).
 */
export function runPhases(
  prep: Prepared,
  o: FcpOptions,
  first: boolean,
  onStage?: (fraction: number) => void,
): PipelineResult {
  const clock = new StageClock();
  const { placed } = prep;
  const phases: PhaseContext = { ...prep.phases, o };
  const forward = clock.run('forward', () => planForward(phases));
  onStage?.(PROGRESS_SHARE.forward);
  const backward = clock.run('backward', () => planBackward(forward, phases));
  const plan = clock.run('assemble', () => assemble(phases, placed, forward, backward));
  const shared = first ? prep.ms : { context: 0, place: 0, layout: 0 };
  const split = first ? placed.splitMs : 0;
  const timings: StageTimings = {
    blocks: shared.context + split,
    distribute: shared.place - split,
    layout: shared.layout,
    forward: clock.get('forward'),
    backward: clock.get('backward'),
    total: 0,
  };
  timings.total = timings.blocks + timings.distribute + timings.layout + timings.forward + timings.backward;
  timings.total += clock.get('assemble');
  // Not enumerable: JSON.stringify skips it, so timings never break byte-identical plan files.
  Object.defineProperty(plan.meta, 'timings', { value: timings, enumerable: false });
  const estimateMs = { forward: forward.estimateMs, backward: backward.estimateMs };
  Object.defineProperty(plan.meta, 'estimateMs', { value: estimateMs, enumerable: false });
  return { plan, timings, placed, estimateMs };
}

/**
 * The pipeline with the options as given; `homeFromUser`: mode (b), the user layout is the home
 * layout (context.ts). `onStage`: the fraction of this call done, after each stage but the last.
 */
export function runPipeline(
  problem: Problem,
  options: FcpPlannerOptions,
  homeFromUser: Int32Array | null,
  kernel?: KernelTime,
  onStage?: (fraction: number) => void,
): PipelineResult {
  const prep = prepare(problem, options, homeFromUser, kernel);
  const p = PROGRESS_SHARE.prepare;
  onStage?.(p);
  return runPhases(prep, prep.phases.o, true, progressSpan(onStage, p, 1));
}

/** Stage `layout`: home runs, reshuffle pieces and K/V requests of the placement. */
function layoutStage(ctx: PlannerContext, placed: Placed): PhaseContext {
  const { sequences, mask } = ctx.problem;
  const runs = homeRuns(placed.blocks, placed.placement.blockRank, ctx.world);
  const chunk = ctx.o.tile > 0 ? ctx.o.tile : FETCH_CHUNK;
  const pieces = reshufflePieces(runs, ctx.userRows, chunk);
  return {
    ...ctx,
    runs,
    pieces,
    sequences,
    mask,
    blockSize: placed.blocks.blockSizeOfSeq,
    grid: tileGeometry(ctx.o),
    requests: fetchRequests(runs, ctx.userRows, sequences, mask, chunk),
    memo: new LayoutMemo(),
  };
}

/** Stage `assemble`: the plan file, with FCP's statistics in `meta.stats`. */
function assemble(ctx: PhaseContext, placed: Placed, fwd: ForwardResult, bwd: BackwardResult): Plan {
  const { problem, sequences, world, runs, pieces, o } = ctx;
  const { blocks, placement, attempts } = placed;
  let minBlock = Number.POSITIVE_INFINITY;
  let maxBlock = 0;
  for (let s = 0; s < sequences.length; s++) {
    minBlock = Math.min(minBlock, blocks.blockSizeOfSeq[s]!);
    maxBlock = Math.max(maxBlock, blocks.blockSizeOfSeq[s]!);
  }
  let maxMem = 0;
  for (let r = 0; r < world; r++) maxMem = Math.max(maxMem, placement.memoryLoad[r]!);
  const homeLayout = homeLayoutOf(runs);
  const stats: FcpStats = {
    blocks: blocks.seq.length,
    units: blocks.unitSeq.length,
    blockSize: { min: sequences.length > 0 ? minBlock : 0, max: maxBlock },
    homeRuns: runs.rank.length,
    tasks: fwd.tasks.table.rank.length,
    balance: o.balance,
    computeImbalance: computeImbalance(placement.computeLoad),
    greedyImbalance: placement.greedyImbalance,
    refineSteps: placement.refineSteps,
    // Recorded only when some were applied, so other plans keep their bytes.
    ...(placed.phaseSwaps !== undefined ? { phaseSwaps: placed.phaseSwaps } : {}),
    ...(placed.nicSwaps !== undefined ? { nicSwaps: placed.nicSwaps } : {}),
    memoryAttempts: attempts,
    maxHomeTokens: maxMem,
    movedTokens: movedTokens(pieces),
    reshuffleBytes: reshuffleBytes(pieces, problem.model),
    forward: fwd.stats,
    backward: bwd.stats,
    planBalance: planBalance(
      [
        { phase: fwd.phase, forward: true },
        { phase: bwd.phase, forward: false },
      ],
      homeLayout,
      world,
      problem.model,
      ctx.links.nodeSize,
    ),
  };
  return {
    format: PLAN_FORMAT,
    strategy: 'fcp',
    world,
    mask: ctx.mask,
    model: { ...problem.model },
    sequences,
    userLayout: problem.userLayout,
    homeLayout,
    tasks: fwd.tasks.table,
    forward: fwd.phase,
    backward: bwd.phase,
    meta: {
      planner: 'fcp',
      options: optionsToJson(o),
      stats,
      // The NCCL routing the plan was made for, recorded only when it is not the default (direct),
      // so other plans keep their bytes: `fcp simulate` says when it simulates another one.
      ...(problem.cluster.routing !== 'direct' ? { routing: problem.cluster.routing } : {}),
      // Likewise the network model, when not the default (fluid): contention changes the estimates.
      ...(problem.cluster.network !== 'fluid' ? { network: problem.cluster.network } : {}),
      // Likewise the node size, when not the default (8): the report's NIC and NVLink port
      // congestion count for it (plan/report-nic.ts).
      ...(problem.gpusPerNode !== 8 ? { gpusPerNode: problem.gpusPerNode } : {}),
    },
  };
}

/**
 * The one context object the FCP pipeline (index.ts) threads through its stages. It grows by
 * stage: {@link PlannerContext} holds the inputs every stage reads (problem, options, the kernel
 * time model, the cluster's links); the layout stage adds the home layout and what follows from it
 * ({@link PhaseContext}), which both phases read.
 */
import type { ModelShape } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { KernelTime } from './kernel-time.ts';
import type { LayoutMemo } from './layout-memo.ts';
import type { FcpOptions } from './options.ts';
import { rowsBySeq, type SeqRows } from './placement/layout.ts';
import type { TaskContext } from './tasks.ts';
import type { FetchRequests } from './transfers/fetch-requests.ts';
import { type LinkModel, linkModel } from './transfers/links.ts';

/** What every stage reads: the problem and the models derived from it once. */
export interface PlannerContext {
  readonly problem: Problem;
  readonly world: number;
  readonly model: ModelShape;
  readonly o: FcpOptions;
  /** Modelled kernel time of task shapes (placement weights, tile choice, op order). */
  readonly kernel: KernelTime;
  /** The cluster's links as the planner's estimates use them. */
  readonly links: LinkModel;
  /** The user layout's rows by sequence. */
  readonly userRows: SeqRows;
  /**
   * Mode (b), the loader layout: the user layout is the home layout (no placement, no reshuffle)
   * and these are the sequences' block sizes (the tile grid); null: FCP places the blocks.
   */
  readonly homeFromUser: Int32Array | null;
}

/** What both phases read: the inputs, the home layout, the reshuffle pieces and the K/V requests. */
export interface PhaseContext extends PlannerContext, TaskContext {
  /** Remote K/V each rank-sequence pair needs. */
  readonly requests: FetchRequests;
  /** What the self-tuner's candidates share of this layout beyond it (layout-memo.ts). */
  readonly memo: LayoutMemo;
}

/**
 * Stage `context`: the inputs every later stage reads. `kernel` may be passed to share one memoised
 * time model between runs (tests, benches); it must be built for the problem's model.
 */
export function plannerContext(
  problem: Problem,
  o: FcpOptions,
  kernel?: KernelTime,
  homeFromUser: Int32Array | null = null,
): PlannerContext {
  return {
    problem,
    world: problem.world,
    model: problem.model,
    o,
    kernel: kernel ?? new KernelTime(problem.model, o.calibration),
    links: linkModel(problem.cluster, problem.gpusPerNode),
    userRows: rowsBySeq(problem.userLayout, problem.sequences.length),
    homeFromUser,
  };
}

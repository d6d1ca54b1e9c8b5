/**
 * The FCP planner (DESIGN.md, components 1-4), stage by stage:
 *
 *   place.ts       blocks, weights and distribution, retried with smaller blocks when memory is tight
 *   blocks.ts      split + zig-zag pairing into placement units (per-sequence block size)
 *   weights.ts     compute load of blocks: modelled kernel time (time-model.ts) or pairs
 *   distribute.ts  multi-dimensional LPT with affinity and the locality tie-break, refinement
 *   layout.ts      home runs (the home layout) and rank-sequence pairs
 *   reshuffle.ts   pieces where user and home layouts meet: the `in`/`out` transfers
 *   fetch.ts       remote K/V each rank needs; sender choice
 *   rounds.ts      congestion-free rounds (exactly Δ for `kv`), round order
 *   pipeline.ts    groups of `coalesce` rounds, compute ops, phase tables
 *   grid.ts        tile geometry: squares on each sequence's block grid
 *   grid-tasks.ts  owner-computes tasks as grid tiles, each with its ready group
 *   tasks.ts       untiled tasks (`tile: 0`) and the key pieces both builders read
 *   forward.ts / backward.ts   the two phases
 *
 * Same problem and options give a byte-identical plan: every stage is deterministic (ties broken
 * by ids) and nothing reads the clock except the stage timings, which are attached to `meta` as a
 * non-enumerable property so that they never reach the plan file.
 */

import { PLAN_FORMAT, type Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { planBackward } from './backward.ts';
import { computeImbalance } from './distribute.ts';
import { fetchRequests } from './fetch.ts';
import { type PhaseStats, planForward } from './forward.ts';
import { homeLayoutOf, homeRuns, rowsBySeq } from './layout.ts';
import { linkModel } from './links.ts';
import { type FcpPlannerOptions, optionsToJson, resolveFcpOptions } from './options.ts';
import { placeBlocks, tileGeometry } from './place.ts';
import { movedTokens, reshuffleBytes, reshufflePieces } from './reshuffle.ts';
import { TimeModel } from './time-model.ts';

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
  memoryAttempts: number;
  maxHomeTokens: number;
  movedTokens: number;
  reshuffleBytes: number;
  forward: PhaseStats;
  backward: PhaseStats;
}

/** A plan and how long each stage took. */
export interface FcpResult {
  readonly plan: Plan;
  readonly timings: StageTimings;
}

/** Plans `problem` with FCP; returns the plan and the stage timings. */
export function planFcp(problem: Problem, options: FcpPlannerOptions = {}): FcpResult {
  const o = resolveFcpOptions(options);
  const { sequences, world, mask } = problem;
  const t0 = performance.now();
  const tm = new TimeModel(problem.model, o.calibration);
  const links = linkModel(problem.cluster, problem.gpusPerNode);
  const userRows = rowsBySeq(problem.userLayout, sequences.length);
  const { blocks, placement, attempts, splitMs } = placeBlocks(problem, o, tm, userRows, links.nodeSize);
  const t1 = t0 + splitMs;
  const t2 = performance.now();
  const runs = homeRuns(blocks, placement.blockRank, world);
  const chunk = o.tile > 0 ? o.tile : FETCH_CHUNK;
  const pieces = reshufflePieces(runs, userRows, chunk);
  const grid = tileGeometry(o);
  const ctx = { runs, userRows, pieces, sequences, mask, blockSize: blocks.blockSizeOfSeq, grid };
  const req = fetchRequests(runs, userRows, sequences, mask, chunk);
  const t3 = performance.now();
  const env = { tm, model: problem.model, links };
  const fwd = planForward(ctx, req, world, o, env);
  const t4 = performance.now();
  const bwd = planBackward(ctx, fwd.kvEdges, fwd.kvColouring, fwd.tasks, fwd.inColouring, world, o, env);
  const t5 = performance.now();

  let minBlock = Number.POSITIVE_INFINITY;
  let maxBlock = 0;
  for (let s = 0; s < sequences.length; s++) {
    minBlock = Math.min(minBlock, blocks.blockSizeOfSeq[s]!);
    maxBlock = Math.max(maxBlock, blocks.blockSizeOfSeq[s]!);
  }
  let maxMem = 0;
  for (let r = 0; r < world; r++) maxMem = Math.max(maxMem, placement.memoryLoad[r]!);
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
    memoryAttempts: attempts,
    maxHomeTokens: maxMem,
    movedTokens: movedTokens(pieces),
    reshuffleBytes: reshuffleBytes(pieces, problem.model),
    forward: fwd.stats,
    backward: bwd.stats,
  };
  const meta: Record<string, unknown> = {
    planner: 'fcp',
    options: optionsToJson(o),
    stats,
  };
  const timings: StageTimings = {
    blocks: t1 - t0,
    distribute: t2 - t1,
    layout: t3 - t2,
    forward: t4 - t3,
    backward: t5 - t4,
    total: t5 - t0,
  };
  // Not enumerable: JSON.stringify skips it, so timings never break byte-identical plan files.
  Object.defineProperty(meta, 'timings', { value: timings, enumerable: false });
  const plan: Plan = {
    format: PLAN_FORMAT,
    strategy: 'fcp',
    world,
    mask,
    model: { ...problem.model },
    sequences,
    userLayout: problem.userLayout,
    homeLayout: homeLayoutOf(runs),
    tasks: fwd.tasks.table,
    forward: fwd.phase,
    backward: bwd.phase,
    meta,
  };
  return { plan, timings };
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
 * `loaderLayout`: plan once from the user's layout to find FCP's home layout, then plan again with
 * that layout as the input, as if the data loader had delivered it (what ring, ByteScale and
 * MagiAttention assume for their own layouts). The locality tie-break keeps the second placement
 * on the first, so almost nothing is reshuffled; whatever still moves is planned and charged.
 */
function planForLoaderLayout(problem: Problem, options: PlannerOptions): Plan {
  const rest: PlannerOptions = { ...options };
  delete rest.loaderLayout;
  const first = planFcp(problem, rest).plan;
  const plan = planFcp({ ...problem, userLayout: first.homeLayout }, rest).plan;
  const timings = (plan.meta as { timings?: unknown } | undefined)?.timings;
  plan.meta = { ...plan.meta, loaderLayout: true };
  if (timings !== undefined)
    Object.defineProperty(plan.meta, 'timings', { value: timings, enumerable: false });
  return plan;
}

/**
 * The planner interface. A planner is a pure function of a {@link Problem} and its options that
 * returns an `fcp-plan/1` plan; same inputs and seed give the same plan, byte for byte.
 */

import type { Calibration } from '../cost/calibration.ts';
import type { Plan } from '../plan/types.ts';
import type { Problem } from '../problem/problem.ts';

/**
 * Options understood by the planners. Every planner receives the same bag and reads the fields it
 * knows; each fills its defaults and validates them in its own `resolveOptions`.
 */
export interface PlannerOptions {
  /** fcp: tokens per block (default 4096). */
  blockSize?: number;
  /** fcp: load tolerance of the locality tie-break, as a fraction (default 0.01). */
  tolerance?: number;
  /** fcp: consecutive rounds merged into one group (default 16). */
  coalesce?: number;
  /** fcp: rounds sharing one concurrent transfer call; a group's comm groups are chained (default 16). */
  commCoalesce?: number;
  /** fcp: rounds a group of the backward's pushes after its last fetch group may hold (default 16; at most commCoalesce). */
  pushCoalesce?: number;
  /** fcp ablation: all fetches complete before any compute. */
  noPipeline?: boolean;
  /** fcp ablation: `matching` (congestion-free, default) or `naive` (each rank receives one fetch per round, senders uncoordinated). */
  rounds?: 'matching' | 'naive';
  /** fcp ablation: no compute while the reshuffle is in flight. */
  noReshuffleOverlap?: boolean;
  /** fcp ablation: mode (a)'s backward keeps its pushes on the one comm stream (Phase.pushStream). */
  noPushStream?: boolean;
  /** fcp ablation: no locality-aware tie-break. */
  noLocality?: boolean;
  /** fcp: disable the granularity refinement (fixed blocks only). */
  fixedBlocks?: boolean;
  /** fcp: side of the square tiles tasks are cut into for dense kernels (default 4096; 0: none). */
  tile?: number;
  /** fcp: smallest tile side for the remainder strips (default 1024). */
  minTile?: number;
  /** fcp: balance modelled kernel time (`time`, default) or attended pairs (`pairs`). */
  balance?: 'time' | 'pairs';
  /**
   * fcp: the kernel calibration its time model plans with (default: the shipped H200 tables). No
   * flag of its own: `fcp plan --calibration` and `fcp compare --calibration` pass the tables the
   * plan is simulated with, so that FCP plans for the kernels it is measured on.
   */
  calibration?: Calibration;
  /**
   * fcp: assume the data loader delivers the batch already in FCP's home layout (the assumption the
   * baselines make for their own layouts), so no `in`/`out` reshuffle is planned. Default false.
   */
  loaderLayout?: boolean;
  /**
   * Called with the fraction of the planning done, in [0, 1], as a planner gets through its work
   * (fcp does; the others plan in well under a second): a runtime hook for progress lines, never a
   * command-line option, and it changes nothing in the plan.
   */
  onProgress?: (fraction: number) => void;
  /** magi: chunk size in tokens (default total / (8N)). */
  chunkSize?: number;
  /** magi: number of overlap stages (default 2). */
  overlapDegree?: number;
  /**
   * magi: hide the last dK/dV reduce behind the host stage (`MAGI_ATTENTION_BWD_HIDE_TAIL_REDUCE`:
   * the backward runs the remote stages first and the host stage last). Default false.
   */
  hideTailReduce?: boolean;
  /**
   * magi: group-collective backend. `a2av` (default): NCCL all-to-all-v, one copy per destination
   * rank. `native`: one inter-node copy per destination node, fanned out over NVLink inside it.
   */
  magiBackend?: 'a2av' | 'native';
  /**
   * ring: TransformerEngine `cp_comm_type`. `p2p` (default): one ring over all ranks.
   * `a2a+p2p`: all-to-all over heads inside groups of `a2aDegree` ranks, ring across them.
   * `all_gather`: all-gather of K/V, reduce-scatter of dK/dV.
   */
  ringVariant?: 'p2p' | 'a2a+p2p' | 'all_gather';
  /** ring `a2a+p2p`: ranks of one all-to-all group (default: GPUs per node); must divide the heads. */
  a2aDegree?: number;
  /**
   * ring `a2a+p2p`: sequences whose 2N-way parts hold at least this many tokens are split among the
   * ranks of an a2a group; shorter ones go whole to one of them (default 1: every sequence is
   * split, as TransformerEngine does; larger values are a non-TE ablation, see variants.ts).
   */
  a2aSplitTokens?: number;
  /** bytescale: group size of a long sequence by `memory` (ceil(L/C), default) or by its `work` share. */
  bytescaleSizing?: 'memory' | 'work';
  /** bytescale: balance whole sequences by `tokens` (default) or by attention `work` within memory. */
  bytescalePacking?: 'tokens' | 'work';
  /** bytescale: round group sizes up to a power of two (Megatron dynamic CP). Default false. */
  bytescalePow2?: boolean;
  /**
   * wlb: its per-document candidate: TE's `p2p` ring (default) or WLB-LLM's `all_gather` of K/V with
   * an unpadded split.
   */
  wlbPerDocument?: 'p2p' | 'all_gather';
}

/** A strategy that turns a problem into a plan. */
export interface Planner {
  /** Registry name, e.g. `fcp`, `ring`. */
  readonly name: string;
  /** One line for `fcp plan --list`. */
  readonly description: string;
  /** Plans the problem. Throws FcpError for options it cannot honour. */
  plan(problem: Problem, options?: PlannerOptions): Plan;
}

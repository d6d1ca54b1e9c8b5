/**
 * A rough timeline of a phase, for placing pushes (`out`, `dkv`): a push may start only after the
 * compute op that produces it (`sendAfter`), and a group completes on a rank only when all its
 * transfers there are done, so a push placed in a group that starts before its op ends holds that
 * group, and every later group of the ranks it talks to, until the op ends. Placing each push in
 * the first group expected to start after its op ends keeps the transfers flowing while the
 * results still leave as early as they can (placed after every transfer instead, the backward's
 * dK/dV partials all queued behind the last op: a 60 ms tail at 64 ranks).
 *
 * The model: groups in lockstep; a rank's group takes its bytes over the cluster's links (links.ts:
 * NVLink inside a node, the NIC across) plus one latency per comm group, or as long as its busiest
 * partner in the group takes (a transfer shares both ends' links); compute ops in table order per rank,
 * each after its group, taking the time model's kernel time of its tasks. The estimate only has to
 * order ops against groups; the simulator (src/executors/sim) is what measures a plan.
 */

import type { Direction } from '../../../cost/kernel.ts';
import { kvBytesPerToken, qBytesPerToken } from '../../../model/attention.ts';
import { type ComputeTable, Kind, type ModelShape, type TaskTable } from '../../../plan/types.ts';
import type { KernelTime } from '../kernel-time.ts';
import type { GroupPlacer, TransferList } from './groups.ts';
import { interPortMs, type LinkModel } from './links.ts';

/** Per-op launch overhead, ms. */
const LAUNCH_MS = 0.05;

/** What the estimate reads besides the phase. */
export interface TimelineContext {
  readonly world: number;
  /** The cluster's links (links.ts): node size, bandwidths, latency, compute slowdown. */
  readonly links: LinkModel;
  readonly model: ModelShape;
  readonly causal: boolean;
  readonly dir: Direction;
  readonly tm: KernelTime;
}

/** Estimated times (ms): per group and rank (index g * world + r), and per compute op. */
export interface Timeline {
  readonly world: number;
  readonly groups: number;
  /** When rank r enters group g (g * world + r). */
  readonly groupStart: Float64Array;
  /** When group g completes on rank r. */
  readonly groupEnd: Float64Array;
  readonly opEnd: Float64Array;
  /** Mean op duration, ms. */
  readonly meanOpMs: number;
  /**
   * Per op, the latest `after` of it and of every op before it on its rank: a push after the op
   * must lie in a later group (plan rule 5).
   */
  readonly afterUpTo: Int32Array;
}

/** Bytes per token of a transfer kind (as the simulator counts them). */
export function tokenBytes(m: ModelShape, kind: number, forward: boolean): number {
  const q = qBytesPerToken(m);
  const kv = kvBytesPerToken(m);
  if (kind === Kind.in) return forward ? q + kv : q;
  if (kind === Kind.out) return forward ? q : q + kv;
  return kv;
}

/**
 * Estimated entry and completion (ms) of every group on every rank, for the groups placed so far:
 * a rank enters group g when it completed g - 1 and so did the ranks it exchanges with in g (a
 * transfer needs both ends), and stays as long as its own bytes take on its links.
 */
export function estimateGroups(
  ctx: TimelineContext,
  placer: GroupPlacer,
  list: TransferList,
): { groupStart: Float64Array; groupEnd: Float64Array; groups: number } {
  const W = ctx.world;
  const { nodeSize: gpn, intraBytesPerMs, groupLatencyMs } = ctx.links;
  const G = placer.groups;
  const fwd = ctx.dir === 'forward';
  // Comm groups of one group run one after another: a rank's time in a group is the sum over its
  // comm groups of their bytes over its links plus one latency each (one comm group when not chained).
  const C = placer.commPerGroup;
  // Per comm group of the current group and rank: inter-node send, receive; intra-node send, receive (bytes).
  const load = new Float64Array(C * W * 4);
  // Per comm group and rank: inter-node flows sent, received (the contention model charges them).
  const flows = new Int32Array(C * W * 2);
  // Transfers by group (counting sort) for the partner coupling and the per-group loads.
  const byGroup = new Int32Array(list.size);
  const gOff = new Int32Array(G + 1);
  for (let i = 0; i < list.size; i++) gOff[placer.groupOf(list.field(i, 0)) + 1]!++;
  for (let g = 0; g < G; g++) gOff[g + 1]! += gOff[g]!;
  const fill = gOff.slice(0, G);
  for (let i = 0; i < list.size; i++) byGroup[fill[placer.groupOf(list.field(i, 0))]!++] = i;
  const groupStart = new Float64Array(G * W);
  const groupEnd = new Float64Array(G * W);
  const prev = new Float64Array(W);
  const enter = new Float64Array(W);
  const busy = new Float64Array(W);
  const done = new Float64Array(W);
  for (let g = 0; g < G; g++) {
    enter.set(prev);
    load.fill(0);
    flows.fill(0);
    for (let k = gOff[g]!; k < gOff[g + 1]!; k++) {
      const i = byGroup[k]!;
      const s = list.field(i, 1);
      const d = list.field(i, 2);
      const c = placer.commOf(list.field(i, 0));
      const bytes = list.field(i, 6) * tokenBytes(ctx.model, list.field(i, 3), fwd);
      const intra = Math.floor(s / gpn) === Math.floor(d / gpn) ? 2 : 0;
      load[(c * W + s) * 4 + intra]! += bytes;
      load[(c * W + d) * 4 + intra + 1]! += bytes;
      if (intra === 0) {
        flows[(c * W + s) * 2]!++;
        flows[(c * W + d) * 2 + 1]!++;
      }
      const t = Math.max(prev[s]!, prev[d]!);
      if (t > enter[s]!) enter[s] = t;
      if (t > enter[d]!) enter[d] = t;
    }
    for (let r = 0; r < W; r++) {
      let busyMs = 0;
      for (let c = 0; c < C; c++) {
        const o = (c * W + r) * 4;
        const f = (c * W + r) * 2;
        const inter = Math.max(
          interPortMs(ctx.links, flows[f]!, load[o]!),
          interPortMs(ctx.links, flows[f + 1]!, load[o + 1]!),
        );
        const intra = Math.max(load[o + 2]!, load[o + 3]!) / intraBytesPerMs;
        if (inter > 0 || intra > 0) busyMs += Math.max(inter, intra) + groupLatencyMs;
      }
      busy[r] = busyMs;
    }
    // A transfer shares both ends' links: it ends no earlier than the busier end, so a rank's
    // group ends when its slowest partner is done (a receiver of a sender with many flows in the
    // group waits for the sender's whole group, not only for its own bytes).
    done.set(busy);
    for (let k = gOff[g]!; k < gOff[g + 1]!; k++) {
      const i = byGroup[k]!;
      const s = list.field(i, 1);
      const d = list.field(i, 2);
      const t = Math.max(busy[s]!, busy[d]!);
      if (t > done[s]!) done[s] = t;
      if (t > done[d]!) done[d] = t;
    }
    for (let r = 0; r < W; r++) {
      groupStart[g * W + r] = enter[r]!;
      prev[r] = enter[r]! + done[r]!;
      groupEnd[g * W + r] = prev[r]!;
    }
  }
  return { groupStart, groupEnd, groups: G };
}

/** Estimated kernel time (ms, compute slowdown included) of every task in the context's direction. */
export function taskTimes(ctx: TimelineContext, tasks: TaskTable): Float64Array {
  const n = tasks.rank.length;
  const out = new Float64Array(n);
  const slowdown = ctx.links.computeSlowdown;
  for (let i = 0; i < n; i++)
    out[i] =
      ctx.tm.taskMs(
        ctx.dir,
        ctx.causal,
        tasks.qStart[i]!,
        tasks.qLength[i]!,
        tasks.kvStart[i]!,
        tasks.kvLength[i]!,
      ) * slowdown;
  return out;
}

/** Estimates the timeline: the groups placed so far, then the compute ops in table order per rank. */
export function estimateTimeline(
  ctx: TimelineContext,
  placer: GroupPlacer,
  list: TransferList,
  compute: ComputeTable,
  taskMs: Float64Array,
): Timeline {
  const { groupStart, groupEnd, groups: G } = estimateGroups(ctx, placer, list);
  const W = ctx.world;
  const ops = compute.rank.length;
  const opEnd = new Float64Array(ops);
  const rankEnd = new Float64Array(ctx.world);
  const rankAfter = new Int32Array(ctx.world).fill(-1);
  const afterUpTo = new Int32Array(ops);
  let total = 0;
  for (let op = 0; op < ops; op++) {
    let dur = LAUNCH_MS;
    for (let k = compute.taskOffsets[op]!; k < compute.taskOffsets[op + 1]!; k++)
      dur += taskMs[compute.taskIds[k]!]!;
    const r = compute.rank[op]!;
    const a = compute.after[op]!;
    rankAfter[r] = Math.max(rankAfter[r]!, a);
    afterUpTo[op] = rankAfter[r]!;
    const start = Math.max(rankEnd[r]!, a >= 0 && a < G ? groupEnd[a * W + r]! : 0);
    rankEnd[r] = start + dur;
    opEnd[op] = rankEnd[r]!;
    total += dur;
  }
  return { world: W, groups: G, groupStart, groupEnd, opEnd, meanOpMs: ops > 0 ? total / ops : 0, afterUpTo };
}

/**
 * The group a push from `rank` produced by an op ending at `end` should join: the first group, not
 * before `minGroup`, that the rank is expected to enter after `end`; past the last group, one new
 * group per `slice` ms of the estimated time beyond the rank's last group (the placer opens them
 * in order).
 */
export function pushGroup(tl: Timeline, rank: number, end: number, minGroup: number, slice: number): number {
  const { groups: G, world: W } = tl;
  let lo = Math.max(0, minGroup);
  let hi = G;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (tl.groupStart[mid * W + rank]! >= end) hi = mid;
    else lo = mid + 1;
  }
  if (lo < G) return lo;
  const last = G > 0 ? tl.groupEnd[(G - 1) * W + rank]! : 0;
  return Math.max(G, minGroup) + Math.max(0, Math.ceil((end - last) / Math.max(slice, 1e-6)));
}

/**
 * The estimate's makespan of a finished phase (ms): the latest end of a compute op or of a rank's
 * last group. The self-tuner (index.ts) compares candidate plans by it.
 */
export function phaseEstimateMs(tl: Timeline): number {
  let end = 0;
  for (let op = 0; op < tl.opEnd.length; op++) end = Math.max(end, tl.opEnd[op]!);
  if (tl.groups > 0)
    for (let r = 0; r < tl.world; r++) end = Math.max(end, tl.groupEnd[(tl.groups - 1) * tl.world + r]!);
  return end;
}

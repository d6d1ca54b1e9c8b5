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

import { sameNode } from '../../../core/nodes.ts';
import type { Direction } from '../../../cost/kernel.ts';
import { kvBytesPerToken, qBytesPerToken } from '../../../model/attention.ts';
import { pxnNic } from '../../../plan/report-nic.ts';
import { type ComputeTable, Kind, type ModelShape, type TaskTable } from '../../../plan/types.ts';
import type { KernelTime } from '../kernel-time.ts';
import type { GroupPlacer } from './groups.ts';
import { interPortMs, type LinkModel } from './links.ts';
import { ROWS, type TransferList } from './transfer-list.ts';

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

/** What {@link estimateGroups} returns. */
export interface GroupEstimate {
  readonly groupStart: Float64Array;
  readonly groupEnd: Float64Array;
  readonly groups: number;
}

/**
 * The last estimate of each transfer list, with what it was made from: the phases ask for the same
 * estimate twice in a row (the op order, then the push placement, with no transfer placed between),
 * and at 4096 ranks one estimate reads over a million rows. Keyed weakly by the list, so it lives
 * as long as the phase does; reused only when the placer, the context and the list's and placer's
 * sizes are the same (lists and placers only grow, and a placed slot never changes group).
 */
const lastEstimate = new WeakMap<
  TransferList,
  { placer: GroupPlacer; ctx: TimelineContext; size: number; slots: number; out: GroupEstimate }
>();

/**
 * Estimated entry and completion (ms) of every group on every rank, for the groups placed so far:
 * a rank enters group g when it completed g - 1 and so did the ranks it exchanges with in g (a
 * transfer needs both ends), and stays as long as its own bytes take on its links. The arrays
 * returned are shared with later calls on the same list: read them, never write them.
 */
export function estimateGroups(ctx: TimelineContext, placer: GroupPlacer, list: TransferList): GroupEstimate {
  const memo = lastEstimate.get(list);
  const G = placer.groups;
  if (
    memo !== undefined &&
    memo.placer === placer &&
    memo.ctx === ctx &&
    memo.size === list.size &&
    memo.slots === placer.slots &&
    memo.out.groups === G
  )
    return memo.out;
  const W = ctx.world;
  const { nodeSize: gpn, intraBytesPerMs, groupLatencyMs } = ctx.links;
  const fwd = ctx.dir === 'forward';
  // Comm groups of one group run one after another: a rank's time in a group is the sum over its
  // comm groups of their bytes over its links plus one latency each (one comm group when not chained).
  const C = placer.commPerGroup;
  const n = list.size;
  // Group and comm group of every slot, and bytes per token of every kind, looked up once.
  const S = placer.slots;
  const slotGroup = new Int32Array(S);
  const slotComm = new Int32Array(S);
  for (let slot = 0; slot < S; slot++) {
    slotGroup[slot] = placer.groupOf(slot);
    slotComm[slot] = placer.commOf(slot);
  }
  const kindBytes = new Float64Array(4);
  for (let k = 0; k < 4; k++) kindBytes[k] = tokenBytes(ctx.model, k, fwd);
  // The transfers packed by group (a stable counting sort; one sequential pass over the list's
  // rows): ends, comm group, whether they cross nodes, bytes. The group loop below then reads
  // these in order instead of the list's 7-int rows at random (the estimate was a fifth of
  // planning time at 4096 ranks, bench/planner.ts profile). Same transfers in the same order per
  // group as before, so the same float sums.
  const gOff = new Int32Array(G + 1);
  for (let c = 0, i = 0; i < n; c++) {
    const d = list.chunk(c);
    const end = Math.min(n, i + ROWS);
    for (let o = 0; i < end; i++, o += 7) gOff[slotGroup[d[o]!]! + 1]!++;
  }
  for (let g = 0; g < G; g++) gOff[g + 1]! += gOff[g]!;
  const fill = gOff.slice(0, G);
  const pS = new Int32Array(n);
  const pD = new Int32Array(n);
  // The rank whose NIC a transfer across nodes leaves by: its sender, or under PXN the sender
  // node's GPU on the receiver's rail, which the sender reaches over NVLink (charged to both). With
  // every send charged to its sender's own NIC, the estimate saw a node's ranks sending to one
  // rail of other nodes as spread over their NICs, and the self-tuner and the push placement
  // chose by it (simulated, mode (a) under PXN, B - A of MFU, forward / backward: hopper-ib fluid
  // 16 / 32 ranks seeds 1-4 +0.0064 ± 0.0032 / +0.0014 ± 0.0010, held-out seeds 7-12 +0.0119 ±
  // 0.0038 / +0.0020 ± 0.0013, 64 / 128 / 256 seeds 1-2 +0.0065 ± 0.0023 / +0.0033 ± 0.0021;
  // contention 16 / 32 +0.0063 ± 0.0027 / +0.0014 ± 0.0012; ratio-5920 +0.0008 ± 0.0011 / -0.0000;
  // mode (b) +0.0008 ± 0.0035 / +0.0013 ± 0.0007; docs/results.md, "Session 26").
  const pxn = ctx.links.pxn;
  const pP = new Int32Array(n);
  // Comm group * 2 + (1 when the transfer stays inside a node).
  const pCI = new Int32Array(n);
  const pBytes = new Float64Array(n);
  for (let c = 0, i = 0; i < n; c++) {
    const d = list.chunk(c);
    const end = Math.min(n, i + ROWS);
    for (let o = 0; i < end; i++, o += 7) {
      const slot = d[o]!;
      const k = fill[slotGroup[slot]!]!++;
      const s = d[o + 1]!;
      const t = d[o + 2]!;
      pS[k] = s;
      pD[k] = t;
      const inside = sameNode(s, t, gpn);
      // A message inside a node is sent by its sender over NVLink whatever the routing (charging
      // it to pxnNic, its receiver there, put the sender's NVLink load on the receiver: simulated,
      // `--routing pxn`, fixed minus not, fwd / bwd MFU: 16 / 32 ranks +0.0000 / 0.0000 (24
      // batches), 64-256 -0.0002 ± 0.0002 / 0.0000 (18), mode (b) 32 / 128 0.0000 (12)).
      pP[k] = pxn && !inside ? pxnNic(s, t, gpn, W) : s;
      pCI[k] = slotComm[slot]! * 2 + (inside ? 1 : 0);
      pBytes[k] = d[o + 6]! * kindBytes[d[o + 3]!]!;
    }
  }
  // Per comm group of the current group and rank: inter-node send, receive; intra-node send, receive (bytes).
  const load = new Float64Array(C * W * 4);
  // Per comm group and rank: inter-node flows sent, received (the contention model charges them).
  const flows = new Int32Array(C * W * 2);
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
    const k0 = gOff[g]!;
    const k1 = gOff[g + 1]!;
    for (let k = k0; k < k1; k++) {
      const s = pS[k]!;
      const d = pD[k]!;
      const ci = pCI[k]!;
      const c = ci >> 1;
      const intra = (ci & 1) * 2;
      const bytes = pBytes[k]!;
      const p = pP[k]!;
      load[(c * W + p) * 4 + intra]! += bytes;
      load[(c * W + d) * 4 + intra + 1]! += bytes;
      if (intra === 0) {
        flows[(c * W + p) * 2]!++;
        flows[(c * W + d) * 2 + 1]!++;
        if (p !== s) {
          // Under PXN: the NVLink hop to the proxy.
          load[(c * W + s) * 4 + 2]! += bytes;
          load[(c * W + p) * 4 + 3]! += bytes;
        }
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
    for (let k = k0; k < k1; k++) {
      const s = pS[k]!;
      const d = pD[k]!;
      const t = Math.max(busy[s]!, busy[d]!, busy[pP[k]!]!);
      if (t > done[s]!) done[s] = t;
      if (t > done[d]!) done[d] = t;
    }
    for (let r = 0; r < W; r++) {
      groupStart[g * W + r] = enter[r]!;
      prev[r] = enter[r]! + done[r]!;
      groupEnd[g * W + r] = prev[r]!;
    }
  }
  const out = { groupStart, groupEnd, groups: G };
  lastEstimate.set(list, { placer, ctx, size: n, slots: S, out });
  return out;
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

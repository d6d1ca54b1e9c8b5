/**
 * The forward phase: `in` reshuffle rounds, `kv` fetch rounds, the tasks and their compute ops,
 * and the `out` pushes of O back to the user ranks.
 *
 * Order of placement (pipeline.ts places each round in the earliest group it may join):
 * 1. `in` rounds (Q,K,V user -> home), ready at once.
 * 2. `kv` rounds, exactly Δ of them (one colouring of the whole kv graph). A round is ready when
 *    its senders hold their ranges: at once for user-rank senders, one group after the `in` that
 *    brings the range to a home sender. Rounds are ordered by that, then by how many receivers with
 *    little local work they feed (every rank should get work early).
 * 3. Compute: the grid tiles (grid-tasks.ts), each ready after the group that completes its data,
 *    ordered per rank by order.ts: local work while the first data is on its way, exporting work
 *    as it arrives (queries in position order) in short ops, local work at the end. Ablations:
 *    `noReshuffleOverlap` holds every op until the last `in` group; `noPipeline` makes one op per
 *    rank after the last `in`/`kv` group.
 * 4. `out` pushes (O home -> user), each after the last op writing its rows (`sendAfter`), in the
 *    first group its rank is expected to enter after that op ends (timing.ts), filling gaps of the
 *    rounds already placed.
 */

import { IntColumn } from '../../core/int-column.ts';
import type { Direction } from '../../cost/kernel.ts';
import type { ComputeTable, ModelShape, Phase } from '../../plan/types.ts';
import { Kind } from '../../plan/types.ts';
import { chooseSenders, type FetchRequests, type KvEdges } from './fetch.ts';
import { buildGridTasks } from './grid-tasks.ts';
import type { LinkModel } from './links.ts';
import type { FcpOptions } from './options.ts';
import { orderOps } from './order.ts';
import { addOutPushes, buildOps, finishPhase, GroupPlacer, TransferList } from './pipeline.ts';
import { type Colouring, colourEdges, orderRounds, placeColouring, placePushes } from './rounds.ts';
import { buildTasks, edgesByRs, exportFlags, type TaskContext, type Tasks } from './tasks.ts';
import type { TimeModel } from './time-model.ts';
import { estimateGroups, estimateTimeline, pushGroup, type TimingContext, taskTimes } from './timing.ts';

/** Per-phase statistics recorded in the plan's meta. */
export interface PhaseStats {
  rounds: Record<string, number>;
  delta: Record<string, number>;
  transfers: Record<string, number>;
  groups: number;
  ops: number;
}

/** Result of {@link planForward}. */
export interface ForwardResult {
  readonly phase: Phase;
  readonly tasks: Tasks;
  readonly inColouring: Colouring;
  readonly kvEdges: KvEdges;
  readonly kvColouring: Colouring;
  readonly stats: PhaseStats;
}

/** Bytes of a forward `in` token (Q,K,V) over those of a `kv` token (K,V), for the default model. */
const IN_WEIGHT = 5;

/** The timing estimate's view of a phase. */
export function timingContext(ctx: TaskContext, world: number, env: PhaseEnv, dir: Direction): TimingContext {
  return {
    world,
    links: env.links,
    model: env.model,
    causal: ctx.mask === 'causal',
    dir,
    tm: env.tm,
  };
}

/**
 * Weight of a transfer to `dst` for the round order: receivers with little work present from the
 * start weigh most (1 for none, 1/2 for a rank's share).
 */
export function hunger(ctx: TaskContext, world: number): Float64Array {
  const { pieces } = ctx;
  const local = new Float64Array(world);
  let total = 0;
  for (let p = 0; p < pieces.seq.length; p++) {
    total += pieces.length[p]!;
    if (pieces.user[p] === pieces.home[p]) local[pieces.home[p]!]! += pieces.length[p]!;
  }
  const share = total / world || 1;
  const out = new Float64Array(world);
  for (let r = 0; r < world; r++) out[r] = 1 / (1 + local[r]! / share);
  return out;
}

/** Places the `kv` edges (one colouring, Δ rounds) with per-edge ready groups; returns each edge's group. */
export function placeKv(
  placer: GroupPlacer,
  list: TransferList,
  edges: KvEdges,
  ready: Int32Array,
  weightOfRank: Float64Array,
  world: number,
  o: FcpOptions,
  colouring?: Colouring,
): { group: Int32Array; colouring: Colouring } {
  const c = colouring ?? colourEdges(edges.src, edges.dst, world, o.rounds);
  const weight = new Float64Array(edges.dst.length);
  for (let e = 0; e < weight.length; e++) weight[e] = weightOfRank[edges.dst[e]!]!;
  const { order, readyOf } = orderRounds(c, ready, weight);
  const slot = placeColouring(placer, c, order, readyOf, edges.src, edges.dst);
  const group = new Int32Array(edges.src.length);
  for (let e = 0; e < slot.length; e++) {
    list.add(
      slot[e]!,
      edges.src[e]!,
      edges.dst[e]!,
      Kind.kv,
      edges.seq[e]!,
      edges.start[e]!,
      edges.length[e]!,
    );
    group[e] = placer.groupOf(slot[e]!);
  }
  return { group, colouring: c };
}

/** Places the `in` edges (moving pieces, user -> home); returns each piece's arrival group (-1: stays). */
export function placeIn(placer: GroupPlacer, list: TransferList, ctx: TaskContext, c: Colouring): Int32Array {
  const { pieces } = ctx;
  const { order, readyOf } = orderRounds(c, null, new Float64Array(pieces.moving.length).fill(1));
  const src = Int32Array.from(pieces.moving, (p) => pieces.user[p]!);
  const dst = Int32Array.from(pieces.moving, (p) => pieces.home[p]!);
  const slot = placeColouring(placer, c, order, readyOf, src, dst);
  const group = new Int32Array(pieces.seq.length).fill(-1);
  for (let i = 0; i < pieces.moving.length; i++) {
    const p = pieces.moving[i]!;
    list.add(
      slot[i]!,
      pieces.user[p]!,
      pieces.home[p]!,
      Kind.in,
      pieces.seq[p]!,
      pieces.start[p]!,
      pieces.length[p]!,
    );
    group[p] = placer.groupOf(slot[i]!);
  }
  return group;
}

/** Colouring of the `in` edges (shared by both phases: the same pieces move). */
export function colourIn(ctx: TaskContext, world: number, o: FcpOptions): Colouring {
  const { pieces } = ctx;
  const src = Int32Array.from(pieces.moving, (p) => pieces.user[p]!);
  const dst = Int32Array.from(pieces.moving, (p) => pieces.home[p]!);
  return colourEdges(src, dst, world, o.rounds);
}

/** Longest compute op of the exporting work, ms (order.ts): pushes leave after at most this much compute. */
const MAX_OP_MS = 2;
/** Local work kept for the end of a phase, ms (order.ts): it covers the last pushes and the `out` reshuffle. */
const RESERVE_MS = 10;

/**
 * Compute ops of a phase: ordered so that exports finish early and local work fills both ends
 * (order.ts), or, under the pipeline ablations, one op per ready group.
 */
export function buildPhaseOps(
  ctx: TaskContext,
  tasks: Tasks,
  after: Int32Array,
  ms: Float64Array,
  backward: boolean,
  tctx: TimingContext,
  placer: GroupPlacer,
  list: TransferList,
  world: number,
  o: FcpOptions,
): { compute: ComputeTable; opOfTask: Int32Array } {
  if (o.noPipeline) return buildOps(tasks.table.rank, after, world);
  const t = tasks.table;
  const key = new Float64Array(t.rank.length);
  for (let i = 0; i < key.length; i++)
    key[i] = t.seq[i]! * 2 ** 31 + (backward ? t.kvStart[i]! : t.qStart[i]!);
  const { groupEnd, groups } = estimateGroups(tctx, placer, list);
  const input = { rank: t.rank, ready: after, exported: exportFlags(ctx, tasks, backward), ms, key };
  return orderOps(input, groupEnd, groups, world, MAX_OP_MS, RESERVE_MS);
}

/** Applies the pipeline ablations to tasks' ready groups. */
export function applyAblations(
  ready: Int32Array,
  pieceGroup: Int32Array,
  lastFetchGroup: number,
  o: FcpOptions,
): Int32Array {
  let lastIn = -1;
  for (let p = 0; p < pieceGroup.length; p++) lastIn = Math.max(lastIn, pieceGroup[p]!);
  const out = ready.slice();
  for (let t = 0; t < out.length; t++) {
    if (o.noPipeline) out[t] = lastFetchGroup;
    else if (o.noReshuffleOverlap) out[t] = Math.max(out[t]!, lastIn);
  }
  return out;
}

/**
 * Last op of each piece's home touching the piece: as queries (the op writing its O or dQ rows),
 * and with `withKeys` also as keys (the backward's dK/dV rows).
 */
export function lastWriter(
  ctx: TaskContext,
  tasks: Tasks,
  opOfTask: Int32Array,
  withKeys = false,
): Int32Array {
  const { runs, pieces } = ctx;
  const t = tasks.table;
  const lastOp = new Int32Array(pieces.seq.length).fill(-1);
  const rsPieces: number[] = [];
  const sides = withKeys ? 2 : 1;
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    rsPieces.length = 0;
    for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
      const run = runs.byRank[p]!;
      for (let j = pieces.runOff[run]!, je = pieces.runOff[run + 1]!; j < je; j++) rsPieces.push(j);
    }
    const np = rsPieces.length;
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const op = opOfTask[i]!;
      for (let side = 0; side < sides; side++) {
        const a = side === 0 ? t.qStart[i]! : t.kvStart[i]!;
        const b = a + (side === 0 ? t.qLength[i]! : t.kvLength[i]!);
        let lo = 0;
        let hi = np;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          const pm = rsPieces[mid]!;
          if (pieces.start[pm]! + pieces.length[pm]! <= a) lo = mid + 1;
          else hi = mid;
        }
        for (let k = lo; k < np && pieces.start[rsPieces[k]!]! < b; k++) {
          const pk = rsPieces[k]!;
          if (lastOp[pk]! < op) lastOp[pk] = op;
        }
      }
    }
  }
  return lastOp;
}

/** What the phases need besides the layout: the time model and the links of the cluster. */
export interface PhaseEnv {
  readonly tm: TimeModel;
  readonly model: ModelShape;
  readonly links: LinkModel;
}

/** Plans the forward phase. */
export function planForward(
  ctx: TaskContext,
  req: FetchRequests,
  world: number,
  o: FcpOptions,
  env: PhaseEnv,
): ForwardResult {
  const { runs, pieces } = ctx;
  const placer = new GroupPlacer(o.coalesce, world);
  const list = new TransferList();
  const inColouring = colourIn(ctx, world, o);
  const pieceGroup = placeIn(placer, list, ctx, inColouring);
  const edges = chooseSenders(req, runs, pieces, world, false, IN_WEIGHT, env.links.nodeSize);
  const ready = new Int32Array(edges.dep.length);
  for (let e = 0; e < ready.length; e++) ready[e] = edges.dep[e]! >= 0 ? pieceGroup[edges.dep[e]!]! + 1 : 0;
  const kv = placeKv(placer, list, edges, ready, hunger(ctx, world), world, o);
  const byRs = edgesByRs(edges, runs.rsRank.length);
  const tasks = ctx.grid
    ? buildGridTasks(ctx, ctx.blockSize, ctx.grid, env.tm, pieceGroup, edges, byRs, kv.group)
    : buildTasks(ctx, pieceGroup, edges, byRs, kv.group);
  const after = applyAblations(tasks.ready, pieceGroup, placer.groups - 1, o);
  const tctx = timingContext(ctx, world, env, 'forward');
  const ms = taskTimes(tctx, tasks.table);
  const { compute, opOfTask } = buildPhaseOps(ctx, tasks, after, ms, false, tctx, placer, list, world, o);

  // `out`: O of each moving piece after the last op writing its rows (binary search among the
  // pieces of the task's RS, which are in position order).
  const lastOp = lastWriter(ctx, tasks, opOfTask);
  const m = pieces.moving;
  const outSrc = Int32Array.from(m, (p) => pieces.home[p]!);
  const outDst = Int32Array.from(m, (p) => pieces.user[p]!);
  const tl = estimateTimeline(tctx, placer, list, compute, ms);
  const outReady = Int32Array.from(m, (p) => {
    const op = lastOp[p]!;
    return pushGroup(tl, pieces.home[p]!, tl.opEnd[op]!, tl.afterUpTo[op]! + 1, tl.meanOpMs);
  });
  const out = placePushes(placer, outSrc, outDst, outReady, world, o.rounds);
  const sendAfter = { transfer: new IntColumn(), compute: new IntColumn() };
  addOutPushes(list, out.slot, pieces, lastOp, sendAfter);
  const phase = finishPhase(placer, list, compute, sendAfter);
  return {
    phase,
    tasks,
    inColouring,
    kvEdges: edges,
    kvColouring: kv.colouring,
    stats: {
      rounds: { in: inColouring.rounds, kv: kv.colouring.rounds, out: out.rounds },
      delta: { in: inColouring.delta, kv: kv.colouring.delta, out: out.delta },
      transfers: { in: m.length, kv: edges.src.length, out: m.length },
      groups: phase.groupOfRound.length > 0 ? phase.groupOfRound[phase.groupOfRound.length - 1]! + 1 : 0,
      ops: compute.rank.length,
    },
  };
}

/**
 * Stages both phases share (forward.ts, backward.ts): placing the `in` and `kv` rounds, ordering a
 * phase's compute ops, the pipeline ablations, and which op last touches each reshuffle piece (the
 * op its `out` push must wait for).
 */
import { gatherFloat64Via, gatherInt32 } from '../../core/gather.ts';
import type { Direction } from '../../cost/kernel.ts';
import { kvBytesPerToken, qBytesPerToken } from '../../model/attention.ts';
import type { ComputeTable } from '../../plan/types.ts';
import { Kind } from '../../plan/types.ts';
import type { PhaseContext } from './context.ts';
import { carryLaunchBatches } from './launch-carry.ts';
import { batchShapes } from './launch-shapes.ts';
import { needInput, needOrdered } from './need.ts';
import { MAX_OP_MS } from './op-cut.ts';
import { buildOps } from './ops-by-group.ts';
import type { FcpOptions } from './options.ts';
import { groupArrival, orderOps } from './order.ts';
import { orderKeys, pushUnits } from './task-keys.ts';
import { exportFlags, firstPieceEndingAfter, rsPiecesInto, type TaskContext, type Tasks } from './tasks.ts';
import type { KvEdges } from './transfers/fetch.ts';
import { hopLevels } from './transfers/forward-tree.ts';
import type { GroupPlacer } from './transfers/groups.ts';
import { needOrder } from './transfers/need-order.ts';
import { type Colouring, colourEdges, degreeOf, orderRounds, placeColouring } from './transfers/rounds.ts';
import { handOverKv } from './transfers/same-slot.ts';
import { estimateGroups, type TimelineContext } from './transfers/timeline.ts';
import type { TransferList } from './transfers/transfer-list.ts';

/** Per-phase statistics recorded in the plan's meta. */
export interface PhaseStats {
  rounds: Record<string, number>;
  delta: Record<string, number>;
  transfers: Record<string, number>;
  groups: number;
  ops: number;
}

/** Number of groups of a finished phase (its last round's group + 1). */
export function groupCount(groupOfRound: Int32Array): number {
  return groupOfRound.length > 0 ? groupOfRound[groupOfRound.length - 1]! + 1 : 0;
}

/** Largest group in `groups` (-1 when empty): e.g. the last `kv` group of a phase. */
export function lastGroup(groups: Int32Array): number {
  let g = -1;
  for (let i = 0; i < groups.length; i++) if (groups[i]! > g) g = groups[i]!;
  return g;
}

/** The timeline estimate's view of a phase. */
export function timelineContext(ctx: PhaseContext, dir: Direction): TimelineContext {
  return {
    world: ctx.world,
    links: ctx.links,
    model: ctx.model,
    causal: ctx.mask === 'causal',
    dir,
    tm: ctx.kernel,
  };
}

/**
 * Weight of a transfer to `dst` for the round order: receivers with little work present from the
 * start weigh most (1 for none, 1/2 for a rank's share).
 */
export function hunger(ctx: PhaseContext): Float64Array {
  const { pieces, world } = ctx;
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

/**
 * Places the `kv` edges with per-edge ready groups; returns each edge's group. Direct edges are one
 * colouring (Δ rounds); two-hop relay edges (fetch.ts, `fanOut`) a second one, placed after them,
 * each ready one group after the edge that brings its range to its sender (two hops: Δ of the first
 * plus Δ of the second, every round still a matching). Forwarded edges (forwarding trees,
 * forward-tree.ts) are placed hop by hop. Then hot senders hand transfers over to holders within
 * their rounds (same-slot.ts, handOverKv). `colouring` reuses a previous phase's.
 */
export function placeKv(
  placer: GroupPlacer,
  list: TransferList,
  edges: KvEdges,
  ready: Int32Array,
  weightOfRank: Float64Array,
  ctx: PhaseContext,
  dir: Direction,
  colouring?: Colouring,
): { group: Int32Array; colouring: Colouring } {
  const n = edges.src.length;
  // Direct edges (hop1) and relays (hop2), each in edge order; counted first (dense ids, no pushes).
  let relays = 0;
  for (let e = 0; e < n; e++) if (edges.relay[e]! >= 0) relays++;
  const hop2 = new Int32Array(relays);
  const hop1 = new Int32Array(n - relays);
  for (let e = 0, i1 = 0, i2 = 0; e < n; e++) {
    if (edges.relay[e]! >= 0) hop2[i2++] = e;
    else hop1[i1++] = e;
  }
  const group = new Int32Array(n);
  const round = new Int32Array(n);
  const slotOf = new Int32Array(n);
  const idOf = new Int32Array(n);
  const byNeed = needOrdered(dir);
  const place = (ids: Int32Array, given: Colouring | null, readyOf: (e: number) => number): Colouring => {
    const src = gatherInt32(edges.src, ids);
    const dst = gatherInt32(edges.dst, ids);
    // The whole graph's colouring is the same for every candidate of the layout (layout-memo.ts).
    const colour = (): Colouring => colourEdges(src, dst, ctx.world, ctx.o.rounds);
    const c = given ?? (ids.length === n ? ctx.memo.directColouring(edges, ctx.o.rounds, colour) : colour());
    const weight = gatherFloat64Via(weightOfRank, edges.dst, ids);
    const rdy = new Int32Array(ids.length);
    for (let k = 0; k < ids.length; k++) rdy[k] = readyOf(ids[k]!);
    const { order, readyOf: roundReady } = byNeed
      ? needOrder(c, needInput(ctx, timelineContext(ctx, dir), placer, list, edges, ids, c, rdy, weight))
      : orderRounds(c, rdy, weight);
    const slot = placeColouring(placer, c, order, roundReady, src, dst);
    for (let k = 0; k < ids.length; k++) {
      const e = ids[k]!;
      idOf[e] = list.add(
        slot[k]!,
        edges.src[e]!,
        edges.dst[e]!,
        Kind.kv,
        edges.seq[e]!,
        edges.start[e]!,
        edges.length[e]!,
      );
      slotOf[e] = slot[k]!;
      group[e] = placer.groupOf(slot[k]!);
      round[e] = c.round[k]!;
    }
    return c;
  };
  /** The part of `colouring` over `ids`, its rounds renumbered from `offset`. */
  const part = (ids: Int32Array, offset: number, rounds: number): Colouring | null => {
    if (!colouring) return null;
    // Only the rounds matter to the placement (delta is a statistic of the whole colouring).
    const r = gatherInt32(colouring.round, ids);
    for (let k = 0; k < r.length; k++) r[k]! -= offset;
    return { round: r, rounds, delta: colouring.delta };
  };
  // Same-slot hand-overs (same-slot.ts) of the placed kv sends.
  const handOver = (): void => {
    if (handOvers(ctx))
      handOverKv(
        placer,
        list,
        edges,
        group,
        slotOf,
        idOf,
        ctx.pieces,
        ctx.model,
        ctx.links.nodeSize,
        dir === 'backward',
      );
  };
  const first = colouring?.firstRounds ?? colouring?.rounds ?? 0;
  const c1 = place(hop1, part(hop1, 0, first), (e) => ready[e]!);
  if (hop2.length === 0) {
    handOver();
    return { group, colouring: colouring ?? { ...c1, round } };
  }
  // Relays fill the rounds already placed first-fit (one message per rank and round), by ready
  // group: each joins the first round after its feed's group where both ends are free. Hop by
  // hop (forwarding trees, forward-tree.ts: a feed may itself be forwarded), so that every
  // feed's group is known before what it feeds is placed.
  const level = hopLevels(edges.relay);
  let maxLevel = 2;
  for (let k = 0; k < hop2.length; k++) maxLevel = Math.max(maxLevel, level[hop2[k]!]!);
  const slots = new Set<number>();
  const rdy = new Int32Array(hop2.length);
  for (let l = 2; l <= maxLevel; l++) {
    // The relays of this hop by ready group, then position: a stable counting sort (the typed
    // array filter and comparator sort it replaces took about 14 ms of a mode (b) plan at 256
    // ranks, profiled).
    let count = 0;
    let maxReady = 0;
    for (let k = 0; k < hop2.length; k++)
      if (level[hop2[k]!] === l) {
        rdy[k] = Math.max(ready[hop2[k]!]!, group[edges.relay[hop2[k]!]!]! + 1);
        maxReady = Math.max(maxReady, rdy[k]!);
        count++;
      }
    const at = new Int32Array(maxReady + 2);
    for (let k = 0; k < hop2.length; k++) if (level[hop2[k]!] === l) at[rdy[k]! + 1]!++;
    for (let g = 0; g <= maxReady; g++) at[g + 1]! += at[g]!;
    const order = new Int32Array(count);
    for (let k = 0; k < hop2.length; k++) if (level[hop2[k]!] === l) order[at[rdy[k]!]!++] = k;
    for (const k of order) {
      const e = hop2[k]!;
      const slot = placer.fill(edges.src[e]!, edges.dst[e]!, rdy[k]!, ctx.o.rounds === 'naive');
      idOf[e] = list.add(
        slot,
        edges.src[e]!,
        edges.dst[e]!,
        Kind.kv,
        edges.seq[e]!,
        edges.start[e]!,
        edges.length[e]!,
      );
      slotOf[e] = slot;
      group[e] = placer.groupOf(slot);
      round[e] = -1;
      slots.add(slot);
    }
  }
  handOver();
  const all = colouring ?? {
    round,
    rounds: c1.rounds + slots.size,
    delta: degreeOf(edges.src, edges.dst, ctx.world),
    firstRounds: c1.rounds,
  };
  return { group, colouring: all };
}

/**
 * Whether a phase's `kv` senders hand transfers over within their rounds (same-slot.ts): with
 * matching rounds, and without a reshuffle (mode (b)). In mode (a) it lowers the comm imbalance
 * too (simulated, tuned, longtail, fluid, seeds 1-3, 16/64/256 ranks, fwd | bwd: 48.2/67.7/84.0% |
 * 50.7/57.8/76.0% -> 29.6/31.0/28.4% | 35.4/41.7/59.3%, MFU not lower) but costs forward MFU at
 * 1024 ranks (seeds 1-3, fwd 0.379/0.365/0.397 -> 0.369/0.360/0.380, bwd 0.380/0.322/0.372 ->
 * 0.376/0.317/0.387; `npx tsx src/cli.ts compare --strategies fcp --network fluid --world 1024
 * --batch longtail --batches 3`, hand-overs switched on for mode (a)): a holder's `kv` group waits
 * for its own compute and reshuffle, so a receiver fed by it may start its group later than the
 * owner would have let it. Admitting only holders that the comm-only group estimate
 * (transfers/timeline.ts) has entering the group no later than the sender did worse (seed 1 fwd
 * 0.365): the estimate does not see those waits.
 */
function handOvers(ctx: PhaseContext): boolean {
  return ctx.o.rounds !== 'naive' && ctx.pieces.moving.length === 0;
}

/** Places the `in` edges (moving pieces, user -> home); returns each piece's arrival group (-1: stays). */
export function placeIn(placer: GroupPlacer, list: TransferList, ctx: TaskContext, c: Colouring): Int32Array {
  const { pieces } = ctx;
  const { order, readyOf } = orderRounds(c, null, new Float64Array(pieces.moving.length).fill(1));
  const src = gatherInt32(pieces.user, pieces.moving);
  const dst = gatherInt32(pieces.home, pieces.moving);
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
export function colourIn(ctx: PhaseContext): Colouring {
  const { pieces } = ctx;
  const src = gatherInt32(pieces.user, pieces.moving);
  const dst = gatherInt32(pieces.home, pieces.moving);
  return colourEdges(src, dst, ctx.world, ctx.o.rounds);
}

/** Most local work kept for the end of a phase, ms (order.ts): it covers the last pushes and the `out` reshuffle. */
const RESERVE_MS = 10;
/**
 * Local work kept per rank for the end (ms, at most RESERVE_MS): what its largest push takes across
 * nodes (`tailFactor` times, latency included). A fixed 10 ms held all local work of a rank with
 * less than that back to cover a 1-2 ms tail while the rank idled through the whole first `in`
 * group (9 ms at 16 ranks, mode (a)); the exposed time is the same for any split between the
 * start and the end as long as each end is covered, so the end gets only what it needs.
 */
export function reserveOf(
  tasks: Tasks['table'],
  exported: Uint8Array,
  ms: number,
  backward: boolean,
  tctx: TimelineContext,
  tailFactor = 2,
): Float64Array {
  const { model, links, world } = tctx;
  const q = qBytesPerToken(model);
  const kv = kvBytesPerToken(model);
  const push = new Float64Array(world);
  for (let i = 0; i < tasks.rank.length; i++) {
    if (exported[i] === 0) continue;
    // Forward: O rows; backward: dQ rows and the dK,dV partial (an upper bound of what it exports).
    const bytes = tasks.qLength[i]! * q + (backward ? tasks.kvLength[i]! * kv : 0);
    const r = tasks.rank[i]!;
    if (bytes > push[r]!) push[r] = bytes;
  }
  const out = new Float64Array(world);
  for (let r = 0; r < world; r++)
    out[r] =
      push[r]! > 0 ? Math.min(ms, tailFactor * (push[r]! / links.interBytesPerMs + links.groupLatencyMs)) : 0;
  return out;
}

/**
 * Compute ops of a phase: ordered so that exports finish early and local work fills both ends
 * (order.ts), or, under the pipeline ablations, one op per ready group.
 */
export function buildPhaseOps(
  ctx: PhaseContext,
  tasks: Tasks,
  after: Int32Array,
  ms: Float64Array,
  backward: boolean,
  tctx: TimelineContext,
  placer: GroupPlacer,
  list: TransferList,
): { compute: ComputeTable; opOfTask: Int32Array } {
  const { world, o } = ctx;
  if (o.noPipeline) return buildOps(tasks.table.rank, after, world);
  const t = tasks.table;
  const { groupEnd, groups } = estimateGroups(tctx, placer, list);
  const exported = exportFlags(ctx, tasks, backward);
  const unit = pushUnits(ctx, tasks, backward);
  const shape = batchShapes(t, ctx.mask === 'causal');
  const reshuffle = ctx.pieces.moving.length > 0;
  const order = orderKeys(ctx, t, backward, unit, shape);
  const input = { rank: t.rank, ready: after, exported, ms, key: order, unit, shape };
  // Without a reshuffle (a loader layout) the backward's tail (dK,dV partials) is sized per rank
  // and local work fills the estimated waits; so does the forward with one (mode (a)), now that
  // its `out` pushes no longer share `kv` groups (forward.ts). Measured, mode (a), simulated,
  // `fcp compare --strategies fcp --world 16,32,64 --batch B --batches 3`, fwd MFU fixed 10 ms
  // reserve -> per rank: longtail 0.430/0.456/0.508 -> 0.430/0.459/0.508, magi 0.440/0.428/0.327
  // -> 0.453/0.427/0.323, bimodal 0.526/0.477/0.448 -> 0.532/0.477/0.450; 128/256 within 0.001.
  // The backward of mode (a) keeps the fixed reserve and no gap filling: its `out` pushes queue
  // behind the last ops and the per-group estimate is rougher (measured: both cost up to 0.003
  // MFU in mode (a), `magi` and `bimodal`, 64-256 ranks).
  // (The forward of a loader layout exports nothing: it keeps no reserve either way.)
  const perRank = backward !== reshuffle;
  const reserve = perRank ? reserveOf(t, exported, RESERVE_MS, backward, tctx) : RESERVE_MS;
  // Ops of exporting work wait for a later group only in the backward: in the forward (mode (a):
  // moved queries' O) each later group opens an op (simulated, mode (a), fluid, 3 batches, fwd MFU
  // at 16-256: longtail 0.470/0.467/0.518/0.485/0.436 -> 0.485/0.469/0.523/0.478/0.439, magi
  // 0.472/0.444/0.348/0.295/0.270 -> 0.481/0.453/0.346/0.293/0.273, bimodal
  // 0.553/0.514/0.489/0.447/0.453 -> 0.563/0.518/0.494/0.456/0.456, backward unchanged; the same
  // in the backward lost at 256 ranks, longtail 0.440 -> 0.426, magi 0.331 -> 0.321).
  const ordered = orderOps(
    input,
    groupEnd,
    groups,
    world,
    MAX_OP_MS,
    reserve,
    !reshuffle || !backward,
    backward,
  );
  // Batches of a launch shape completed across ops where the estimate sees no delay
  // (launch-carry.ts). Measured in session 20: docs/results.md.
  return carryLaunchBatches(ordered.compute, ordered.opOfTask, input, groupArrival(groupEnd, groups, world));
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
  const rsPieces = new Int32Array(pieces.seq.length);
  const sides = withKeys ? 2 : 1;
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    const np = rsPiecesInto(ctx, rs, rsPieces);
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const op = opOfTask[i]!;
      for (let side = 0; side < sides; side++) {
        const a = side === 0 ? t.qStart[i]! : t.kvStart[i]!;
        const b = a + (side === 0 ? t.qLength[i]! : t.kvLength[i]!);
        for (
          let k = firstPieceEndingAfter(pieces, rsPieces, np, a);
          k < np && pieces.start[rsPieces[k]!]! < b;
          k++
        ) {
          const pk = rsPieces[k]!;
          if (lastOp[pk]! < op) lastOp[pk] = op;
        }
      }
    }
  }
  return lastOp;
}

/**
 * Stages both phases share (forward.ts, backward.ts): the phase statistics, colouring and placing
 * the `in` and `kv` rounds (same-slot hand-overs and relays included), and how hungry each rank is
 * for its first data. A phase's compute ops, the pipeline ablations and which op last touches
 * each reshuffle piece are in phase-ops.ts.
 */
import { gatherFloat64Via, gatherInt32 } from '../../core/gather.ts';
import type { Direction } from '../../cost/kernel.ts';
import { Kind, type KindCode } from '../../plan/types.ts';
import type { PhaseContext } from './context.ts';
import { needInput, needOrdered } from './need.ts';
import type { TaskContext } from './tasks.ts';
import type { KvEdges } from './transfers/fetch.ts';
import { hopLevels } from './transfers/forward-tree.ts';
import type { GroupPlacer } from './transfers/groups.ts';
import { needOrder } from './transfers/need-order.ts';
import { crossNodeRelays } from './transfers/relays.ts';
import { type Colouring, colourEdges, degreeOf, orderRounds, placeColouring } from './transfers/rounds.ts';
import { handOverKv } from './transfers/same-slot.ts';
import type { TimelineContext } from './transfers/timeline.ts';
import type { TransferList } from './transfers/transfer-list.ts';

/** Per-phase statistics recorded in the plan's meta. */
export interface PhaseStats {
  rounds: Record<string, number>;
  delta: Record<string, number>;
  transfers: Record<string, number>;
  groups: number;
  ops: number;
  /** Two-hop reshuffle messages (transfers/relays.ts), present only when there are any. */
  relays?: { in: number; out: number };
}

/** The `relays` entry of a phase's statistics: absent without relays, so such plans keep their bytes. */
export function relayStats(inRelays: number, outRelays: number): { relays?: { in: number; out: number } } {
  return inRelays + outRelays > 0 ? { relays: { in: inRelays, out: outRelays } } : {};
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
  // Relays fill the rounds already placed first-fit (one message per rank, link class and round), by ready
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
      // One message per link class and round (groups.ts, fillLink); `naive`: receivers only.
      const slot =
        ctx.o.rounds === 'naive'
          ? placer.fill(edges.src[e]!, edges.dst[e]!, rdy[k]!, true)
          : placer.fillLink(edges.src[e]!, edges.dst[e]!, rdy[k]!);
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

/**
 * Places the `in` edges (moving pieces, user -> home, or user -> relay -> home for the pieces
 * `c.relay` names); returns each piece's arrival group at its home (-1: stays).
 */
export function placeIn(
  placer: GroupPlacer,
  list: TransferList,
  ctx: TaskContext,
  c: InColouring,
): Int32Array {
  const { pieces } = ctx;
  const m = pieces.moving;
  const { order, readyOf } = orderRounds(c, null, new Float64Array(m.length).fill(1));
  const src = gatherInt32(pieces.user, m);
  const dst = firstHops(pieces, c.relay, pieces.home);
  const slot = placeColouring(placer, c, order, readyOf, src, dst);
  const group = new Int32Array(pieces.seq.length).fill(-1);
  for (let i = 0; i < m.length; i++) {
    const p = m[i]!;
    list.add(slot[i]!, src[i]!, dst[i]!, Kind.in, pieces.seq[p]!, pieces.start[p]!, pieces.length[p]!);
    group[p] = placer.groupOf(slot[i]!);
  }
  const second = placeSecondHops(placer, list, pieces, Kind.in, c.relay, slot, pieces.home);
  for (let i = 0; i < m.length; i++) if (second[i]! >= 0) group[m[i]!] = second[i]!;
  return group;
}

/**
 * Second hops of relayed reshuffle messages (`kind` in or out): relay -> `to` (each moving piece's
 * home or user rank) over NVLink, each in the first round where both ranks are free from the group
 * after its first hop's (`slot`: the first hops' placer slots; data received in a group can be
 * sent on in a later one). Returns each piece's second-hop group (-1: not relayed).
 */
export function placeSecondHops(
  placer: GroupPlacer,
  list: TransferList,
  pieces: TaskContext['pieces'],
  kind: KindCode,
  relay: Int32Array,
  slot: Int32Array,
  to: Int32Array,
): Int32Array {
  const group = new Int32Array(relay.length).fill(-1);
  for (let i = 0; i < relay.length; i++) {
    const t = relay[i]!;
    if (t < 0) continue;
    const p = pieces.moving[i]!;
    const s2 = placer.fill(t, to[p]!, placer.groupOf(slot[i]!) + 1);
    list.add(s2, t, to[p]!, kind, pieces.seq[p]!, pieces.start[p]!, pieces.length[p]!);
    group[i] = placer.groupOf(s2);
  }
  return group;
}

/** The `in` colouring with the relay of every moving piece (-1: straight to its home). */
export interface InColouring extends Colouring {
  readonly relay: Int32Array;
}

/** Receiver of each moving piece's first hop: its relay, or `to` (its home or user rank). */
export function firstHops(pieces: TaskContext['pieces'], relay: Int32Array, to: Int32Array): Int32Array {
  return Int32Array.from(pieces.moving, (p, i) => (relay[i]! >= 0 ? relay[i]! : to[p]!));
}

/**
 * Relays of the moving pieces' messages from `from` to `to` (user -> home for `in`, home -> user
 * for `out`; transfers/relays.ts), or none under the ablation `off` or naive rounds.
 */
function pieceRelays(ctx: PhaseContext, from: Int32Array, to: Int32Array, off: boolean): Int32Array {
  const { pieces } = ctx;
  if (off || ctx.o.rounds === 'naive') return new Int32Array(pieces.moving.length).fill(-1);
  const m = pieces.moving;
  return crossNodeRelays(
    gatherInt32(from, m),
    gatherInt32(to, m),
    gatherInt32(pieces.length, m),
    ctx.world,
    ctx.links,
  );
}

/**
 * Colouring of the `in` edges' first hops (shared by both phases: the same pieces move, and Q,K,V
 * and dO take the same paths), with the relays chosen for them.
 */
export function colourIn(ctx: PhaseContext): InColouring {
  const { pieces } = ctx;
  const relay = pieceRelays(ctx, pieces.user, pieces.home, ctx.o.noInRelays);
  const src = gatherInt32(pieces.user, pieces.moving);
  return { ...colourEdges(src, firstHops(pieces, relay, pieces.home), ctx.world, ctx.o.rounds), relay };
}

/** Relay of every moving piece's `out` (O forward, dQ,dK,dV backward: home -> user), as for `in`. */
export function outRelays(ctx: PhaseContext): Int32Array {
  return pieceRelays(ctx, ctx.pieces.home, ctx.pieces.user, ctx.o.noOutRelays);
}

/** Number of relays in `relay` (each one more transfer). */
export function relayCount(relay: Int32Array): number {
  let n = 0;
  for (const t of relay) if (t >= 0) n++;
  return n;
}

/**
 * Node size for finishPhase's split of rounds that would share a rail NIC (transfers/rail-rounds.ts):
 * the plan's under PXN routing, 0 (no split) under direct routing or the `noRailRounds` ablation.
 */
export function railRoundsNodeSize(ctx: PhaseContext): number {
  return ctx.links.pxn && !ctx.o.noRailRounds ? ctx.links.nodeSize : 0;
}

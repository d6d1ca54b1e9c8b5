/**
 * Same-slot forwarding (issue 15: communication imbalance): once the `kv` rounds are placed, a
 * transfer of a hot sender is handed, in its own round, to another rank that received a covering
 * copy of the range in an earlier group and sends nothing in that round.
 *
 * Owner computes, so the rank holding an early block of a long sequence sends it to every later
 * holder of that sequence, many times the mean bytes, while most receivers send little. Every
 * receiver still gets the same range in the same round (so no arrival moves and nothing waits
 * longer), the round stays a matching (the new sender was free in it, the old one is freed), and
 * the forwarder holds the range before its group (a range received in group g is usable by the
 * sends of later groups). Only who sends changes, so total bytes are unchanged.
 *
 * Greedy in bytes (sent plus received, what the imbalance counts): the busiest rank hands one of
 * its sends (latest group first: it has the most holders) to the least loaded free holder in the
 * receiver's node whose load stays below the busiest one's, until it has none to hand or its load
 * is within `slack` of the mean. In the receiver's node only: a hand-over never adds a NIC
 * crossing, and one that removes one moves the transfer onto NVLink. Only the ranks hot at the
 * start hand over, and a range's holders are sought among the hot rank's own receivers (a range
 * has one sender in mode (b)); the lists are sorted when a rank first is the busiest. This costs
 * about 3 ms per phase at 256 ranks (a global index of every range's receivers cost 12 ms).
 *
 * Measured (simulated, tuned, longtail, seeds 1-3, 16/64/256 ranks, fwd comm imbalance; MFU
 * unchanged to 0.001): mode (b) 43.0/35.4/48.0% -> 33.5/19.1/38.8%; with the global index
 * 32.5/15.9/31.2%; with holders in any node too 36.1/14.8/31.2%. Mode (a) 48.2/67.7/84.0% ->
 * 47.4/55.0/66.8%, but fwd/bwd MFU 0.379/0.380 -> 0.374/0.373 at 1024 ranks (a holder's `kv` group
 * waits for its own compute and reshuffle), so the planner hands over in mode (b) only (phase.ts,
 * handOvers).
 *
 * The rounds stay exactly Δ of the graph (the planner's law: kv rounds = Δ): no hand-over lowers
 * the degree of the last rank at Δ. That often protects the hottest sender itself; without it
 * (rounds would then exceed the final graph's Δ, still congestion-free and no more than the
 * direct plan's) the imbalance fell further (global index, holders in any node): mode (b)
 * 20.8/5.4/18.8%, mode (a) 33.9/33.1/37.3%.
 */

import { kvBytesPerToken, qBytesPerToken } from '../../../model/attention.ts';
import type { ModelShape } from '../../../model/shape.ts';
import type { KvEdges } from './fetch.ts';
import { LoadHeap } from './forward-tree.ts';
import type { GroupPlacer, TransferList } from './groups.ts';
import type { Pieces } from './reshuffle.ts';

/** Inputs of {@link sameSlotForward}: placed `kv` transfers (local ids), per rank base loads. */
export interface SameSlotInput {
  readonly src: Int32Array;
  readonly dst: Int32Array;
  readonly seq: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  /** Group of each transfer (a forwarder must receive its copy in an earlier one). */
  readonly group: Int32Array;
  /** Placer slot of each transfer. */
  readonly slot: Int32Array;
  /** Whether `rank` sends nothing in `slot` yet (any kind). */
  sendFree(slot: number, rank: number): boolean;
  readonly world: number;
  readonly gpusPerNode: number;
  /** Other traffic of the phase per rank, K/V-token units (null: none). */
  readonly baseLoad: Float64Array | null;
  /** Rounds of the phase's `kv` colouring (its Δ): no hand-over takes the last rank at Δ below it. */
  readonly rounds: number;
  readonly slack: number;
}

/** Default slack: hand-overs stop once the busiest rank is within 2% of the mean load. */
export const SAME_SLOT_SLACK = 0.02;

/** New sender of every transfer (module comment); `src` itself when nothing changes. */
export function sameSlotForward(x: SameSlotInput): Int32Array {
  const { dst, seq, start, length, group, slot, world } = x;
  const n = x.src.length;
  if (n === 0) return x.src;
  const src = x.src.slice();
  const load = new Float64Array(world);
  let total = 0;
  for (let r = 0; r < world; r++) {
    load[r] = x.baseLoad ? x.baseLoad[r]! : 0;
    total += load[r]!;
  }
  const sendDeg = new Int32Array(world);
  const recvDeg = new Int32Array(world);
  for (let e = 0; e < n; e++) {
    load[src[e]!]! += length[e]!;
    load[dst[e]!]! += length[e]!;
    total += 2 * length[e]!;
    sendDeg[src[e]!]!++;
    recvDeg[dst[e]!]!++;
  }
  const target = (1 + x.slack) * (total / world);
  // Ranks at Δ: a hand-over may not take the last one below it (the rounds would exceed Δ).
  let atDelta = 0;
  for (let r = 0; r < world; r++) if (Math.max(sendDeg[r]!, recvDeg[r]!) >= x.rounds) atDelta++;
  // Only the ranks hot at the start hand sends over (holders stay below the busiest rank, so the
  // greedy stops before any other could become it); their ranges' holders are found among their
  // own sends (a range has one sender in mode (b), and in mode (a) most of its receivers share one).
  const hotRanks: number[] = [];
  for (let r = 0; r < world; r++) if (load[r]! > target) hotRanks.push(r);
  if (hotRanks.length === 0) return x.src;
  const g = Math.max(1, x.gpusPerNode);
  // Sends of every rank (a CSR by sender, edge order).
  const off = new Int32Array(world + 1);
  for (let e = 0; e < n; e++) off[src[e]! + 1]!++;
  for (let r = 0; r < world; r++) off[r + 1]! += off[r]!;
  const sends = new Int32Array(n);
  {
    const fill = off.slice(0, world);
    for (let e = 0; e < n; e++) sends[fill[src[e]!]!++] = e;
  }
  // Per hot rank: its sends by (range, receiver's node, group, id), so that the holders in a
  // receiver's node that got the range before a transfer's group are the start of its run
  // (`runFirst`); and the order it hands them over in: latest group first (`scan`). Prepared when
  // the rank first is the busiest (most hot ranks never are: the greedy stops first).
  const node = (r: number): number => Math.floor(r / g);
  const rangeKey = (u: number): number => seq[u]! * 2 ** 31 + start[u]!;
  const byRange = new Int32Array(n);
  const runFirst = new Int32Array(n);
  const scan = new Int32Array(n);
  const prepared = new Uint8Array(world);
  const prepare = (r: number): void => {
    prepared[r] = 1;
    const a = off[r]!;
    const b = off[r + 1]!;
    const part = Array.from(sends.subarray(a, b));
    const key = new Float64Array(b - a);
    for (let i = 0; i < b - a; i++) key[i] = rangeKey(part[i]!);
    const at = Array.from({ length: b - a }, (_, k) => k);
    at.sort(
      (u, v) =>
        key[u]! - key[v]! ||
        node(dst[part[u]!]!) - node(dst[part[v]!]!) ||
        group[part[u]!]! - group[part[v]!]! ||
        u - v,
    );
    for (let k = 0; k < b - a; k++) byRange[a + k] = part[at[k]!]!;
    for (let i = a; i < b; i++) {
      const u = byRange[i]!;
      const p = i > a ? byRange[i - 1]! : -1;
      runFirst[i] =
        p >= 0 && rangeKey(p) === rangeKey(u) && node(dst[p]!) === node(dst[u]!) ? runFirst[i - 1]! : i;
    }
    const order = Array.from({ length: b - a }, (_, k) => a + k);
    order.sort((i, j) => group[byRange[j]!]! - group[byRange[i]!]! || i - j);
    scan.set(order, a);
  };
  const ptr = off.slice(0, world);
  const taken = new Set<number>(); // slot * world + rank: sends added in this pass
  const heap = new LoadHeap();
  for (const r of hotRanks) heap.push(load[r]!, r);
  const top = new Float64Array(1);
  for (;;) {
    // The busiest hot rank (ties: the lowest id).
    const s = heap.pop(top);
    if (s < 0) break;
    if (top[0] !== load[s]) continue; // stale
    if (load[s]! <= target) break;
    if (prepared[s] === 0) prepare(s);
    let done = false;
    for (; ptr[s]! < off[s + 1]! && !done; ptr[s]!++) {
      const i = scan[ptr[s]!]!;
      const e = byRange[i]!;
      if (sendDeg[s] === x.rounds && recvDeg[s]! < x.rounds && atDelta === 1) break;
      const d = dst[e]!;
      const len = length[e]!;
      const sl = slot[e]!;
      let best = -1;
      for (let j = runFirst[i]!; j < i; j++) {
        const h = byRange[j]!;
        if (group[h]! >= group[e]!) break;
        const f = dst[h]!;
        if (f === d || length[h]! < len || load[f]! + len >= load[s]!) continue;
        if ((best < 0 || load[f]! < load[best]!) && !taken.has(sl * world + f) && x.sendFree(sl, f)) best = f;
      }
      if (best < 0) continue;
      src[e] = best;
      taken.add(sl * world + best);
      load[s]! -= len;
      load[best]! += len;
      if (Math.max(sendDeg[s]!, recvDeg[s]!) >= x.rounds) atDelta--;
      sendDeg[s]!--;
      if (Math.max(sendDeg[s]!, recvDeg[s]!) >= x.rounds) atDelta++;
      if (Math.max(sendDeg[best]!, recvDeg[best]!) >= x.rounds) atDelta--;
      sendDeg[best]!++;
      if (Math.max(sendDeg[best]!, recvDeg[best]!) >= x.rounds) atDelta++;
      done = true;
    }
    if (!done) break;
    heap.push(load[s]!, s);
  }
  return src;
}

/**
 * Same-slot forwarding over a phase's placed `kv` transfers (`slotOf`, `idOf`: each edge's placer
 * slot and list id): hot senders hand transfers to free holders in the same round; the list and
 * the placer follow. `rounds`: the colouring's Δ to keep.
 */
export function handOverKv(
  placer: GroupPlacer,
  list: TransferList,
  edges: KvEdges,
  group: Int32Array,
  slotOf: Int32Array,
  idOf: Int32Array,
  pieces: Pieces,
  model: ModelShape,
  gpusPerNode: number,
  rounds: number,
): void {
  const world = placer.world;
  // Reshuffle bytes per rank in K/V-token units, both phases' kinds alike (Q,K,V or dO in, O or
  // dQ,dK,dV out: 2 q + kv per token at each end over the two phases; half of it per phase).
  const kv = kvBytesPerToken(model);
  const w = (qBytesPerToken(model) + kv / 2) / kv;
  const base = new Float64Array(world);
  for (let i = 0; i < pieces.moving.length; i++) {
    const p = pieces.moving[i]!;
    base[pieces.user[p]!]! += w * pieces.length[p]!;
    base[pieces.home[p]!]! += w * pieces.length[p]!;
  }
  const src = sameSlotForward({
    src: edges.src,
    dst: edges.dst,
    seq: edges.seq,
    start: edges.start,
    length: edges.length,
    group,
    slot: slotOf,
    sendFree: (s, r) => placer.sendFree(s, r),
    world,
    gpusPerNode,
    baseLoad: base,
    rounds,
    slack: SAME_SLOT_SLACK,
  });
  if (src === edges.src) return;
  for (let e = 0; e < src.length; e++)
    if (src[e] !== edges.src[e]) {
      placer.moveSend(slotOf[e]!, edges.src[e]!, src[e]!);
      list.setSrc(idOf[e]!, src[e]!);
    }
}

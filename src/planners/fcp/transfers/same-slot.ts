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
 * sends of later groups). Only who sends changes, so total bytes are unchanged. The rounds stay
 * those placed for the direct fetch graph: the final graph's Δ may be lower than their number
 * (each handed transfer keeps its direct sender in the plan, `kvOrigin`, and the report's
 * `kvDirectDelta` is the Δ the rounds were placed for).
 *
 * Greedy in bytes (sent plus received, what the imbalance counts, with the phase's other traffic
 * as a base: {@link baseLoad}): the busiest rank hands one of its sends (latest group first: it
 * has the most holders) to the least loaded free holder whose load stays below the busiest one's,
 * until it has none to hand or its load is within `slack` of the mean; passes repeat while one
 * moves something (a send skipped once may find a holder whose load fell since). Holders come from
 * a global index of every range's receivers, those in the receiver's node first; one in another
 * node only when the transfer crosses nodes already (a hand-over never adds a NIC crossing). At 256
 * ranks (longtail, seed 1, mode (b), untuned) it costs about 9.5 ms (fwd) / 11 ms (bwd) per phase,
 * the fastest of 10 plans on a shared machine (10.7 / 13.4 ms when every holder of the range was
 * read for every send; the single-pass hand-over among the hot rank's own receivers: about 3 ms).
 * Since measured on the 12 calls of one tuned plan (captured, best of 15): 104 ms, 86 ms with the
 * range table, one sort fewer and crossing sends read in range order.
 *
 * Measured (simulated, tuned, longtail, fluid, seeds 1-3, 16/64/256 ranks, comm imbalance fwd |
 * bwd; `npx tsx src/cli.ts compare --strategies fcp --loader-layout --network fluid --world
 * 16,64,256 --batch longtail --batches 3`), mode (b): the earlier single-pass hand-over (holders
 * among the hot rank's receivers, in the receiver's node, the last rank at Δ kept there, the
 * reshuffle weighted (q + kv/2)/kv, no `dkv` base) 27.2/23.2/42.4% | 35.9/28.1/40.1% -> this one
 * 14.5/3.7/27.8% | 20.8/7.7/23.3%; with 4 passes 14.5/4.4/28.3% | 20.8/7.9/26.2%, 32 no better
 * than 8; without the backward's `dkv` base bwd 25.1/19.4/34.2% (4 passes). Fwd | bwd MFU
 * 0.604/0.617/0.599 | 0.478/0.506/0.480 -> 0.606/0.618/0.598 | 0.478/0.506/0.480; magi, 64 ranks
 * 0.573 | 0.473 -> 0.575 | 0.471 (comm imbalance 22.0% | 26.2% -> 12.7% | 20.5%). Holders in any
 * node (a NIC crossing added where the direct sender shares the receiver's node): fwd
 * 13.8/4.7/21.0%, but fwd MFU 0.606 -> 0.604 at 16 ranks. What is left is mostly
 * holder-bound: the ranks of the longest sequence receive most of its blocks and are the only
 * holders of one another's, so they are all hot together (256 ranks seed 1: half of the busiest
 * ranks' sends have holders only in other nodes, the other half only loaded ones).
 */

import { TripleIds } from '../../../core/triple-ids.ts';
import { kvBytesPerToken, qBytesPerToken } from '../../../model/attention.ts';
import type { ModelShape } from '../../../model/shape.ts';
import type { KvEdges } from './fetch.ts';
import { countingSort, type GroupPlacer, keyOffsets } from './groups.ts';
import { LoadHeap } from './load-heap.ts';
import type { Pieces } from './reshuffle.ts';
import type { TransferList } from './transfer-list.ts';

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
  /**
   * Sends placed so far (any kind) by slot * world + rank, every slot of `slot` covered: a holder
   * must have none in the transfer's slot. Read only.
   */
  readonly sendCount: Int32Array;
  readonly world: number;
  readonly gpusPerNode: number;
  /** Other traffic of the phase per rank, K/V-token units (null: none). */
  readonly baseLoad: Float64Array | null;
  readonly slack: number;
}

/** Default slack: hand-overs stop once the busiest rank is within 2% of the mean load. */
export const SAME_SLOT_SLACK = 0.02;

/**
 * Most greedy passes, each one after the previous one moved something. A pass skips a send for
 * good once it finds no holder (holders' loads drop later in the pass); the next pass retries it.
 * They converge within about 10 passes at 256 ranks.
 */
const MAX_PASSES = 8;

/**
 * Numbers the ranges (seq, start) of the edges by first use into `rangeOf`; returns how many (a
 * Map keyed by seq * 2^31 + start, a heap number, was a tenth of {@link sameSlotForward}'s time).
 */
function rangeIds(seq: Int32Array, start: Int32Array, rangeOf: Int32Array): number {
  const ids = new TripleIds();
  for (let e = 0; e < seq.length; e++) rangeOf[e] = ids.intern(seq[e]!, start[e]!);
  return ids.size;
}

/** New sender of every transfer (module comment); `src` itself when nothing changes. */
export function sameSlotForward(x: SameSlotInput): Int32Array {
  const { dst, seq, start, length, group, slot, world } = x;
  const n = x.src.length;
  if (n === 0) return x.src;
  const load = new Float64Array(world);
  let total = 0;
  for (let r = 0; r < world; r++) {
    load[r] = x.baseLoad ? x.baseLoad[r]! : 0;
    total += load[r]!;
  }
  let groups = 0;
  for (let e = 0; e < n; e++) {
    load[x.src[e]!]! += length[e]!;
    load[dst[e]!]! += length[e]!;
    total += 2 * length[e]!;
    if (group[e]! >= groups) groups = group[e]! + 1;
  }
  const target = (1 + x.slack) * (total / world);
  let hot = false;
  for (let r = 0; r < world && !hot; r++) hot = load[r]! > target;
  if (!hot) return x.src;
  const src = x.src.slice();
  const count = x.sendCount.slice();
  const g = Math.max(1, x.gpusPerNode);
  const nodes = Math.ceil(world / g);
  // Every range's receivers (the holders). Ranges numbered by first use (rangeIds).
  const rangeOf = new Int32Array(n);
  const ranges = rangeIds(seq, start, rangeOf);
  const nodeOf = new Int32Array(world);
  for (let r = 0; r < world; r++) nodeOf[r] = Math.floor(r / g);
  // Holders in two orders. Range order (by range, group, id): the holders of edge e before its
  // group are a prefix of its range's run, read for crossing sends (other nodes' holders; ties
  // between holders of equal load go to the earlier one there). Position order (by range, the
  // receiver's node, group, id): the prefix below e's group of its own node segment (`segFirst`),
  // read first for every send. At 256 ranks, longtail, mode (b), the crossing reads are about 90%.
  // Both by stable counting sorts (groups.ts, countingSort), ids ascending within a key.
  const byGroup = countingSort(group, groups, null);
  const nodeGroup = new Int32Array(n);
  for (let e = 0; e < n; e++) nodeGroup[e] = nodeOf[dst[e]!]! * groups + group[e]!;
  const byRange = countingSort(rangeOf, ranges, countingSort(nodeGroup, nodes * groups, null));
  const runOff = keyOffsets(rangeOf, ranges);
  // Range order copied out: group, receiver, its node and length per position.
  const rgGroup = new Int32Array(n);
  const rgDst = new Int32Array(n);
  const rgNode = new Int32Array(n);
  const rgLength = new Int32Array(n);
  {
    const at = runOff.slice(0, ranges);
    for (let k = 0; k < n; k++) {
      const u = byGroup[k]!;
      const j = at[rangeOf[u]!]!++;
      rgGroup[j] = group[u]!;
      rgDst[j] = dst[u]!;
      rgNode[j] = nodeOf[dst[u]!]!;
      rgLength[j] = length[u]!;
    }
  }
  // Position order: per position the first position of its node segment, and its group,
  // receiver and length copied out (the scan walks arrays in sequence, not through `byRange`).
  const posOf = new Int32Array(n);
  const segFirst = new Int32Array(n);
  const atGroup = new Int32Array(n);
  const atDst = new Int32Array(n);
  const atLength = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const u = byRange[i]!;
    posOf[u] = i;
    const prev = i > 0 ? byRange[i - 1]! : -1;
    segFirst[i] =
      prev >= 0 && rangeOf[prev] === rangeOf[u] && nodeOf[dst[prev]!] === nodeOf[dst[u]!]
        ? segFirst[i - 1]!
        : i;
    atGroup[i] = group[u]!;
    atDst[i] = dst[u]!;
    atLength[i] = length[u]!;
  }
  // Sends of every rank (direct senders), latest group first (it has the most holders), then by
  // id: `byGroup`'s group runs read from the last.
  const off = keyOffsets(src, world);
  const scan = new Int32Array(n);
  {
    const fill = off.slice(0, world);
    const gOff = keyOffsets(group, groups);
    for (let v = groups - 1; v >= 0; v--)
      for (let k = gOff[v]!; k < gOff[v + 1]!; k++) {
        const e = byGroup[k]!;
        scan[fill[src[e]!]!++] = e;
      }
  }
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    let moved = 0;
    const ptr = off.slice(0, world);
    const heap = LoadHeap.above(load, target);
    for (;;) {
      // The busiest rank (ties: the lowest id).
      const s = heap.popAbove(load, target);
      if (s < 0) break;
      let done = false;
      for (; ptr[s]! < off[s + 1]! && !done; ptr[s]!++) {
        const e = scan[ptr[s]!]!;
        if (src[e] !== s) continue;
        const d = dst[e]!;
        const len = length[e]!;
        const sl = slot[e]! * world;
        const ge = group[e]!;
        const nd = nodeOf[d]!;
        const crosses = nodeOf[s] !== nd;
        const ls = load[s]!;
        // The least loaded free holder (ties: the earliest in range order), in the receiver's node
        // first; elsewhere only when the transfer crosses nodes already (no hand-over adds a NIC
        // crossing).
        // `lb`: the best holder's load (infinite while there is none).
        let best = -1;
        let lb = Number.POSITIVE_INFINITY;
        const i = posOf[e]!;
        for (let j = segFirst[i]!; j < i; j++) {
          if (atGroup[j]! >= ge) break;
          const f = atDst[j]!;
          const lf = load[f]!;
          if (lf + len >= ls || lf >= lb || f === d || f === s || atLength[j]! < len) continue;
          if (count[sl + f] !== 0) continue;
          best = f;
          lb = lf;
        }
        if (best < 0 && crosses) {
          const r = rangeOf[e]!;
          for (let j = runOff[r]!, je = runOff[r + 1]!; j < je; j++) {
            if (rgGroup[j]! >= ge) break;
            const f = rgDst[j]!;
            const lf = load[f]!;
            if (lf + len >= ls || lf >= lb || rgNode[j] === nd || f === s || rgLength[j]! < len) continue;
            if (count[sl + f] !== 0) continue;
            best = f;
            lb = lf;
          }
        }
        if (best < 0) continue;
        src[e] = best;
        count[sl + best]!++;
        count[sl + s]!--;
        load[s]! -= len;
        load[best]! += len;
        moved++;
        done = true;
      }
      if (!done) break;
      heap.push(load[s]!, s);
    }
    if (moved === 0) break;
  }
  return src;
}

/**
 * Same-slot forwarding over a phase's placed `kv` transfers (`slotOf`, `idOf`: each edge's placer
 * slot and list id): hot senders hand transfers to free holders in the same round; the list (which
 * keeps each handed transfer's direct sender, `kvOrigin`) and the placer follow.
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
  backward: boolean,
): void {
  const world = placer.world;
  // Sends per (slot, rank) of every transfer placed so far (the placer keeps only whether one is).
  const count = new Int32Array(placer.slots * world);
  for (let c = 0, i = 0; i < list.size; c++) {
    const d = list.chunk(c);
    const end = Math.min(list.size, i + d.length / 7);
    for (let o = 0; i < end; i++, o += 7) count[d[o]! * world + d[o + 1]!]!++;
  }
  const src = sameSlotForward({
    src: edges.src,
    dst: edges.dst,
    seq: edges.seq,
    start: edges.start,
    length: edges.length,
    group,
    slot: slotOf,
    sendCount: count,
    world,
    gpusPerNode,
    baseLoad: baseLoad(edges, pieces, model, world, backward),
    slack: SAME_SLOT_SLACK,
  });
  if (src === edges.src) return;
  for (let e = 0; e < src.length; e++)
    if (src[e] !== edges.src[e]) {
      const sl = slotOf[e]! * world;
      count[sl + edges.src[e]!]!--;
      count[sl + src[e]!]!++;
      list.setSrc(idOf[e]!, src[e]!);
    }
  for (let e = 0; e < src.length; e++)
    if (src[e] !== edges.src[e]) {
      placer.setSends(slotOf[e]!, edges.src[e]!, count[slotOf[e]! * world + edges.src[e]!]! > 0);
      placer.setSends(slotOf[e]!, src[e]!, true);
    }
}

/**
 * A phase's traffic per rank besides its `kv` sends, in K/V-token units (what the simulator's
 * communication imbalance counts with them: bytes sent plus received). The reshuffle: each moving
 * token leaves its user rank and reaches its home in `in` and comes back in `out`, (Q,K,V + O)
 * forward and (dO + dQ,dK,dV) backward, 2 q + kv bytes at each end in either phase (9 K/V
 * tokens at 64 query and 8 K/V heads). The backward's `dkv` pushes: a receiver of K/V pushes a
 * partial of the same size back to the range's home (the direct sender), whoever forwards it.
 */
export function baseLoad(
  edges: KvEdges,
  pieces: Pieces,
  model: ModelShape,
  world: number,
  backward: boolean,
): Float64Array {
  const kv = kvBytesPerToken(model);
  const w = (2 * qBytesPerToken(model) + kv) / kv;
  const base = new Float64Array(world);
  for (let i = 0; i < pieces.moving.length; i++) {
    const p = pieces.moving[i]!;
    base[pieces.user[p]!]! += w * pieces.length[p]!;
    base[pieces.home[p]!]! += w * pieces.length[p]!;
  }
  if (backward)
    for (let e = 0; e < edges.src.length; e++) {
      base[edges.src[e]!]! += edges.length[e]!;
      base[edges.dst[e]!]! += edges.length[e]!;
    }
  return base;
}

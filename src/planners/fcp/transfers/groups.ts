/**
 * Pipeline and coalescer (docs/design.md, FCP's planner).
 *
 * Rounds are merged into groups of at most `coalesce` consecutive rounds, with one compute op per
 * rank per group for the work that group unlocks, so that the scheduling granularity (rounds of
 * small blocks) is decoupled from the execution granularity (big launches). Communication grouping
 * is separate (issue 14): a group's rounds run in chained comm groups of `commCoalesce` rounds,
 * one concurrent transfer call each, one after another; with `commCoalesce` 1 a rank has at most
 * one send and one receive in flight per link class (congestion-free on the wire: `kv` relays'
 * second hops may share a round with a message over the rank's other link, {@link
 * GroupPlacer.fillLink}), with `commCoalesce` >=
 * `coalesce` the whole group is one transfer call (the plan then carries no chains). Groups
 * opened for the backward's pushes after the last fetch group may hold more rounds
 * ({@link GroupPlacer.widenFrom}).
 * A rank runs its local work (op with after = -1) while the first group is in flight, then the
 * work each group unlocks while the next one is in flight.
 *
 * Rounds are placed one at a time, each into the earliest group at or after the group it may start
 * in (its "ready" group: one after the group that brings its data, or one after the compute op
 * whose result it pushes) that still has room; groups open at the end as needed. Rounds and groups
 * are numbered at the end: groups in order, rounds by group and then placement order.
 */
import { doubled } from '../../../core/doubled.ts';
import type { IntColumn } from '../../../core/int-column.ts';
import { sameNode } from '../../../core/nodes.ts';
import { type ComputeTable, Kind, type Phase } from '../../../plan/types.ts';
import { railRounds } from './rail-rounds.ts';
import type { Pieces } from './reshuffle.ts';
import { ROWS, type TransferList } from './transfer-list.ts';

/**
 * Assigns rounds to groups of at most `coalesce` rounds (from a given group on, optionally more:
 * {@link GroupPlacer.widenFrom}), and keeps, per round, which ranks already
 * send or receive in it, so that single transfers (pushes) can join existing rounds where both
 * their ranks are free: they then cost no extra round, and a round stays a matching.
 */
export class GroupPlacer {
  private readonly count: number[] = [];
  private readonly slotGroup: number[] = [];
  private readonly groupSlots: number[][] = [];
  /**
   * Per slot and rank, the link classes the rank sends (receives) a message over in the slot, one
   * bit each (1: across nodes, the NIC, or every message without a node size; 2: between node
   * mates, NVLink): nonzero is busy for {@link fill}, a class's bit for {@link fillLink}.
   */
  private send: Uint8Array;
  private recv: Uint8Array;
  /** Per rank: groups below this are full and hold no free send (receive) slot for the rank. */
  private readonly sendFrom: Int32Array;
  private readonly recvFrom: Int32Array;

  /** Position of each slot among its group's rounds (placement order). */
  private readonly slotPos: number[] = [];
  /**
   * Per group and rank (g * world + rank), the positions of the group's slots in which the rank
   * sends (receives), one bit each: {@link fill} finds a group's first slot where both ranks are
   * free from two words instead of reading every slot (at 256 ranks, mode (b), longtail: 5.8M slot
   * reads per plan, about 22 per transfer). Null when `coalesce` is over 32 (then slot by slot).
   */
  private sendBits: Int32Array | null;
  private recvBits: Int32Array | null;

  /**
   * @param coalesce rounds per group (one compute op per rank per group)
   * @param commCoalesce rounds per comm group: a group's rounds run in chained comm groups of this
   *   many concurrent rounds (>= coalesce: one comm group per group, the plan carries no chains)
   * @param nodeSize GPUs per node, for {@link fillLink}'s link classes (0: one class)
   */
  constructor(
    readonly coalesce: number,
    readonly world: number,
    readonly commCoalesce: number = coalesce,
    private readonly nodeSize = 0,
  ) {
    this.send = new Uint8Array(64 * world);
    this.recv = new Uint8Array(64 * world);
    this.sendFrom = new Int32Array(world);
    this.recvFrom = new Int32Array(world);
    this.sendBits = coalesce <= 32 ? new Int32Array(16 * world) : null;
    this.recvBits = coalesce <= 32 ? new Int32Array(16 * world) : null;
  }

  /** Groups from this index on hold up to {@link wideCap} rounds ({@link widenFrom}). */
  private wideFrom = Number.POSITIVE_INFINITY;
  private wideCap = 0;

  /**
   * Groups from `from` on (never one opened already) hold up to `cap` rounds instead of
   * `coalesce`, at most `commCoalesce` (one comm group each) and 32 (the bit words): for pushes
   * placed past the last fetch group, where a group's size no longer paces compute (no op waits
   * for those groups) but every group boundary is a point where the ranks exchanging in it wait
   * for each other. Ignored when chained or when `cap` is not larger than `coalesce`.
   */
  widenFrom(from: number, cap: number): void {
    if (this.chained || cap <= this.coalesce) return;
    this.wideFrom = Math.max(from, this.count.length);
    this.wideCap = Math.min(cap, this.commCoalesce, 32);
  }

  /** Rounds group g may hold. */
  private cap(g: number): number {
    return g >= this.wideFrom ? this.wideCap : this.coalesce;
  }

  /** Rounds group g still has room for (a group not opened yet: all it may hold). */
  room(g: number): number {
    return g < this.count.length ? this.cap(g) - this.count[g]! : this.cap(g);
  }

  /** Number of groups opened so far. */
  get groups(): number {
    return this.count.length;
  }

  /**
   * Places one round in the earliest group >= min(ready, groups) with room (a ready group past
   * the last one opens the next group: groups are consecutive); returns its slot.
   */
  place(ready: number): number {
    let g = Math.max(0, Math.min(ready, this.count.length));
    while (g < this.count.length && this.count[g]! >= this.cap(g)) g++;
    return this.open(g);
  }

  private open(g: number): number {
    if (g === this.count.length) {
      this.count.push(0);
      this.groupSlots.push([]);
      if (this.sendBits !== null && (g + 1) * this.world > this.sendBits.length) {
        this.sendBits = doubled(this.sendBits);
        this.recvBits = doubled(this.recvBits!);
      }
    }
    this.slotPos.push(this.count[g]!);
    this.count[g]!++;
    const slot = this.slotGroup.length;
    this.slotGroup.push(g);
    this.groupSlots[g]!.push(slot);
    const W = this.world;
    if ((slot + 1) * W > this.send.length) {
      this.send = doubled(this.send);
      this.recv = doubled(this.recv);
    }
    return slot;
  }

  /** Bit of a message's link class in {@link send} / {@link recv}: 2 between node mates (NVLink), else 1. */
  private linkBit(src: number, dst: number): number {
    return this.nodeSize > 0 && sameNode(src, dst, this.nodeSize) ? 2 : 1;
  }

  /** Records that `src` sends to `dst` in `slot`. */
  mark(slot: number, src: number, dst: number): void {
    const bit = this.linkBit(src, dst);
    this.send[slot * this.world + src]! |= bit;
    this.recv[slot * this.world + dst]! |= bit;
    if (this.sendBits !== null) {
      const o = this.slotGroup[slot]! * this.world;
      const bit = 1 << this.slotPos[slot]!;
      this.sendBits[o + src]! |= bit;
      this.recvBits![o + dst]! |= bit;
    }
  }

  /**
   * Places one transfer src -> dst: into the first round of the earliest group >= min(ready,
   * groups) where both ranks are free, or a new round in the earliest such group with room.
   * `naive`: only the receiver must be free (senders uncoordinated). Returns the slot.
   */
  fill(src: number, dst: number, ready: number, naive = false): number {
    const W = this.world;
    let g = Math.max(0, Math.min(ready, this.count.length));
    if (!naive) g = Math.max(g, Math.min(this.sendFrom[src]!, this.recvFrom[dst]!));
    const sb = this.sendBits;
    const rb = this.recvBits;
    if (sb !== null && rb !== null) {
      // The same search over the groups' bit words: slot positions follow placement order, so the
      // lowest free bit is the first free slot.
      for (; g < this.count.length; g++) {
        const n = this.count[g]!;
        const all = n >= 32 ? -1 : (1 << n) - 1;
        const sBusy = naive ? 0 : sb[g * W + src]! & all;
        const rBusy = rb[g * W + dst]! & all;
        const free = ~(sBusy | rBusy) & all;
        if (free !== 0) {
          const slot = this.groupSlots[g]![31 - Math.clz32(free & -free)]!;
          this.mark(slot, src, dst);
          return slot;
        }
        if (n < this.cap(g)) break;
        if (!naive) {
          if (sBusy === all && this.sendFrom[src] === g) this.sendFrom[src] = g + 1;
          if (rBusy === all && this.recvFrom[dst] === g) this.recvFrom[dst] = g + 1;
        }
      }
      const slot = this.open(g);
      this.mark(slot, src, dst);
      return slot;
    }
    for (; g < this.count.length; g++) {
      const slots = this.groupSlots[g]!;
      const full = this.count[g]! >= this.cap(g);
      let sendFree = false;
      let recvFree = false;
      for (const slot of slots) {
        const sf = naive || this.send[slot * W + src] === 0;
        const rf = this.recv[slot * W + dst] === 0;
        if (sf && rf) {
          this.mark(slot, src, dst);
          return slot;
        }
        sendFree ||= sf;
        recvFree ||= rf;
      }
      if (!full) break;
      if (!naive) {
        if (!sendFree && this.sendFrom[src] === g) this.sendFrom[src] = g + 1;
        if (!recvFree && this.recvFrom[dst] === g) this.recvFrom[dst] = g + 1;
      }
    }
    const slot = this.open(g);
    this.mark(slot, src, dst);
    return slot;
  }

  /**
   * Places one transfer src -> dst like {@link fill}, but a round needs both ranks free only on the
   * transfer's link class: a rank may receive (send) one message over NVLink and one over its NIC
   * in one round, each link still carrying one message (issue 15: "congestion 1 in every round on
   * every link class"). For the `kv` relays' second hops (phase.ts, placeKv): their receiver's NIC
   * is busy in every round of the groups that bring its own fetches, so with one message per rank
   * and round they waited for the fetches to thin out (simulated, `magi` 1024 ranks seed 2, mode
   * (b): a rank's 56 last tasks, 13.7 ms, waited for hops its node mates forwarded in groups 9-11,
   * their feeds having arrived in groups 0-9; `npx tsx bench/fcp-gaps.ts --loader-layout --batch
   * magi --worlds 1024 --seeds 2 --dir forward --rank 267`). Without a node size (constructor)
   * every message is one class. {@link setSends} marks a sender without its class: call this
   * before same-slot hand-overs.
   */
  fillLink(src: number, dst: number, ready: number): number {
    const W = this.world;
    const bit = this.linkBit(src, dst);
    let g = Math.max(0, Math.min(ready, this.count.length));
    for (; g < this.count.length; g++) {
      for (const slot of this.groupSlots[g]!) {
        if ((this.send[slot * W + src]! & bit) === 0 && (this.recv[slot * W + dst]! & bit) === 0) {
          this.mark(slot, src, dst);
          return slot;
        }
      }
      if (this.count[g]! < this.cap(g)) break;
    }
    const slot = this.open(g);
    this.mark(slot, src, dst);
    return slot;
  }

  /** Whether `rank` sends nothing in `slot` yet. */
  sendFree(slot: number, rank: number): boolean {
    return this.send[slot * this.world + rank] === 0;
  }

  /** Marks whether `rank` sends in `slot` (same-slot forwarding hands sends over, same-slot.ts). */
  setSends(slot: number, rank: number, sends: boolean): void {
    this.send[slot * this.world + rank] = sends ? 1 : 0;
    if (this.sendBits !== null) {
      const o = this.slotGroup[slot]! * this.world + rank;
      const bit = 1 << this.slotPos[slot]!;
      this.sendBits[o] = sends ? this.sendBits[o]! | bit : this.sendBits[o]! & ~bit;
    }
  }

  /** Number of slots (rounds) placed so far. */
  get slots(): number {
    return this.slotGroup.length;
  }

  /** Group of a placed slot. */
  groupOf(slot: number): number {
    return this.slotGroup[slot]!;
  }

  /** Whether groups are split into chained comm groups. */
  get chained(): boolean {
    return this.commCoalesce < this.coalesce;
  }

  /** Comm groups per group at most (1 when not chained). */
  get commPerGroup(): number {
    return this.chained ? Math.ceil(this.coalesce / this.commCoalesce) : 1;
  }

  /** Comm group of a slot within its group (0 when not chained). */
  commOf(slot: number): number {
    return this.chained ? Math.floor(this.slotPos[slot]! / this.commCoalesce) : 0;
  }

  /**
   * Final numbering: round of every slot (by group, then placement order), group of every round,
   * and, when chained, the comm group of every round (consecutive `commCoalesce` rounds of a group).
   */
  finish(): { roundOfSlot: Int32Array; groupOfRound: Int32Array; commGroupOfRound?: Int32Array } {
    const n = this.slotGroup.length;
    const first = new Int32Array(this.count.length + 1);
    for (let g = 0; g < this.count.length; g++) first[g + 1] = first[g]! + this.count[g]!;
    const next = first.slice(0, this.count.length);
    const roundOfSlot = new Int32Array(n);
    const groupOfRound = new Int32Array(n);
    for (let s = 0; s < n; s++) {
      const g = this.slotGroup[s]!;
      const r = next[g]!++;
      roundOfSlot[s] = r;
      groupOfRound[r] = g;
    }
    const commGroupOfRound = this.commGroupsOf(groupOfRound);
    return commGroupOfRound ? { roundOfSlot, groupOfRound, commGroupOfRound } : { roundOfSlot, groupOfRound };
  }

  /**
   * When chained, the comm group of every round of `groupOfRound` (non-decreasing): consecutive
   * `commCoalesce` rounds of a group share one; undefined when not chained.
   */
  commGroupsOf(groupOfRound: Int32Array): Int32Array | undefined {
    if (!this.chained) return undefined;
    const commGroupOfRound = new Int32Array(groupOfRound.length);
    let comm = -1;
    let pos = 0;
    for (let r = 0; r < groupOfRound.length; r++) {
      pos = r > 0 && groupOfRound[r] === groupOfRound[r - 1] ? pos + 1 : 0;
      if (pos % this.commCoalesce === 0) comm++;
      commGroupOfRound[r] = comm;
    }
    return commGroupOfRound;
  }
}

/**
 * Offsets of the runs of a counting sort of ids 0..n-1 by key[id] in [0, keys): run k holds the
 * positions [out[k], out[k + 1]) (length keys + 1; CSR offsets).
 */
export function keyOffsets(key: Int32Array, keys: number): Int32Array {
  const first = new Int32Array(keys + 1);
  for (let i = 0; i < key.length; i++) first[key[i]! + 1]!++;
  for (let k = 0; k < keys; k++) first[k + 1]! += first[k]!;
  return first;
}

/** Stable counting sort of ids 0..n-1 (taken in the order of `input`, or ascending) by key[id] in [0, keys). */
export function countingSort(key: Int32Array, keys: number, input: Int32Array | null): Int32Array {
  const n = key.length;
  const first = keyOffsets(key, keys);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const id = input ? input[i]! : i;
    out[first[key[id]!]!++] = id;
  }
  return out;
}

/**
 * Assembles a phase: numbers the rounds, sorts the transfers by round (stable), and maps the
 * `sendAfter` pairs (provisional transfer ids) to rows. `pxnNodeSize` (> 1: the plan is for PXN
 * routing on nodes of that many ranks): rounds that would put two messages across nodes on one
 * NIC are split within their group (rail-rounds.ts).
 */
export function finishPhase(
  placer: GroupPlacer,
  list: TransferList,
  compute: ComputeTable,
  sendAfter: { transfer: IntColumn; compute: IntColumn },
  pxnNodeSize = 0,
): Phase {
  const finished = placer.finish();
  let { groupOfRound, commGroupOfRound } = finished;
  const n = list.size;
  let roundOf: Int32Array = new Int32Array(n);
  // Under PXN, rounds split where two messages across nodes would share a NIC (rail-rounds.ts),
  // which reads every transfer's ends: taken in the same pass over the list.
  const ends = pxnNodeSize > 1 ? { src: new Int32Array(n), dst: new Int32Array(n) } : null;
  for (let c = 0, i = 0; i < n; c++) {
    const d = list.chunk(c);
    const end = Math.min(n, i + ROWS);
    for (let o = 0; i < end; i++, o += 7) {
      roundOf[i] = finished.roundOfSlot[d[o]!]!;
      if (ends !== null) {
        ends.src[i] = d[o + 1]!;
        ends.dst[i] = d[o + 2]!;
      }
    }
  }
  if (ends !== null) {
    const rails = railRounds(roundOf, ends.src, ends.dst, groupOfRound, pxnNodeSize, placer.world);
    if (rails !== null) {
      roundOf = rails.roundOf;
      groupOfRound = rails.groupOfRound;
      commGroupOfRound = placer.commGroupsOf(groupOfRound);
    }
  }
  const rounds = groupOfRound.length;
  // Row of every transfer: stable by round (a counting sort's scatter positions), filled by one
  // sequential pass over the list (reading it in row order would miss the cache on every row).
  const rowOf = new Int32Array(n);
  const next = new Int32Array(rounds + 1);
  for (let i = 0; i < n; i++) next[roundOf[i]! + 1]!++;
  for (let r = 0; r < rounds; r++) next[r + 1]! += next[r]!;
  for (let i = 0; i < n; i++) rowOf[i] = next[roundOf[i]!]!++;
  const round = new Int32Array(n);
  const src = new Int32Array(n);
  const dst = new Int32Array(n);
  const kind = new Uint8Array(n);
  const seq = new Int32Array(n);
  const start = new Int32Array(n);
  const length = new Int32Array(n);
  list.scatter(rowOf, round, roundOf, src, dst, kind, seq, start, length);
  // sendAfter pairs by transfer row.
  const saT = sendAfter.transfer.toArray();
  const saC = sendAfter.compute.toArray();
  const rowKey = new Int32Array(saT.length);
  for (let i = 0; i < saT.length; i++) rowKey[i] = rowOf[saT[i]!]!;
  const saOrder = countingSort(rowKey, n, null);
  const transfer = new Int32Array(saT.length);
  const comp = new Int32Array(saT.length);
  for (let i = 0; i < saT.length; i++) {
    transfer[i] = rowKey[saOrder[i]!]!;
    comp[i] = saC[saOrder[i]!]!;
  }
  const phase: Phase = {
    transfers: { round, src, dst, kind, seq, start, length },
    groupOfRound,
    compute,
    sendAfter: { transfer, compute: comp },
  };
  if (commGroupOfRound) phase.commGroupOfRound = commGroupOfRound;
  // Direct senders of handed-over transfers (docs/plan-format.md, `kvOrigin`); a transfer
  // handed back to its own sender needs none.
  let handed = false;
  for (const [i, o] of list.origins()) handed ||= src[rowOf[i]!] !== o;
  if (handed) {
    const kvOrigin = src.slice();
    for (const [i, o] of list.origins()) kvOrigin[rowOf[i]!] = o;
    phase.kvOrigin = kvOrigin;
  }
  return phase;
}

/**
 * Adds the `out` pushes of the moving pieces (home -> user rank) in their placed slots, each after
 * the op that last touches its rows (`sendAfter`); the forward (O) and the backward (dQ, dK, dV)
 * push the same pieces.
 */
export function addOutPushes(
  list: TransferList,
  slot: Int32Array,
  pieces: Pieces,
  lastOp: Int32Array,
  sendAfter: { transfer: IntColumn; compute: IntColumn },
  dst: Int32Array,
): void {
  const m = pieces.moving;
  for (let i = 0; i < m.length; i++) {
    const p = m[i]!;
    const id = list.add(
      slot[i]!,
      pieces.home[p]!,
      dst[i]!,
      Kind.out,
      pieces.seq[p]!,
      pieces.start[p]!,
      pieces.length[p]!,
    );
    sendAfter.transfer.push(id);
    sendAfter.compute.push(lastOp[p]!);
  }
}

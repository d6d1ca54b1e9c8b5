/**
 * Incremental construction of an `fcp-plan/1` plan for the baseline planners: explicit rows
 * (layouts, tasks, transfers) and compact chunk rows (sequence sets, chunk layouts, chunk tasks,
 * chunk transfers) side by side.
 *
 * Compute ops are addressed by (rank, slot): a slot is a small integer that orders a rank's ops
 * (e.g. the ring step), and every task added to the same (rank, slot) lands in the same op. Ops are
 * emitted sorted by rank, then slot, so a rank's ops run in slot order; `sendAfter` pairs name a
 * (rank, slot) and are resolved to op ids at the end.
 */

import { assert } from '../../core/assert.ts';
import { iota } from '../../core/gather.ts';
import { freezeColumns, IntColumn, intColumns } from '../../core/int-column.ts';
import { radixSortBy } from '../../core/radix-sort.ts';
import type { ChunkLayout, KindCode, Phase, Plan } from '../../plan/types.ts';
import { PLAN_FORMAT } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';

const LAYOUT = ['rank', 'seq', 'start', 'length'] as const;
const CHUNK_LAYOUT = ['rank', 'set', 'parts', 'part'] as const;

/** A growable Uint8Array for the `kind` column. */
class KindColumn {
  private data = new Uint8Array(64);
  private n = 0;
  push(v: KindCode): void {
    if (this.n === this.data.length) {
      const g = new Uint8Array(this.data.length * 2);
      g.set(this.data);
      this.data = g;
    }
    this.data[this.n++] = v;
  }
  toArray(): Uint8Array {
    return this.data.slice(0, this.n);
  }
}

/** Builds one phase (forward or backward). */
export class PhaseBuilder {
  private readonly t = intColumns(['round', 'src', 'dst', 'seq', 'start', 'length'] as const);
  private readonly tKind = new KindColumn();
  private readonly ct = intColumns(['round', 'src', 'dst', 'set', 'parts', 'part'] as const);
  private readonly ctKind = new KindColumn();
  /**
   * Per rank, per op slot: the group the op runs after, plus 2 (0: no op there yet). Typed arrays
   * grown on demand, and the ops' tasks in flat columns below: a ring of N ranks has N^2 ops per
   * phase, and an object with two arrays per op kept the collector marking half a gigabyte again
   * and again (8 of the 10 s of planning a 1024-rank ring).
   */
  private readonly slotAfter: Int32Array[];
  /** Tasks of the ops in the order added: rank, slot, 1 for a chunk task, and the task id. */
  private readonly opTasks = intColumns(['rank', 'slot', 'chunk', 'id'] as const);
  /** Deferred sendAfter pairs: transfer id, rank, slot. */
  private readonly sa = intColumns(['transfer', 'rank', 'slot'] as const);
  private readonly csa = intColumns(['transfer', 'rank', 'slot'] as const);
  private maxRound = -1;

  constructor(world: number) {
    this.slotAfter = Array.from({ length: world }, () => new Int32Array(0));
  }

  /** Adds an explicit transfer; returns its id. */
  transfer(
    round: number,
    src: number,
    dst: number,
    kind: KindCode,
    seq: number,
    start: number,
    length: number,
  ): number {
    const t = this.t;
    t.round.push(round);
    t.src.push(src);
    t.dst.push(dst);
    t.seq.push(seq);
    t.start.push(start);
    t.length.push(length);
    this.tKind.push(kind);
    this.maxRound = Math.max(this.maxRound, round);
    return t.round.length - 1;
  }

  /** Adds a chunk transfer (part `part` of `parts` of every sequence of `set`); returns its id. */
  chunkTransfer(
    round: number,
    src: number,
    dst: number,
    kind: KindCode,
    set: number,
    parts: number,
    part: number,
  ): number {
    const c = this.ct;
    c.round.push(round);
    c.src.push(src);
    c.dst.push(dst);
    c.set.push(set);
    c.parts.push(parts);
    c.part.push(part);
    this.ctKind.push(kind);
    this.maxRound = Math.max(this.maxRound, round);
    return c.round.length - 1;
  }

  /** Marks the op (rank, slot) as running after group `after` (the same for all of its tasks). */
  private slot(rank: number, slot: number, after: number): void {
    let row = this.slotAfter[rank]!;
    if (slot >= row.length) {
      const grown = new Int32Array(Math.max(slot + 1, 2 * row.length, 8));
      grown.set(row);
      this.slotAfter[rank] = row = grown;
    }
    if (row[slot] === 0) row[slot] = after + 2;
    assert(row[slot] === after + 2, `op (${rank}, ${slot}) waits for group ${row[slot]! - 2}, not ${after}`);
  }

  /** Puts explicit task `task` into the op (rank, slot) that runs after group `after`. */
  task(rank: number, slot: number, after: number, task: number): void {
    this.slot(rank, slot, after);
    this.addOpTask(rank, slot, 0, task);
  }

  /** Puts chunk task `chunkTask` into the op (rank, slot). */
  chunkTask(rank: number, slot: number, after: number, chunkTask: number): void {
    this.slot(rank, slot, after);
    this.addOpTask(rank, slot, 1, chunkTask);
  }

  private addOpTask(rank: number, slot: number, chunk: number, id: number): void {
    const o = this.opTasks;
    o.rank.push(rank);
    o.slot.push(slot);
    o.chunk.push(chunk);
    o.id.push(id);
  }

  /** True when the op (rank, slot) exists (has at least one task). */
  hasOp(rank: number, slot: number): boolean {
    const row = this.slotAfter[rank]!;
    return slot < row.length && row[slot]! !== 0;
  }

  /** Transfer `transfer` starts after the op (rank, slot) on its sender. */
  sendAfter(transfer: number, rank: number, slot: number): void {
    this.sa.transfer.push(transfer);
    this.sa.rank.push(rank);
    this.sa.slot.push(slot);
  }

  /** Chunk transfer `chunkTransfer` starts after the op (rank, slot) on its sender. */
  chunkSendAfter(chunkTransfer: number, rank: number, slot: number): void {
    this.csa.transfer.push(chunkTransfer);
    this.csa.rank.push(rank);
    this.csa.slot.push(slot);
  }

  /** Rounds used so far (highest round + 1). */
  get rounds(): number {
    return this.maxRound + 1;
  }

  /**
   * Freezes the phase. `groupOfRound` has one entry per round used (no empty rounds); `withChunks` adds the chunk CSR
   * columns and the chunk transfer table (set it when the plan carries chunk rows).
   */
  build(groupOfRound: Int32Array, withChunks: boolean): Phase {
    assert(
      groupOfRound.length === this.rounds,
      `groupOfRound has ${groupOfRound.length} rounds, transfers use ${this.rounds}`,
    );
    // Ops by rank, then slot (the order of their ids); each op's explicit tasks and chunk tasks in
    // the order they were added: the task rows stably sorted by slot, then by rank.
    const o = freezeColumns(this.opTasks);
    const order = radixSortBy(radixSortBy(iota(o.rank.length), o.slot), o.rank);
    const opId = this.slotAfter.map((row) => new Int32Array(row.length).fill(-1));
    const rank = new IntColumn();
    const after = new IntColumn();
    const taskOffsets = new IntColumn();
    const taskIds = new IntColumn();
    const chunkOffsets = new IntColumn();
    const chunkIds = new IntColumn();
    taskOffsets.push(0);
    chunkOffsets.push(0);
    for (let a = 0; a < order.length; ) {
      const r = o.rank[order[a]!]!;
      const slot = o.slot[order[a]!]!;
      let b = a;
      while (b < order.length && o.rank[order[b]!] === r && o.slot[order[b]!] === slot) b++;
      opId[r]![slot] = rank.length;
      rank.push(r);
      after.push(this.slotAfter[r]![slot]! - 2);
      for (let x = a; x < b; x++) if (o.chunk[order[x]!] === 0) taskIds.push(o.id[order[x]!]!);
      for (let x = a; x < b; x++) if (o.chunk[order[x]!] === 1) chunkIds.push(o.id[order[x]!]!);
      taskOffsets.push(taskIds.length);
      chunkOffsets.push(chunkIds.length);
      a = b;
    }
    const resolve = (r: number, slot: number): number => {
      const id = opId[r]?.[slot] ?? -1;
      assert(id >= 0, `sendAfter names op (${r}, ${slot}), which has no task`);
      return id;
    };
    const sa = freezeColumns(this.sa);
    const csa = freezeColumns(this.csa);
    const phase: Phase = {
      transfers: { ...freezeColumns(this.t), kind: this.tKind.toArray() },
      groupOfRound: groupOfRound.slice(),
      compute: {
        rank: rank.toArray(),
        after: after.toArray(),
        taskOffsets: taskOffsets.toArray(),
        taskIds: taskIds.toArray(),
      },
      sendAfter: {
        transfer: sa.transfer,
        compute: sa.transfer.map((_, i) => resolve(sa.rank[i]!, sa.slot[i]!)),
      },
    };
    if (withChunks) {
      phase.compute.chunkTaskOffsets = chunkOffsets.toArray();
      phase.compute.chunkTaskIds = chunkIds.toArray();
      phase.sendAfter.chunkTransfer = csa.transfer;
      phase.sendAfter.chunkCompute = csa.transfer.map((_, i) => resolve(csa.rank[i]!, csa.slot[i]!));
      phase.chunkTransfers = { ...freezeColumns(this.ct), kind: this.ctKind.toArray() };
    } else {
      assert(
        this.ct.round.length === 0 && chunkIds.length === 0,
        'chunk rows in a plan built without chunks',
      );
    }
    return phase;
  }
}

/** Builds a whole plan: layouts, tasks, chunk rows and the two phases. */
export class PlanBuilder {
  readonly forward: PhaseBuilder;
  readonly backward: PhaseBuilder;
  private readonly home = intColumns(LAYOUT);
  private readonly user = intColumns(LAYOUT);
  private readonly tasks = intColumns(['rank', 'seq', 'qStart', 'qLength', 'kvStart', 'kvLength'] as const);
  private readonly setOffsets = new IntColumn();
  private readonly setSeqs = new IntColumn();
  private readonly setPad = new IntColumn();
  private readonly homeChunks = intColumns(CHUNK_LAYOUT);
  private readonly userChunks = intColumns(CHUNK_LAYOUT);
  private readonly chunkTasks = intColumns(['rank', 'set', 'parts', 'qPart', 'kvPart'] as const);

  constructor(readonly problem: Problem) {
    this.forward = new PhaseBuilder(problem.world);
    this.backward = new PhaseBuilder(problem.world);
    this.setOffsets.push(0);
  }

  /** Adds a home range (and, with `alsoUser`, the same user range). */
  homeRange(rank: number, seq: number, start: number, length: number, alsoUser: boolean): void {
    for (const t of alsoUser ? [this.home, this.user] : [this.home]) {
      t.rank.push(rank);
      t.seq.push(seq);
      t.start.push(start);
      t.length.push(length);
    }
  }

  /** Adds an explicit task; returns its id. */
  task(
    rank: number,
    seq: number,
    qStart: number,
    qLength: number,
    kvStart: number,
    kvLength: number,
  ): number {
    const t = this.tasks;
    t.rank.push(rank);
    t.seq.push(seq);
    t.qStart.push(qStart);
    t.qLength.push(qLength);
    t.kvStart.push(kvStart);
    t.kvLength.push(kvLength);
    return t.rank.length - 1;
  }

  /** Adds a sequence set (padded to a multiple of `padTo`, 0 for none); returns its id. */
  seqSet(seqs: ArrayLike<number>, padTo: number): number {
    for (let i = 0; i < seqs.length; i++) this.setSeqs.push(seqs[i]!);
    this.setOffsets.push(this.setSeqs.length);
    this.setPad.push(padTo);
    return this.setPad.length - 1;
  }

  /** Part `part` of `parts` of every sequence of `set` lives on `rank` (and, with `alsoUser`, starts there). */
  homeChunk(rank: number, set: number, parts: number, part: number, alsoUser: boolean): void {
    for (const t of alsoUser ? [this.homeChunks, this.userChunks] : [this.homeChunks]) {
      t.rank.push(rank);
      t.set.push(set);
      t.parts.push(parts);
      t.part.push(part);
    }
  }

  /** Adds a chunk task; returns its id. */
  chunkTask(rank: number, set: number, parts: number, qPart: number, kvPart: number): number {
    const t = this.chunkTasks;
    t.rank.push(rank);
    t.set.push(set);
    t.parts.push(parts);
    t.qPart.push(qPart);
    t.kvPart.push(kvPart);
    return t.rank.length - 1;
  }

  /** True when the plan carries compact chunk rows. */
  get hasChunks(): boolean {
    return this.setPad.length > 0;
  }

  /** Freezes the plan. */
  build(
    strategy: string,
    forwardGroups: Int32Array,
    backwardGroups: Int32Array,
    meta: Record<string, unknown>,
  ): Plan {
    const p = this.problem;
    const chunks = this.hasChunks;
    const plan: Plan = {
      format: PLAN_FORMAT,
      strategy,
      world: p.world,
      mask: p.mask,
      model: { ...p.model },
      sequences: p.sequences.slice(),
      userLayout: freezeColumns(this.user),
      homeLayout: freezeColumns(this.home),
      tasks: freezeColumns(this.tasks),
      forward: this.forward.build(forwardGroups, chunks),
      backward: this.backward.build(backwardGroups, chunks),
    };
    if (chunks) {
      plan.seqSets = {
        offsets: this.setOffsets.toArray(),
        seqs: this.setSeqs.toArray(),
        padTo: this.setPad.toArray(),
      };
      plan.homeChunks = freezeColumns(this.homeChunks) as ChunkLayout;
      plan.userChunks = freezeColumns(this.userChunks) as ChunkLayout;
      plan.chunkTasks = freezeColumns(this.chunkTasks);
    }
    plan.meta = meta;
    return plan;
  }
}

/** groupOfRound where every round is its own group: [0, 1, ..., rounds-1]. */
export function oneRoundPerGroup(rounds: number): Int32Array {
  return iota(rounds);
}

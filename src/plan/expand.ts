/**
 * Expansion of compact chunk rows (docs/plan-format.md, "Compact chunk rows") into explicit rows.
 *
 * A chunk row stands for the same row for every sequence of its set; part i of P of a sequence of
 * length L is tokens [i*c, min((i+1)*c, L)), c = ceil(L/P), and empty parts are skipped. Executors
 * that work at small sizes (the CPU runtime) expand a plan once and then only deal with explicit
 * rows. Ids of the explicit rows are kept; expanded rows are appended after them, chunk row by chunk
 * row and, inside a chunk row, in the set's sequence order, so the expansion is deterministic.
 */
import { freezeColumns, IntColumn, intColumns } from '../core/int-column.ts';
import { fail } from '../core/issues.ts';
import { partLength, partStart } from './parts.ts';
import type {
  ChunkLayout,
  ComputeTable,
  Layout,
  Phase,
  Plan,
  SendAfterTable,
  TaskTable,
  TransferTable,
} from './types.ts';
import { COLUMNS } from './types.ts';

/** A token range of one sequence. */
interface Range {
  seq: number;
  start: number;
  length: number;
}

/** Non-empty parts of the sequences of `set`, cut into `parts`, part `part`. */
function partRanges(
  plan: Plan,
  set: number,
  parts: number,
  part: number,
  path: string,
  row: number,
): Range[] {
  const sets = plan.seqSets;
  if (!sets || set < 0 || set + 1 >= sets.offsets.length)
    fail(
      'plan.chunk.set',
      `chunk row refers to sequence set ${set}, which the plan does not define`,
      path,
      row,
    );
  if (parts < 1 || part < 0 || part >= parts)
    fail('plan.chunk.part', `chunk row has part ${part} of ${parts}; need 0 <= part < parts`, path, row);
  const out: Range[] = [];
  for (let i = sets.offsets[set]!; i < sets.offsets[set + 1]!; i++) {
    const seq = sets.seqs[i]!;
    const len = plan.sequences[seq];
    if (len === undefined)
      fail('plan.chunk.seq', `sequence set ${set} names sequence ${seq}, which does not exist`, path, row);
    const length = partLength(len, parts, part);
    if (length > 0) out.push({ seq, start: partStart(len, parts, part), length });
  }
  return out;
}

function appendLayout(base: Layout, chunks: ChunkLayout | undefined, plan: Plan, path: string): Layout {
  if (!chunks || chunks.rank.length === 0) return base;
  const cols = {
    rank: new IntColumn(),
    seq: new IntColumn(),
    start: new IntColumn(),
    length: new IntColumn(),
  };
  for (let i = 0; i < base.rank.length; i++) {
    cols.rank.push(base.rank[i]!);
    cols.seq.push(base.seq[i]!);
    cols.start.push(base.start[i]!);
    cols.length.push(base.length[i]!);
  }
  for (let r = 0; r < chunks.rank.length; r++)
    for (const p of partRanges(plan, chunks.set[r]!, chunks.parts[r]!, chunks.part[r]!, path, r)) {
      cols.rank.push(chunks.rank[r]!);
      cols.seq.push(p.seq);
      cols.start.push(p.start);
      cols.length.push(p.length);
    }
  return {
    rank: cols.rank.toArray(),
    seq: cols.seq.toArray(),
    start: cols.start.toArray(),
    length: cols.length.toArray(),
  };
}

/** Expands chunk tasks; returns the new task table and, per chunk task row, its expanded task ids. */
function expandTasks(plan: Plan): { tasks: TaskTable; idsOfChunk: number[][] } {
  const ct = plan.chunkTasks;
  if (!ct || ct.rank.length === 0) return { tasks: plan.tasks, idsOfChunk: [] };
  const t = plan.tasks;
  const cols = intColumns(COLUMNS.tasks);
  for (let i = 0; i < t.rank.length; i++) {
    cols.rank.push(t.rank[i]!);
    cols.seq.push(t.seq[i]!);
    cols.qStart.push(t.qStart[i]!);
    cols.qLength.push(t.qLength[i]!);
    cols.kvStart.push(t.kvStart[i]!);
    cols.kvLength.push(t.kvLength[i]!);
  }
  const idsOfChunk: number[][] = [];
  for (let r = 0; r < ct.rank.length; r++) {
    const qs = partRanges(plan, ct.set[r]!, ct.parts[r]!, ct.qPart[r]!, 'chunkTasks', r);
    const ks = partRanges(plan, ct.set[r]!, ct.parts[r]!, ct.kvPart[r]!, 'chunkTasks', r);
    // Both lists follow the set's order; a sequence may lack either part (empty), so join by seq.
    const kvOf = new Map<number, Range>();
    for (const k of ks) kvOf.set(k.seq, k);
    const ids: number[] = [];
    for (const q of qs) {
      const k = kvOf.get(q.seq);
      if (!k) continue;
      ids.push(cols.rank.length);
      cols.rank.push(ct.rank[r]!);
      cols.seq.push(q.seq);
      cols.qStart.push(q.start);
      cols.qLength.push(q.length);
      cols.kvStart.push(k.start);
      cols.kvLength.push(k.length);
    }
    idsOfChunk.push(ids);
  }
  const tasks: TaskTable = freezeColumns(cols);
  return { tasks, idsOfChunk };
}

/** Merges chunk task ids into each compute op's task list (explicit ids first). */
function expandCompute(c: ComputeTable, idsOfChunk: number[][], path: string): ComputeTable {
  if (!c.chunkTaskOffsets || !c.chunkTaskIds)
    return { rank: c.rank, after: c.after, taskOffsets: c.taskOffsets, taskIds: c.taskIds };
  const ops = c.rank.length;
  if (c.chunkTaskOffsets.length !== ops + 1)
    fail(
      'plan.chunk.compute',
      `${path}.chunkTaskOffsets has ${c.chunkTaskOffsets.length} entries, expected ${ops + 1}`,
      path,
    );
  const offsets = new Int32Array(ops + 1);
  const ids = new IntColumn();
  for (let op = 0; op < ops; op++) {
    for (let i = c.taskOffsets[op]!; i < c.taskOffsets[op + 1]!; i++) ids.push(c.taskIds[i]!);
    for (let i = c.chunkTaskOffsets[op]!; i < c.chunkTaskOffsets[op + 1]!; i++) {
      const ct = c.chunkTaskIds[i]!;
      const list = idsOfChunk[ct];
      if (!list)
        fail(
          'plan.chunk.task',
          `${path} op ${op} names chunk task ${ct}, which does not exist`,
          `${path}.chunkTaskIds`,
          i,
        );
      for (const id of list) ids.push(id);
    }
    offsets[op + 1] = ids.length;
  }
  return { rank: c.rank, after: c.after, taskOffsets: offsets, taskIds: ids.toArray() };
}

/** Expands a phase's chunk transfers and chunk sendAfter pairs. */
function expandPhase(plan: Plan, ph: Phase, idsOfChunk: number[][], name: string): Phase {
  const compute = expandCompute(ph.compute, idsOfChunk, `${name}.compute`);
  const ctr = ph.chunkTransfers;
  const sa = ph.sendAfter;
  const hasChunkPairs = (sa.chunkTransfer?.length ?? 0) > 0;
  if ((!ctr || ctr.round.length === 0) && !hasChunkPairs) {
    const sendAfter: SendAfterTable = { transfer: sa.transfer, compute: sa.compute };
    return {
      transfers: ph.transfers,
      groupOfRound: ph.groupOfRound,
      compute,
      sendAfter,
      ...(ph.pushStream ? { pushStream: true } : {}),
    };
  }
  const t = ph.transfers;
  const cols = {
    round: new IntColumn(),
    src: new IntColumn(),
    dst: new IntColumn(),
    seq: new IntColumn(),
    start: new IntColumn(),
    length: new IntColumn(),
  };
  const kinds: number[] = Array.from(t.kind);
  for (let i = 0; i < t.round.length; i++) {
    cols.round.push(t.round[i]!);
    cols.src.push(t.src[i]!);
    cols.dst.push(t.dst[i]!);
    cols.seq.push(t.seq[i]!);
    cols.start.push(t.start[i]!);
    cols.length.push(t.length[i]!);
  }
  const idsOfChunkTransfer: number[][] = [];
  const n = ctr?.round.length ?? 0;
  for (let r = 0; r < n; r++) {
    const c = ctr!;
    const ids: number[] = [];
    for (const p of partRanges(plan, c.set[r]!, c.parts[r]!, c.part[r]!, `${name}.chunkTransfers`, r)) {
      ids.push(cols.round.length);
      cols.round.push(c.round[r]!);
      cols.src.push(c.src[r]!);
      cols.dst.push(c.dst[r]!);
      kinds.push(c.kind[r]!);
      cols.seq.push(p.seq);
      cols.start.push(p.start);
      cols.length.push(p.length);
    }
    idsOfChunkTransfer.push(ids);
  }
  const saT = new IntColumn();
  const saC = new IntColumn();
  for (let i = 0; i < sa.transfer.length; i++) {
    saT.push(sa.transfer[i]!);
    saC.push(sa.compute[i]!);
  }
  const chunkT = sa.chunkTransfer ?? new Int32Array(0);
  const chunkC = sa.chunkCompute ?? new Int32Array(0);
  if (chunkT.length !== chunkC.length)
    fail(
      'plan.chunk.sendAfter',
      `${name}.sendAfter.chunkTransfer and chunkCompute differ in length`,
      `${name}.sendAfter`,
    );
  for (let i = 0; i < chunkT.length; i++) {
    const list = idsOfChunkTransfer[chunkT[i]!];
    if (!list)
      fail(
        'plan.chunk.sendAfter',
        `names chunk transfer ${chunkT[i]}, which does not exist`,
        `${name}.sendAfter.chunkTransfer`,
        i,
      );
    for (const id of list) {
      saT.push(id);
      saC.push(chunkC[i]!);
    }
  }
  const transfers: TransferTable = {
    round: cols.round.toArray(),
    src: cols.src.toArray(),
    dst: cols.dst.toArray(),
    kind: Uint8Array.from(kinds),
    seq: cols.seq.toArray(),
    start: cols.start.toArray(),
    length: cols.length.toArray(),
  };
  return {
    transfers,
    groupOfRound: ph.groupOfRound,
    compute,
    sendAfter: { transfer: saT.toArray(), compute: saC.toArray() },
    ...(ph.pushStream ? { pushStream: true } : {}),
  };
}

/** True when the plan carries any chunk row. */
export function hasChunkRows(plan: Plan): boolean {
  const phaseHas = (p: Phase): boolean =>
    (p.chunkTransfers?.round.length ?? 0) > 0 ||
    (p.compute.chunkTaskIds?.length ?? 0) > 0 ||
    (p.sendAfter.chunkTransfer?.length ?? 0) > 0;
  return (
    (plan.homeChunks?.rank.length ?? 0) > 0 ||
    (plan.userChunks?.rank.length ?? 0) > 0 ||
    (plan.chunkTasks?.rank.length ?? 0) > 0 ||
    phaseHas(plan.forward) ||
    phaseHas(plan.backward)
  );
}

/**
 * Returns an equivalent plan without chunk rows: `homeChunks`/`userChunks` become layout rows,
 * `chunkTasks` become task rows (and compute ops' `chunkTaskIds` become `taskIds`),
 * `chunkTransfers` become transfer rows (and chunk `sendAfter` pairs become explicit pairs).
 * Explicit rows keep their ids; expanded rows are appended. A plan without chunk rows is returned
 * with the chunk tables dropped and every other table shared (not copied). Throws FcpError
 * `plan.chunk.*` when a chunk row refers to a set, part, sequence or row that does not exist.
 */
export function expandChunks(plan: Plan): Plan {
  const { tasks, idsOfChunk } = expandTasks(plan);
  const out: Plan = {
    ...plan,
    userLayout: appendLayout(plan.userLayout, plan.userChunks, plan, 'userChunks'),
    homeLayout: appendLayout(plan.homeLayout, plan.homeChunks, plan, 'homeChunks'),
    tasks,
    forward: expandPhase(plan, plan.forward, idsOfChunk, 'forward'),
    backward: expandPhase(plan, plan.backward, idsOfChunk, 'backward'),
  };
  delete out.seqSets;
  delete out.homeChunks;
  delete out.userChunks;
  delete out.chunkTasks;
  return out;
}

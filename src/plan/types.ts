/**
 * The plan file `fcp-plan/1` (see docs/plan-format.md), in memory.
 *
 * Every table is columnar: an object of equal-length typed arrays. Integer columns are Int32Array
 * (token counts up to 2^31 - 1 cover 4096 ranks x 512K tokens); the transfer `kind` column is a
 * Uint8Array of {@link Kind} codes, written to JSON as the strings of {@link KIND_NAMES}.
 */
import type { Mask, ModelShape } from '../model/shape.ts';

export type { Mask, ModelShape } from '../model/shape.ts';

/** Format tag written into every plan file. */
export const PLAN_FORMAT = 'fcp-plan/1';

/** Transfer kinds, by code. Forward: in, kv, out. Backward: in (dO), kv, dkv, out (dQ,dK,dV). */
export const Kind = { in: 0, kv: 1, out: 2, dkv: 3 } as const;
/** A transfer kind code. */
export type KindCode = (typeof Kind)[keyof typeof Kind];
/** Names of the kind codes, indexed by code (the strings of the JSON file). */
export const KIND_NAMES = ['in', 'kv', 'out', 'dkv'] as const;
/** A transfer kind name as written in JSON. */
export type KindName = (typeof KIND_NAMES)[number];

/** Token ranges per rank: row i is tokens [start, start+length) of sequence `seq` on `rank`. */
export interface Layout {
  rank: Int32Array;
  seq: Int32Array;
  start: Int32Array;
  length: Int32Array;
}

/** Attention of query tokens [qStart, qStart+qLength) against keys [kvStart, kvStart+kvLength). */
export interface TaskTable {
  rank: Int32Array;
  seq: Int32Array;
  qStart: Int32Array;
  qLength: Int32Array;
  kvStart: Int32Array;
  kvLength: Int32Array;
}

/** Point-to-point messages of one phase. */
export interface TransferTable {
  round: Int32Array;
  src: Int32Array;
  dst: Int32Array;
  kind: Uint8Array;
  seq: Int32Array;
  start: Int32Array;
  length: Int32Array;
}

/** Compute ops: op i runs tasks taskIds[taskOffsets[i]..taskOffsets[i+1]) on `rank` after group `after`. */
export interface ComputeTable {
  rank: Int32Array;
  /** Comm group that must have completed on this rank first; -1 for none. */
  after: Int32Array;
  /** CSR offsets, length ops+1. */
  taskOffsets: Int32Array;
  taskIds: Int32Array;
  /** Optional CSR over `chunkTasks` rows, length ops+1. */
  chunkTaskOffsets?: Int32Array;
  chunkTaskIds?: Int32Array;
}

/** Transfer `transfer` may start only after compute op `compute` (on its sender) has finished. */
export interface SendAfterTable {
  transfer: Int32Array;
  compute: Int32Array;
  /** Pairs for chunk transfers: index into `chunkTransfers`, and a compute op. */
  chunkTransfer?: Int32Array;
  chunkCompute?: Int32Array;
}

/** Sequence sets (CSR) for compact chunk rows; `padTo[s]` is the multiple sequences of set s are padded to (0: none). */
export interface SeqSetTable {
  offsets: Int32Array;
  seqs: Int32Array;
  padTo?: Int32Array;
}

/** Home of part `part` of `parts` of every sequence of set `set`. */
export interface ChunkLayout {
  rank: Int32Array;
  set: Int32Array;
  parts: Int32Array;
  part: Int32Array;
}

/** For every sequence of `set`: queries of part qPart against keys of part kvPart. */
export interface ChunkTaskTable {
  rank: Int32Array;
  set: Int32Array;
  parts: Int32Array;
  qPart: Int32Array;
  kvPart: Int32Array;
}

/** For every sequence of `set`: a transfer of part `part` of `parts`. */
export interface ChunkTransferTable {
  round: Int32Array;
  src: Int32Array;
  dst: Int32Array;
  kind: Uint8Array;
  set: Int32Array;
  parts: Int32Array;
  part: Int32Array;
}

/** One direction of the attention (forward or backward). */
export interface Phase {
  transfers: TransferTable;
  /** Group index of each round (rounds are 0..R-1); non-decreasing. */
  groupOfRound: Int32Array;
  compute: ComputeTable;
  sendAfter: SendAfterTable;
  chunkTransfers?: ChunkTransferTable;
  /**
   * Chained rounds (optional): the comm group of each round, non-decreasing, each comm group inside
   * one group. A group's comm groups run one after another on every rank (one concurrent transfer
   * call each), so a group may coalesce many rounds for compute while its transfers stay congestion
   * free on the wire. Absent: every round of a group runs concurrently (one comm group per group).
   */
  commGroupOfRound?: Int32Array;
  /**
   * Direct senders (optional, one entry per transfer row): the rank that would send each `kv`
   * transfer in the direct fetch graph the rounds were placed for; a transfer handed over to a
   * rank that already holds the range (FCP's same-slot forwarding) keeps its original sender here,
   * every other row its `src`. The report's `kvDirectDelta` is the Δ of that graph. Absent: every
   * row's sender is its direct sender.
   */
  kvOrigin?: Int32Array;
  /**
   * Push stream (optional): `true` runs the phase's `out` and `dkv` transfers on a second comm
   * stream. Per rank, the groups' push transfers then run in group order on that stream and the
   * `in` and `kv` transfers in group order on the first, each stream waiting only for its own
   * previous group, so a push held by its `sendAfter` op no longer holds the K/V that the rank's
   * next ops wait for. Pushes carry results (O, dQ, dK, dV), which no op reads, and a push waits
   * only for its own op and its stream's earlier groups, so a plan valid with one stream is valid
   * with two. Absent or false: one stream per rank.
   */
  pushStream?: boolean;
}

/** A whole plan. Extra fields (e.g. `meta`) are allowed and preserved. */
export interface Plan {
  format: typeof PLAN_FORMAT;
  strategy: string;
  world: number;
  mask: Mask;
  model: ModelShape;
  /** Sequence lengths; sequence id = index. */
  sequences: Int32Array;
  userLayout: Layout;
  homeLayout: Layout;
  tasks: TaskTable;
  forward: Phase;
  backward: Phase;
  seqSets?: SeqSetTable;
  homeChunks?: ChunkLayout;
  chunkTasks?: ChunkTaskTable;
  /**
   * Extension of fcp-plan/1 (extra field): chunk rows that add to `userLayout`, for baselines whose
   * data loader already shards sequences by chunk (TE's DualChunkSwap, MagiAttention's dispatch).
   */
  userChunks?: ChunkLayout;
  /** Free-form planner information (options, timings, statistics). Never needed to execute. */
  meta?: Record<string, unknown>;
}

/** Column names of each table, in file order (used by the reader, the writer and empty-table helpers). */
export const COLUMNS = {
  layout: ['rank', 'seq', 'start', 'length'],
  tasks: ['rank', 'seq', 'qStart', 'qLength', 'kvStart', 'kvLength'],
  transfers: ['round', 'src', 'dst', 'kind', 'seq', 'start', 'length'],
  compute: ['rank', 'after', 'taskOffsets', 'taskIds'],
  sendAfter: ['transfer', 'compute'],
  seqSets: ['offsets', 'seqs'],
  chunkLayout: ['rank', 'set', 'parts', 'part'],
  chunkTasks: ['rank', 'set', 'parts', 'qPart', 'kvPart'],
  chunkTransfers: ['round', 'src', 'dst', 'kind', 'set', 'parts', 'part'],
} as const;

/** Number of rows of a columnar table (length of its first column). */
export function rowCount(table: object): number {
  for (const v of Object.values(table)) if (ArrayBuffer.isView(v)) return (v as Int32Array).length;
  return 0;
}

/** An empty phase (no transfers, no compute). */
export function emptyPhase(): Phase {
  return {
    transfers: {
      round: new Int32Array(0),
      src: new Int32Array(0),
      dst: new Int32Array(0),
      kind: new Uint8Array(0),
      seq: new Int32Array(0),
      start: new Int32Array(0),
      length: new Int32Array(0),
    },
    groupOfRound: new Int32Array(0),
    compute: {
      rank: new Int32Array(0),
      after: new Int32Array(0),
      taskOffsets: new Int32Array(1),
      taskIds: new Int32Array(0),
    },
    sendAfter: { transfer: new Int32Array(0), compute: new Int32Array(0) },
  };
}

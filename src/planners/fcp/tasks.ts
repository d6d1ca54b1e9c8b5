/**
 * Owner-computes tasks (docs/design.md, FCP's planner): every query token is computed on its home
 * rank, against every key it attends, split by when each key range becomes available there so that
 * compute can pipeline with the transfers.
 *
 * Per rank-sequence pair (RS), the attended key span [0, end) is tiled by "key pieces", each with
 * the group after which it is present on the rank (-1: from the start): the RS's home runs (cut at
 * user-row boundaries: their `in` group, or -1 where the rank is also the user rank), the rest of
 * its user row, and the `kv` transfers it receives. The query side is tiled by the runs' pieces
 * (query segments, with their `in` group). A task is a query segment against a maximal run of key
 * pieces with the same effective group, max(query group, key group): contiguous key ranges that
 * become usable together are one task. A query segment thus gets about one task per distinct
 * arrival group of its keys, never one per block, so a 512K sequence stays at a few hundred tasks.
 *
 * Causal mask: a query segment [qa, qb) attends keys [0, qb); every task starts below qb, so none
 * is entirely masked. The tasks of a segment tile [0, qb) and the segments tile the runs, so the
 * tasks cover every attended pair exactly once.
 *
 * These are the untiled tasks (`tile: 0`); by default grid-tasks.ts cuts the runs into squares of
 * the block grid instead, over the same key pieces.
 */
import { doubled } from '../../core/doubled.ts';
import { freezeColumns, IntColumn, intColumns } from '../../core/int-column.ts';
import type { Mask, TaskTable } from '../../plan/types.ts';
import { COLUMNS } from '../../plan/types.ts';
import type { TileGeometry } from './grid.ts';
import { type HomeRuns, type SeqRows, subtractInto } from './placement/layout.ts';
import type { KvEdges } from './transfers/fetch.ts';
import type { Pieces } from './transfers/reshuffle.ts';

/** What the task builder reads. */
export interface TaskContext {
  readonly runs: HomeRuns;
  /** Block size of each sequence (the tile grid). */
  readonly blockSize: Int32Array;
  /** Tile geometry; null: tasks are not tiled (one per query segment and key run). */
  readonly grid: TileGeometry | null;
  readonly userRows: SeqRows;
  readonly pieces: Pieces;
  readonly sequences: Int32Array;
  readonly mask: Mask;
}

/** K/V transfers grouped by receiving RS: edges of RS i are ids[off[i]..off[i+1]). */
export interface EdgesByRs {
  readonly off: Int32Array;
  readonly ids: Int32Array;
}

/** Groups edges by their receiving RS (stable). */
export function edgesByRs(edges: KvEdges, rsCount: number): EdgesByRs {
  const off = new Int32Array(rsCount + 1);
  for (let e = 0; e < edges.rs.length; e++) off[edges.rs[e]! + 1]!++;
  for (let i = 0; i < rsCount; i++) off[i + 1]! += off[i]!;
  const fill = off.slice(0, rsCount);
  const ids = new Int32Array(edges.rs.length);
  for (let e = 0; e < edges.rs.length; e++) ids[fill[edges.rs[e]!]!++] = e;
  return { off, ids };
}

/**
 * Key pieces of one RS: the first `n` entries of parallel arrays, sorted by start, tiling [0, end).
 * Typed and reused across RSs (grown when full): emptying plain arrays with `length = 0` is a
 * runtime call, made for every RS of every phase.
 */
export interface KeyPieces {
  a: Int32Array;
  b: Int32Array;
  t: Int32Array;
  n: number;
}

/** A reusable {@link KeyPieces} scratch. */
export const newKeyPieces = (): KeyPieces => ({
  a: new Int32Array(64),
  b: new Int32Array(64),
  t: new Int32Array(64),
  n: 0,
});

/** Appends piece [a, b) with group t to `out`, growing its arrays when full. */
function pushKeyPiece(out: KeyPieces, a: number, b: number, t: number): void {
  if (out.n === out.a.length) {
    out.a = doubled(out.a);
    out.b = doubled(out.b);
    out.t = doubled(out.t);
  }
  out.a[out.n] = a;
  out.b[out.n] = b;
  out.t[out.n] = t;
  out.n++;
}

/** End of the key span of an RS. */
export function keySpanEnd(ctx: TaskContext, rs: number): number {
  const { runs } = ctx;
  if (ctx.mask === 'full') return ctx.sequences[runs.rsSeq[rs]!]!;
  const last = runs.byRank[runs.rsOff[rs + 1]! - 1]!;
  return runs.start[last]! + runs.length[last]!;
}

const scratch = { cut: [] as number[], rest: [] as number[] };

/**
 * Fills `out` with the key pieces of RS `rs`: its runs' pieces at `pieceGroup[piece]` (null: -1),
 * the rest of its user row at -1, and its `kv` edges at `edgeGroup[edge]`; adjacent pieces with
 * the same group are merged. The three sources are each sorted by start and disjoint, so they are
 * merged, not sorted.
 */
export function keyPiecesOf(
  ctx: TaskContext,
  rs: number,
  pieceGroup: Int32Array | null,
  edges: KvEdges,
  byRs: EdgesByRs,
  edgeGroup: Int32Array,
  out: KeyPieces,
): void {
  const { runs, pieces, userRows } = ctx;
  const end = keySpanEnd(ctx, rs);
  const cut = scratch.cut;
  cut.length = 0;
  const p0 = runs.rsOff[rs]!;
  const p1 = runs.rsOff[rs + 1]!;
  for (let p = p0; p < p1; p++) {
    const run = runs.byRank[p]!;
    cut.push(runs.start[run]!, runs.start[run]! + runs.length[run]!);
  }
  const rest = scratch.rest;
  rest.length = 0;
  // Every user row of this sequence on this rank (the even split has at most one; a loader layout
  // may have several), in start order, so that `rest` stays sorted.
  const seq = runs.rsSeq[rs]!;
  const rank = runs.rsRank[rs]!;
  for (let row = userRows.off[seq]!, e = userRows.off[seq + 1]!; row < e; row++) {
    if (userRows.rank[row] !== rank) continue;
    const ua = userRows.start[row]!;
    const ub = Math.min(end, ua + userRows.length[row]!);
    if (ua < ub) subtractInto(ua, ub, cut, rest);
  }
  out.n = 0;
  // Cursors: run pieces (run p, piece i), user-row rest (k), edges (q).
  let p = p0;
  let i = p < p1 ? pieces.runOff[runs.byRank[p]!]! : 0;
  let k = 0;
  let q = byRs.off[rs]!;
  const q1 = byRs.off[rs + 1]!;
  for (;;) {
    while (p < p1 && i >= pieces.runOff[runs.byRank[p]! + 1]!) {
      p++;
      if (p < p1) i = pieces.runOff[runs.byRank[p]!]!;
    }
    const pa = p < p1 ? pieces.start[i]! : Number.POSITIVE_INFINITY;
    const ra = k < rest.length ? rest[k]! : Number.POSITIVE_INFINITY;
    const ea = q < q1 ? edges.start[byRs.ids[q]!]! : Number.POSITIVE_INFINITY;
    let a: number;
    let b: number;
    let t: number;
    if (pa <= ra && pa <= ea) {
      if (pa === Number.POSITIVE_INFINITY) break;
      a = pa;
      b = pa + pieces.length[i]!;
      t = pieceGroup ? pieceGroup[i]! : -1;
      i++;
    } else if (ra <= ea) {
      a = ra;
      b = rest[k + 1]!;
      t = -1;
      k += 2;
    } else {
      const e = byRs.ids[q]!;
      a = ea;
      b = ea + edges.length[e]!;
      t = edgeGroup[e]!;
      q++;
    }
    const n = out.n;
    if (n > 0 && out.b[n - 1] === a && out.t[n - 1] === t) out.b[n - 1] = b;
    else pushKeyPiece(out, a, b, t);
  }
}

/** The task table, grouped by RS (tasks of RS i are rows rsOff[i]..rsOff[i+1]-1), and each task's forward group. */
export interface Tasks {
  readonly table: TaskTable;
  readonly rsOff: Int32Array;
  /** Group after which the task's data is on its rank (-1: from the start). */
  readonly ready: Int32Array;
}

/**
 * Builds every task (module comment). `pieceGroup`: arrival group of each piece's queries and keys
 * at home (forward `in`); `edgeGroup`: arrival group of each forward `kv` edge.
 */
export function buildTasks(
  ctx: TaskContext,
  pieceGroup: Int32Array,
  edges: KvEdges,
  byRs: EdgesByRs,
  edgeGroup: Int32Array,
): Tasks {
  const { runs, pieces } = ctx;
  const RS = runs.rsRank.length;
  const cols = intColumns(COLUMNS.tasks);
  const ready = new IntColumn();
  const rsOff = new Int32Array(RS + 1);
  const kp = newKeyPieces();
  const emit = (h: number, s: number, qa: number, qb: number, ka: number, kb: number, t: number): void => {
    cols.rank.push(h);
    cols.seq.push(s);
    cols.qStart.push(qa);
    cols.qLength.push(qb - qa);
    cols.kvStart.push(ka);
    cols.kvLength.push(kb - ka);
    ready.push(t);
  };
  const causal = ctx.mask === 'causal';
  for (let rs = 0; rs < RS; rs++) {
    const h = runs.rsRank[rs]!;
    const s = runs.rsSeq[rs]!;
    keyPiecesOf(ctx, rs, pieceGroup, edges, byRs, edgeGroup, kp);
    for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
      const run = runs.byRank[p]!;
      // Query segments: the run's pieces, adjacent ones with the same group merged.
      for (let i = pieces.runOff[run]!, ie = pieces.runOff[run + 1]!; i < ie; ) {
        const tq = pieceGroup[i]!;
        const qa = pieces.start[i]!;
        let j = i + 1;
        while (j < ie && pieceGroup[j] === tq) j++;
        const qb = pieces.start[j - 1]! + pieces.length[j - 1]!;
        i = j;
        const kEnd = causal ? qb : keySpanEnd(ctx, rs);
        let ta = -1;
        let tb = -1;
        let tt = 0;
        for (let k = 0; k < kp.n; k++) {
          const a = kp.a[k]!;
          if (a >= kEnd) break;
          const b = Math.min(kp.b[k]!, kEnd);
          const t = Math.max(tq, kp.t[k]!);
          if (ta >= 0 && tb === a && tt === t) tb = b;
          else {
            if (ta >= 0) emit(h, s, qa, qb, ta, tb, tt);
            ta = a;
            tb = b;
            tt = t;
          }
        }
        if (ta >= 0) emit(h, s, qa, qb, ta, tb, tt);
      }
    }
    rsOff[rs + 1] = cols.rank.length;
  }
  return {
    table: freezeColumns(cols),
    rsOff,
    ready: ready.toArray(),
  };
}

/**
 * The reshuffle pieces of RS `rs`'s home runs in position order (its runs are in position order),
 * into the start of `out` (room for every piece); returns how many. A typed scratch with a count:
 * emptying a plain array with `length = 0` is a runtime call, made for every RS.
 */
export function rsPiecesInto(ctx: TaskContext, rs: number, out: Int32Array): number {
  const { runs, pieces } = ctx;
  let n = 0;
  for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
    const run = runs.byRank[p]!;
    for (let j = pieces.runOff[run]!, je = pieces.runOff[run + 1]!; j < je; j++) out[n++] = j;
  }
  return n;
}

/**
 * First index among the first `n` of `rsPieces` (pieces in position order) whose piece ends after
 * `pos`; `n` if none.
 */
export function firstPieceEndingAfter(pieces: Pieces, rsPieces: Int32Array, n: number, pos: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const pm = rsPieces[mid]!;
    if (pieces.start[pm]! + pieces.length[pm]! <= pos) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Each task's ready group under another phase's availability (backward): the latest group of the
 * pieces covering its queries (`pieceGroup`, dO arrival) and of the key pieces covering its keys.
 */
export function taskReady(
  ctx: TaskContext,
  tasks: Tasks,
  pieceGroup: Int32Array,
  keyPieceGroup: Int32Array | null,
  edges: KvEdges,
  byRs: EdgesByRs,
  edgeGroup: Int32Array,
): Int32Array {
  const { runs, pieces } = ctx;
  const t = tasks.table;
  const out = new Int32Array(t.rank.length);
  const kp = newKeyPieces();
  const rsPieces = new Int32Array(pieces.seq.length);
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    keyPiecesOf(ctx, rs, keyPieceGroup, edges, byRs, edgeGroup, kp);
    const np = rsPiecesInto(ctx, rs, rsPieces);
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const qa = t.qStart[i]!;
      const qb = qa + t.qLength[i]!;
      const ka = t.kvStart[i]!;
      const kb = ka + t.kvLength[i]!;
      let g = -1;
      for (
        let k = firstPieceEndingAfter(pieces, rsPieces, np, qa);
        k < np && pieces.start[rsPieces[k]!]! < qb;
        k++
      )
        g = Math.max(g, pieceGroup[rsPieces[k]!]!);
      let lo = 0;
      let hi = kp.n;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (kp.b[mid]! <= ka) lo = mid + 1;
        else hi = mid;
      }
      for (let k = lo; k < kp.n && kp.a[k]! < kb; k++) g = Math.max(g, kp.t[k]!);
      out[i] = g;
    }
  }
  return out;
}

/**
 * Whether each task exports results (order.ts): its query rows overlap a piece that moves (the
 * output goes back to the user rank), or, with `keys` (backward), its key range is not entirely
 * this rank's own unmoved rows (dK,dV partials or rows leave the rank).
 */
export function exportFlags(ctx: TaskContext, tasks: Tasks, keys: boolean): Uint8Array {
  const { runs, pieces } = ctx;
  const t = tasks.table;
  const out = new Uint8Array(t.rank.length);
  const rsPieces = new Int32Array(pieces.seq.length);
  let np = 0;
  const first = (pos: number): number => firstPieceEndingAfter(pieces, rsPieces, np, pos);
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    np = rsPiecesInto(ctx, rs, rsPieces);
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const qa = t.qStart[i]!;
      const qb = qa + t.qLength[i]!;
      let x = 0;
      for (let k = first(qa); k < np && pieces.start[rsPieces[k]!]! < qb && x === 0; k++)
        if (pieces.movingIndex[rsPieces[k]!]! >= 0) x = 1;
      if (x === 0 && keys) {
        // Keys must be covered, without a gap, by own pieces that stay.
        const ka = t.kvStart[i]!;
        const kb = ka + t.kvLength[i]!;
        let pos = ka;
        for (let k = first(ka); k < np && pos < kb; k++) {
          const p = rsPieces[k]!;
          if (pieces.start[p]! > pos || pieces.movingIndex[p]! >= 0) break;
          pos = pieces.start[p]! + pieces.length[p]!;
        }
        if (pos < kb) x = 1;
      }
      out[i] = x;
    }
  }
  return out;
}

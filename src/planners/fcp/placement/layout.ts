/**
 * Interval structures the FCP stages share: layout rows indexed by sequence (CSR, sorted by start),
 * the home layout as maximal runs of consecutive blocks on one rank, and the rank-sequence pairs
 * ("RS": a rank with at least one home run of a sequence), the unit of work of the later stages.
 */
import { assert } from '../../../core/assert.ts';
import type { Layout } from '../../../plan/types.ts';
import type { Blocks } from './blocks.ts';
import type { SeqRows } from './seq-rows.ts';

export type { SeqRows } from './seq-rows.ts';

/** Groups layout rows by sequence (counting sort; rows of a sequence sorted by start). */
export function rowsBySeq(layout: Layout, sequences: number): SeqRows {
  const n = layout.rank.length;
  const off = new Int32Array(sequences + 1);
  for (let i = 0; i < n; i++) off[layout.seq[i]! + 1]!++;
  for (let s = 0; s < sequences; s++) off[s + 1]! += off[s]!;
  const fill = off.slice(0, sequences);
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[fill[layout.seq[i]!]!++] = i;
  // The even user layout is already in packed (sequence, start) order; sort only when it is not.
  for (let s = 0; s < sequences; s++) {
    const a = off[s]!;
    const b = off[s + 1]!;
    let sorted = true;
    for (let i = a + 1; i < b && sorted; i++)
      sorted = layout.start[order[i]!]! >= layout.start[order[i - 1]!]!;
    if (!sorted) order.subarray(a, b).sort((x, y) => layout.start[x]! - layout.start[y]!);
  }
  const pick = (col: Int32Array): Int32Array => Int32Array.from(order, (i) => col[i]!);
  return { off, rank: pick(layout.rank), start: pick(layout.start), length: pick(layout.length) };
}

/** The rank of sequence `s`'s row on `rank` in `rows`, or -1 (a rank holds at most one contiguous range of a sequence in the even layout; the first is returned otherwise). */
export function rowOnRank(rows: SeqRows, s: number, rank: number): number {
  for (let i = rows.off[s]!, e = rows.off[s + 1]!; i < e; i++) if (rows.rank[i] === rank) return i;
  return -1;
}

/** Per block, the rank holding most of its tokens in the user layout `rows` (ties: the first row). */
export function blockUserRanks(
  seq: Int32Array,
  start: Int32Array,
  length: Int32Array,
  rows: SeqRows,
): Int32Array {
  const out = new Int32Array(seq.length);
  for (let b = 0; b < seq.length; b++) {
    const s = seq[b]!;
    const a = start[b]!;
    const e = a + length[b]!;
    let best = -1;
    let bestTok = 0;
    for (
      let i = firstEndingAfter(rows.start, rows.length, rows.off[s]!, rows.off[s + 1]!, a);
      i < rows.off[s + 1]!;
      i++
    ) {
      const ra = rows.start[i]!;
      if (ra >= e) break;
      const ov = Math.min(e, ra + rows.length[i]!) - Math.max(a, ra);
      if (ov > bestTok) {
        bestTok = ov;
        best = rows.rank[i]!;
      }
    }
    out[b] = best;
  }
  return out;
}

/**
 * The home layout as runs: maximal ranges of consecutive blocks of one sequence on one rank.
 * Runs are numbered sequence-major (by sequence, then start); `byRank` lists them rank-major
 * (rank, sequence, start) and groups them into rank-sequence pairs.
 */
export interface HomeRuns extends SeqRows {
  readonly seq: Int32Array;
  /** Run ids in (rank, sequence, start) order. */
  readonly byRank: Int32Array;
  /** Rank-sequence pairs: RS i holds runs byRank[rsOff[i]..rsOff[i+1]). */
  readonly rsRank: Int32Array;
  readonly rsSeq: Int32Array;
  readonly rsOff: Int32Array;
  /** RS of each run. */
  readonly runRs: Int32Array;
  /** First RS of each rank (length world+1). */
  readonly rankRs: Int32Array;
}

/** Builds the home runs from the blocks and each block's rank. */
export function homeRuns(blocks: Blocks, blockRank: Int32Array, world: number): HomeRuns {
  const S = blocks.seqBlocks.length - 1;
  const rank: number[] = [];
  const seq: number[] = [];
  const start: number[] = [];
  const length: number[] = [];
  const off = new Int32Array(S + 1);
  for (let s = 0; s < S; s++) {
    let cur = -1;
    for (let b = blocks.seqBlocks[s]!, e = blocks.seqBlocks[s + 1]!; b < e; b++) {
      const r = blockRank[b]!;
      if (r === cur) length[length.length - 1]! += blocks.length[b]!;
      else {
        rank.push(r);
        seq.push(s);
        start.push(blocks.start[b]!);
        length.push(blocks.length[b]!);
        cur = r;
      }
    }
    off[s + 1] = rank.length;
  }
  const n = rank.length;
  const runRank = Int32Array.from(rank);
  const runSeq = Int32Array.from(seq);
  // Rank-major order: stable counting sort by rank keeps (sequence, start) order inside a rank.
  const cnt = new Int32Array(world + 1);
  for (let i = 0; i < n; i++) cnt[runRank[i]! + 1]!++;
  for (let r = 0; r < world; r++) cnt[r + 1]! += cnt[r]!;
  const byRank = new Int32Array(n);
  const fill = cnt.slice(0, world);
  for (let i = 0; i < n; i++) byRank[fill[runRank[i]!]!++] = i;
  const rsRank: number[] = [];
  const rsSeq: number[] = [];
  const rsOff: number[] = [];
  const runRs = new Int32Array(n);
  const rankRs = new Int32Array(world + 1);
  let r = 0;
  for (let p = 0; p < n; p++) {
    const run = byRank[p]!;
    const rr = runRank[run]!;
    const ss = runSeq[run]!;
    if (rsRank.length === 0 || rsRank[rsRank.length - 1] !== rr || rsSeq[rsSeq.length - 1] !== ss) {
      while (r <= rr) rankRs[r++] = rsRank.length;
      rsRank.push(rr);
      rsSeq.push(ss);
      rsOff.push(p);
    }
    runRs[run] = rsRank.length - 1;
  }
  while (r <= world) rankRs[r++] = rsRank.length;
  rsOff.push(n);
  return {
    off,
    rank: runRank,
    seq: runSeq,
    start: Int32Array.from(start),
    length: Int32Array.from(length),
    byRank,
    rsRank: Int32Array.from(rsRank),
    rsSeq: Int32Array.from(rsSeq),
    rsOff: Int32Array.from(rsOff),
    runRs,
    rankRs,
  };
}

/** The home layout table (rank-major rows), as written into the plan. */
export function homeLayoutOf(runs: HomeRuns): Layout {
  const pick = (col: Int32Array): Int32Array => Int32Array.from(runs.byRank, (i) => col[i]!);
  return { rank: pick(runs.rank), seq: pick(runs.seq), start: pick(runs.start), length: pick(runs.length) };
}

/** End (exclusive) of the last home run of RS `rs`. */
export function rsEnd(runs: HomeRuns, rs: number): number {
  const last = runs.byRank[runs.rsOff[rs + 1]! - 1]!;
  return runs.start[last]! + runs.length[last]!;
}

/** First row i in [lo, hi) of `start`/`length` (sorted, disjoint) whose range ends after `pos`. */
export function firstEndingAfter(
  start: Int32Array,
  length: Int32Array,
  lo: number,
  hi: number,
  pos: number,
): number {
  let a = lo;
  let b = hi;
  while (a < b) {
    const m = (a + b) >>> 1;
    if (start[m]! + length[m]! <= pos) a = m + 1;
    else b = m;
  }
  return a;
}

/**
 * Appends [a, b) minus the sorted disjoint intervals `cut` (flat pairs) to `out` (flat pairs).
 * Intervals of `cut` outside [a, b) are ignored.
 */
export function subtractInto(a: number, b: number, cut: readonly number[], out: number[]): void {
  assert(a <= b, 'subtractInto: empty range reversed');
  let pos = a;
  for (let i = 0; i < cut.length; i += 2) {
    const ca = cut[i]!;
    const cb = cut[i + 1]!;
    if (cb <= pos) continue;
    if (ca >= b) break;
    if (ca > pos) out.push(pos, ca);
    pos = Math.max(pos, cb);
    if (pos >= b) break;
  }
  if (pos < b) out.push(pos, b);
}

/**
 * Indexes the rule checks share: rows bucketed by sequence (CSR) and sorted inside a bucket,
 * "who holds which tokens since which group" lookups, and a sweep over elementary intervals.
 * Everything works on token intervals, never on per-token arrays, so a 134M-token plan costs
 * O(rows log rows).
 */

import { iota } from '../core/gather.ts';

/** Rows grouped by sequence: bucket s is order[offsets[s] .. offsets[s+1]). */
export interface SeqBuckets {
  offsets: Int32Array;
  order: Int32Array;
}

/**
 * Rows sorted by (`seq`, `key`, `key2`, row): a stable LSD radix sort with 16-bit digits (all
 * values are non-negative after the structural checks), O(rows) per digit, no comparator calls.
 */
export function bucketBySeq(
  nSeq: number,
  seq: Int32Array,
  n: number,
  key: Int32Array,
  key2?: Int32Array,
): SeqBuckets {
  let order: Int32Array = iota(n);
  let tmp: Int32Array = new Int32Array(n);
  const count = new Int32Array(65537);
  const pass = (col: Int32Array, shift: number): void => {
    count.fill(0);
    for (let i = 0; i < n; i++) count[((col[order[i]!]! >>> shift) & 0xffff) + 1]!++;
    for (let d = 0; d < 65536; d++) count[d + 1]! += count[d]!;
    for (let i = 0; i < n; i++) {
      const row = order[i]!;
      tmp[count[(col[row]! >>> shift) & 0xffff]!++] = row;
    }
    const t = order;
    order = tmp;
    tmp = t;
  };
  const sortBy = (col: Int32Array): void => {
    let max = 0;
    for (let i = 0; i < n; i++) if (col[i]! > max) max = col[i]!;
    pass(col, 0);
    if (max > 0xffff) pass(col, 16);
  };
  if (key2) sortBy(key2);
  sortBy(key);
  sortBy(seq);
  const offsets = new Int32Array(nSeq + 1);
  for (let i = 0; i < n; i++) offsets[seq[i]! + 1]!++;
  for (let s = 0; s < nSeq; s++) offsets[s + 1]! += offsets[s]!;
  return { offsets, order };
}

/** Intervals of tokens held by ranks, each usable from a group on. */
export interface Holding {
  seq: Int32Array;
  rank: Int32Array;
  start: Int32Array;
  end: Int32Array;
  /** Group after which the tokens are there (-1: from the start). */
  avail: Int32Array | number;
  /** Rows to take (all when undefined). */
  n: number;
}

/**
 * Which rank holds which tokens of which sequence, and since when. `covers(seq, rank, a, b, t)`
 * answers whether tokens [a, b) are all on `rank` counting only intervals available by group `t`.
 *
 * Holdings from the start (layout rows: few, long) and timed ones (receptions: many, block-sized)
 * live in separate sorted tables, each with the longest interval of every (seq, rank) group, so a
 * lookup scans only intervals that can reach its start; coverage alternates between the two.
 */
export class RangeIndex {
  private readonly fixed: IntervalTable;
  private readonly timed: IntervalTable;

  constructor(nSeq: number, parts: Holding[]) {
    this.fixed = new IntervalTable(nSeq, parts, true);
    this.timed = new IntervalTable(nSeq, parts, false);
  }

  /** True when [a, b) of `seq` is covered on `rank` by intervals with avail <= t. */
  covers(seq: number, rank: number, a: number, b: number, t: number): boolean {
    let reach = a;
    for (;;) {
      const r1 = this.fixed.extend(seq, rank, reach, b, t);
      if (r1 >= b) return true;
      const r2 = this.timed.extend(seq, rank, r1, b, t);
      if (r2 >= b) return true;
      if (r2 === reach) return false;
      reach = r2;
    }
  }
}

/** Intervals sorted by (seq, rank, start), with the longest interval of each (seq, rank) group. */
class IntervalTable {
  private readonly offsets: Int32Array;
  private readonly rank: Int32Array;
  private readonly start: Int32Array;
  private readonly end: Int32Array;
  private readonly avail: Int32Array;
  private readonly groupMax: Int32Array;

  constructor(nSeq: number, parts: Holding[], fixed: boolean) {
    const keep = (p: Holding, i: number): boolean =>
      (typeof p.avail === 'number' ? p.avail : p.avail[i]!) < 0 === fixed;
    let n = 0;
    for (const p of parts) for (let i = 0; i < p.n; i++) if (keep(p, i)) n++;
    const seq = new Int32Array(n);
    const rank = new Int32Array(n);
    const start = new Int32Array(n);
    const end = new Int32Array(n);
    const avail = new Int32Array(n);
    let k = 0;
    for (const p of parts)
      for (let i = 0; i < p.n; i++)
        if (keep(p, i)) {
          seq[k] = p.seq[i]!;
          rank[k] = p.rank[i]!;
          start[k] = p.start[i]!;
          end[k] = p.end[i]!;
          avail[k++] = typeof p.avail === 'number' ? p.avail : p.avail[i]!;
        }
    const b = bucketBySeq(nSeq, seq, n, rank, start);
    this.offsets = b.offsets;
    this.rank = new Int32Array(n);
    this.start = new Int32Array(n);
    this.end = new Int32Array(n);
    this.avail = new Int32Array(n);
    this.groupMax = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const j = b.order[i]!;
      this.rank[i] = rank[j]!;
      this.start[i] = start[j]!;
      this.end[i] = end[j]!;
      this.avail[i] = avail[j]!;
    }
    // groupMax[i]: the longest interval of i's (seq, rank) group (groups are runs of the order).
    for (let s = 0; s < nSeq; s++) {
      let g0 = this.offsets[s]!;
      const hi = this.offsets[s + 1]!;
      while (g0 < hi) {
        let g1 = g0;
        let m = 0;
        while (g1 < hi && this.rank[g1] === this.rank[g0]) {
          m = Math.max(m, this.end[g1]! - this.start[g1]!);
          g1++;
        }
        this.groupMax.fill(m, g0, g1);
        g0 = g1;
      }
    }
  }

  /** How far from `x` (up to `b`) intervals of (seq, rank) with avail <= t reach contiguously. */
  extend(seq: number, rank: number, x: number, b: number, t: number): number {
    const hi = this.offsets[seq + 1]!;
    let lo = this.offsets[seq]!;
    let h = hi;
    while (lo < h) {
      const mid = (lo + h) >>> 1;
      if (this.rank[mid]! < rank) lo = mid + 1;
      else h = mid;
    }
    if (lo >= hi || this.rank[lo] !== rank) return x;
    // Intervals starting before x - (longest of the group) end before x.
    const from = x - this.groupMax[lo]!;
    h = hi;
    while (lo < h) {
      const mid = (lo + h) >>> 1;
      if (this.rank[mid] === rank && this.start[mid]! < from) lo = mid + 1;
      else h = mid;
    }
    let reach = x;
    for (let i = lo; i < hi && this.rank[i] === rank && this.start[i]! <= reach; i++)
      if (this.avail[i]! <= t && this.end[i]! > reach) {
        reach = this.end[i]!;
        if (reach >= b) return reach;
      }
    return reach;
  }
}

/**
 * Rows of one sequence sorted by start, swept over increasing positions: after `advance(a)`,
 * `active` lists the rows with start <= a < end. Callers advance over elementary intervals (cut at
 * every boundary of every swept table), so a row covers an interval wholly or not at all.
 */
export class ActiveSweep {
  active: number[] = [];
  private p: number;

  constructor(
    private readonly order: Int32Array,
    private readonly lo: number,
    private readonly hi: number,
    private readonly start: Int32Array,
    private readonly end: Int32Array,
  ) {
    this.p = lo;
  }

  advance(a: number): void {
    const act = this.active;
    let w = 0;
    for (let i = 0; i < act.length; i++) if (this.end[act[i]!]! > a) act[w++] = act[i]!;
    act.length = w;
    while (this.p < this.hi && this.start[this.order[this.p]!]! <= a) {
      const row = this.order[this.p++]!;
      if (this.end[row]! > a) act.push(row);
    }
  }

  /** Adds every start and end of the bucket to `out`. */
  boundaries(out: number[]): void {
    for (let i = this.lo; i < this.hi; i++) {
      const row = this.order[i]!;
      out.push(this.start[row]!, this.end[row]!);
    }
  }
}

/** Sorted distinct values of `xs` (numeric). */
export function sortedUnique(xs: number[]): Int32Array {
  const a = Int32Array.from(xs).sort();
  let w = 0;
  for (let i = 0; i < a.length; i++) if (i === 0 || a[i] !== a[w - 1]) a[w++] = a[i]!;
  return a.subarray(0, w);
}

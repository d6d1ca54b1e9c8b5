/**
 * The fetch graph's requests (docs/design.md, FCP's planner): owner computes, so a rank needs K/V
 * of every key its query runs attend and does not hold itself. Each remote key range is fetched
 * once per rank.
 *
 * For rank h and sequence s (an RS), the attended key span is [0, end of h's last run of s)
 * (causal) or the whole sequence (full). h holds its home runs and, from time zero, its user row of
 * s; the rest of the span is cut at user-row boundaries and at multiples of `chunk` (messages of
 * bounded size keep the rounds even in bytes and let compute start on the first chunks) into
 * requests: its user rank holds each from time zero, and the homes of the runs it crosses hold it
 * after the forward `in` (from time zero in the backward, where K,V stay at home). Who sends each
 * request: fetch.ts.
 */
import { freezeColumns, intColumns } from '../../../core/int-column.ts';
import type { Mask } from '../../../plan/types.ts';
import { firstEndingAfter, type HomeRuns, rsEnd, type SeqRows, subtractInto } from '../placement/layout.ts';

/** Remote key ranges each RS needs, each inside one user row. */
export interface FetchRequests {
  readonly rs: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  /** User rank of the range (it lies inside that rank's user row). */
  readonly user: Int32Array;
}

/** Attended key span end of an RS: the end of its last run (causal) or the sequence length. */
export function spanEnd(runs: HomeRuns, sequences: Int32Array, mask: Mask, rs: number): number {
  return mask === 'causal' ? rsEnd(runs, rs) : sequences[runs.rsSeq[rs]!]!;
}

/** Sorted, merged intervals (flat pairs) that RS `rs` holds: its runs and its user row, clipped to [0, end). */
export function ownedIntervals(
  runs: HomeRuns,
  userRows: SeqRows,
  rs: number,
  end: number,
  out: number[],
): void {
  out.length = 0;
  const s = runs.rsSeq[rs]!;
  const h = runs.rsRank[rs]!;
  // Merge two sorted interval lists: h's home runs and its user rows of s (the even split gives at
  // most one row; a loader layout may give several), both in start order.
  let row = userRows.off[s]!;
  const rowEnd = userRows.off[s + 1]!;
  const nextRow = (): void => {
    while (
      row < rowEnd &&
      (userRows.rank[row] !== h ||
        Math.min(end, userRows.start[row]! + userRows.length[row]!) <= userRows.start[row]!)
    )
      row++;
  };
  nextRow();
  for (let p = runs.rsOff[rs]!, e = runs.rsOff[rs + 1]!; p < e; p++) {
    const run = runs.byRank[p]!;
    const a = runs.start[run]!;
    while (row < rowEnd && userRows.start[row]! <= a) {
      pushMerged(out, userRows.start[row]!, Math.min(end, userRows.start[row]! + userRows.length[row]!));
      row++;
      nextRow();
    }
    pushMerged(out, a, a + runs.length[run]!);
  }
  while (row < rowEnd) {
    pushMerged(out, userRows.start[row]!, Math.min(end, userRows.start[row]! + userRows.length[row]!));
    row++;
    nextRow();
  }
}

/** Appends [a, b) to sorted flat intervals, merging with the last one when they touch. */
function pushMerged(out: number[], a: number, b: number): void {
  const n = out.length;
  if (n > 0 && out[n - 1]! >= a) out[n - 1] = Math.max(out[n - 1]!, b);
  else out.push(a, b);
}

/** Every RS's remote key ranges, cut at user-row boundaries (RS order, then position). */
export function fetchRequests(
  runs: HomeRuns,
  userRows: SeqRows,
  sequences: Int32Array,
  mask: Mask,
  chunk: number,
): FetchRequests {
  // Growable typed columns (number[] pushes and the copies into Int32Arrays cost more).
  const out = intColumns(['rs', 'start', 'length', 'user'] as const);
  const owned: number[] = [];
  const remote: number[] = [];
  const RS = runs.rsRank.length;
  for (let rs = 0; rs < RS; rs++) {
    const s = runs.rsSeq[rs]!;
    const end = spanEnd(runs, sequences, mask, rs);
    ownedIntervals(runs, userRows, rs, end, owned);
    remote.length = 0;
    subtractInto(0, end, owned, remote);
    const lo = userRows.off[s]!;
    const hi = userRows.off[s + 1]!;
    for (let k = 0; k < remote.length; k += 2) {
      const a = remote[k]!;
      const b = remote[k + 1]!;
      for (let j = firstEndingAfter(userRows.start, userRows.length, lo, hi, a); j < hi; j++) {
        const ra = userRows.start[j]!;
        if (ra >= b) break;
        const y = Math.min(b, ra + userRows.length[j]!);
        // Cut at multiples of `chunk` (sequence positions): messages of bounded size keep the
        // rounds balanced in bytes and let compute start on the first chunks.
        for (let x = Math.max(a, ra); x < y; ) {
          const z = Math.min(y, (Math.floor(x / chunk) + 1) * chunk);
          out.rs.push(rs);
          out.start.push(x);
          out.length.push(z - x);
          out.user.push(userRows.rank[j]!);
          x = z;
        }
      }
    }
  }
  return freezeColumns(out);
}

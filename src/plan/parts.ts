/**
 * Part arithmetic of the compact chunk rows (docs/plan-format.md, "Compact chunk rows"): part i of P of a
 * sequence of length L is tokens [i*c, min((i+1)*c, L)) with c = ceil(L/P); empty parts are
 * skipped. The plan format defines it, so it lives in the plan layer: the validator, the report,
 * the expansion, the cost model and the planners all cut parts through this one module. Also
 * per-set statistics that let a cost estimate sum a chunk row over every sequence
 * of its set in O(1) instead of O(sequences).
 */
import type { Mask } from './types.ts';

/** Tokens per part: ceil(L / P). */
export const partSize = (len: number, parts: number): number => Math.ceil(len / parts);

/** First token of part `part` (may be >= len for an empty part). */
export const partStart = (len: number, parts: number, part: number): number => part * partSize(len, parts);

/** Length of part `part` of `parts` of a sequence of length `len` (0 when empty). */
export function partLength(len: number, parts: number, part: number): number {
  const c = partSize(len, parts);
  return Math.max(0, Math.min(c, len - part * c));
}

/** Token range [start, end) of part `part` of `parts` of a sequence of length `len`, or null when empty. */
export function partRange(len: number, parts: number, part: number): [number, number] | null {
  const c = partSize(len, parts);
  const start = part * c;
  return start < len ? [start, Math.min(start + c, len)] : null;
}

/** Number of non-empty parts: ceil(L / ceil(L/P)); they are parts 0..n-1. */
export const nonEmptyParts = (len: number, parts: number): number => Math.ceil(len / partSize(len, parts));

/**
 * Number of parts that are non-empty for at least one sequence of the set. Non-empty parts of one
 * sequence form a prefix 0..n-1, so the live parts of a set are 0..max(n)-1.
 */
export function liveParts(sequences: ArrayLike<number>, seqs: ArrayLike<number>, parts: number): number {
  let m = 0;
  for (let i = 0; i < seqs.length; i++) m = Math.max(m, nonEmptyParts(sequences[seqs[i]!]!, parts));
  return m;
}

/**
 * Sums over the sequences of one set cut into `parts` parts, so that the tokens of a chunk row and
 * the attended pairs of a chunk task row cost O(1) each. With `padded`, every sequence counts as
 * padded to a multiple of `parts` (all parts of length c: TE's padding, charged by a cost model).
 *
 * Why it is O(1): a sequence's part lengths are [c, ..., c, last, 0, ...] (n non-empty parts), so
 * for i != j the product len_i * len_j depends only on max(i, j): it is c^2 while max < n-1,
 * c*last when max = n-1, 0 beyond.
 */
export interface PartStats {
  readonly parts: number;
  /** tokens[i] = sum over sequences of len_i. */
  readonly tokens: Float64Array;
  /** diag[i] = sum of len_i*(len_i+1)/2 (causal pairs of a part against itself). */
  readonly diag: Float64Array;
  /** square[i] = sum of len_i^2 (full-mask pairs of a part against itself). */
  readonly square: Float64Array;
  /** cross[m] = sum of len_i*len_j for any i != j with max(i, j) = m. */
  readonly cross: Float64Array;
}

/** Builds {@link PartStats} for the sequences `seqs` (ids into `sequences`). O(|seqs| + parts). */
export function partStats(
  sequences: ArrayLike<number>,
  seqs: ArrayLike<number>,
  parts: number,
  padded = false,
): PartStats {
  // Accumulate "full" contributions (c-based) as suffix-difference arrays over the last full index,
  // and the partial last part directly; then prefix-sum from the top.
  const fullTok = new Float64Array(parts + 1); // add c to tokens[0..n-2]: fullTok[n-1] += c
  const fullDiag = new Float64Array(parts + 1);
  const fullSq = new Float64Array(parts + 1);
  const tokens = new Float64Array(parts);
  const diag = new Float64Array(parts);
  const square = new Float64Array(parts);
  const cross = new Float64Array(parts);
  for (let k = 0; k < seqs.length; k++) {
    const len = sequences[seqs[k]!]!;
    const c = partSize(len, parts);
    const n = padded ? parts : Math.ceil(len / c);
    const last = padded ? c : len - (n - 1) * c;
    // parts 0..n-2 have length c; part n-1 has `last`.
    fullTok[n - 1]! += c;
    fullDiag[n - 1]! += (c * (c + 1)) / 2;
    fullSq[n - 1]! += c * c;
    tokens[n - 1]! += last;
    diag[n - 1]! += (last * (last + 1)) / 2;
    square[n - 1]! += last * last;
    // cross[m] for m < n-1: c^2 (accumulated below); for m = n-1: c*last.
    cross[n - 1]! += c * last;
  }
  // fullX[e] holds contributions that apply to indices 0..e-1: suffix sums from the top.
  let t = 0;
  let d = 0;
  let s = 0;
  for (let i = parts - 1; i >= 0; i--) {
    t += fullTok[i + 1]!;
    d += fullDiag[i + 1]!;
    s += fullSq[i + 1]!;
    tokens[i]! += t;
    diag[i]! += d;
    square[i]! += s;
    cross[i]! += s; // c^2 for every sequence whose last full index is above i
  }
  return { parts, tokens, diag, square, cross };
}

/** Attended pairs of the chunk task (qPart, kvPart) summed over the set of `stats`. */
export function chunkTaskPairs(stats: PartStats, mask: Mask, qPart: number, kvPart: number): number {
  if (qPart === kvPart) return mask === 'causal' ? stats.diag[qPart]! : stats.square[qPart]!;
  if (mask === 'causal' && qPart < kvPart) return 0;
  return stats.cross[Math.max(qPart, kvPart)]!;
}

/**
 * What one exchange search of token-swap.ts reads of the ranks: the pieces a rank may give (whole
 * rows and rows cut on the block grid or at a half or quarter block), a rank's view (its pieces
 * with their removal changes, its rows by cost per token), fills of a rank's rows up to a token
 * count, and the few busiest and lightest ranks by a load. Split from token-swap.ts, which keeps
 * the search itself.
 */
import type { Delta, Piece, SwapLayout } from './swap-state.ts';

/** Finest cut of a row's pieces: its block size / 2^SUB_GRID. */
const SUB_GRID = 2;

/** What a step reads of one rank: its pieces with their removal changes, and its rows. */
export interface RankView {
  readonly rank: number;
  readonly pieces: Piece[];
  readonly rem: Delta[];
  /** Non-empty rows by removal change per token (normalised), dearest first. */
  readonly dear: number[];
  /** Removal change of each whole row. */
  readonly rowRem: Map<number, Delta>;
  /** The whole-row piece of each row. */
  readonly whole: Map<number, Piece>;
  /** Piece ids by size, ascending (ties: id). */
  readonly bySize: Int32Array;
}

/** First index of `v.bySize` whose piece holds at least `y` tokens. */
export function firstAtLeast(v: RankView, y: number): number {
  let lo = 0;
  let hi = v.bySize.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const p = v.pieces[v.bySize[mid]!]!;
    if (p.e - p.a < y) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The three ranks of largest load, largest first (ties: lower rank). */
export function top3(load: Float64Array): number[] {
  const t: number[] = [];
  for (let r = 0; r < load.length; r++) {
    let k = t.length;
    while (k > 0 && load[t[k - 1]!]! < load[r]!) k--;
    if (k < 3) {
      t.splice(k, 0, r);
      if (t.length > 3) t.pop();
    }
  }
  return t;
}

/** Largest load over ranks other than x and y, from its three largest. */
export function topWithout(load: Float64Array, top: readonly number[], x: number, y: number): number {
  for (const r of top) if (r !== x && r !== y) return load[r]!;
  return 0;
}

/** The k ranks of [lo, hi) (other than `skip`) of least key, ascending (ties: lower rank). */
export function lowest(
  lo: number,
  hi: number,
  k: number,
  skip: number,
  key: (r: number) => number,
): number[] {
  const low: number[] = [];
  for (let r = lo; r < hi; r++) {
    if (r === skip) continue;
    let j = low.length;
    while (j > 0 && key(low[j - 1]!) > key(r)) j--;
    if (j < k) {
      low.splice(j, 0, r);
      if (low.length > k) low.pop();
    }
  }
  return low;
}

/**
 * Pieces rank r may give: whole rows, prefixes up to and suffixes from the first two block-grid
 * points inside, and the first and last half- and quarter-block points (a block of a long sequence
 * can outweigh the gap to any partner).
 */
export function piecesOf(st: SwapLayout, r: number, blockSize: Int32Array): Piece[] {
  const out: Piece[] = [];
  for (const i of st.byRank[r]!) {
    const a = st.start[i]!;
    const e = st.end[i]!;
    if (e <= a) continue;
    out.push({ row: i, a, e });
    const b = blockSize[st.seq[i]!]!;
    let g = (Math.floor(a / b) + 1) * b;
    for (let k = 0; k < 2 && g < e; k++, g += b) out.push({ row: i, a, e: g });
    g = (Math.ceil(e / b) - 1) * b;
    for (let k = 0; k < 2 && g > a; k++, g -= b) out.push({ row: i, a: g, e });
    for (let h = b >> 1; h >= b >> SUB_GRID && h >= 1; h >>= 1) {
      const g1 = (Math.floor(a / h) + 1) * h;
      if (g1 < e && g1 % (2 * h) !== 0) out.push({ row: i, a, e: g1 });
      const g2 = (Math.ceil(e / h) - 1) * h;
      if (g2 > a && g2 % (2 * h) !== 0 && g2 !== g1) out.push({ row: i, a: g2, e });
    }
  }
  return out;
}

/** A fill: its pieces, their sequences, and the load changes on the rank they leave and the one they reach. */
export interface Fill {
  readonly pieces: Piece[];
  readonly seqs: Set<number>;
  readonly dFrom: Delta;
  readonly dTo: Delta;
}

/**
 * A fill of the rows of view `v`'s rank taken in `order` for rank `to`, of distinct sequences other
 * than `avoid`, with tokens in [yLo, yHi]; the last row is cut to the count (`prefix`: its first
 * tokens, else its last), at a block-grid point where one fits. Null when the rows do not reach
 * yLo. Its changes are separable (one piece per sequence): each row's removal plus its arrival.
 */
export function fillOf(
  st: SwapLayout,
  v: RankView,
  to: number,
  order: readonly number[],
  avoid: number,
  yLo: number,
  yHi: number,
  prefix: boolean,
  blockSize: Int32Array,
  may: (p: Piece, to: number) => boolean,
): Fill | null {
  if (yHi < 1 || yLo > yHi) return null;
  const from = v.rank;
  const pieces: Piece[] = [];
  const seqs = new Set<number>();
  const dFrom: Delta = [0, 0];
  const dTo: Delta = [0, 0];
  const add = (p: Piece, rem: Delta): void => {
    pieces.push(p);
    const arrive = st.arrive(to, p);
    dFrom[0] += rem[0];
    dFrom[1] += rem[1];
    dTo[0] += arrive[0];
    dTo[1] += arrive[1];
  };
  let acc = 0;
  for (const i of order) {
    if (acc >= yLo) break;
    const s = st.seq[i]!;
    const a = st.start[i]!;
    const e = st.end[i]!;
    if (s === avoid || seqs.has(s) || e <= a || !may({ row: i, a, e }, to)) continue;
    if (acc + e - a <= yHi) {
      seqs.add(s);
      add(v.whole.get(i)!, v.rowRem.get(i)!);
      acc += e - a;
      continue;
    }
    const cLo = Math.max(1, yLo - acc);
    const cHi = yHi - acc;
    const b = blockSize[s]!;
    let c = cLo;
    let p: Piece;
    if (prefix) {
      const g = Math.ceil((a + cLo) / b) * b;
      if (g - a <= cHi) c = g - a;
      p = { row: i, a, e: a + c };
    } else {
      const g = Math.floor((e - cLo) / b) * b;
      if (e - g <= cHi && g > a) c = e - g;
      p = { row: i, a: e - c, e };
    }
    // A whole sequence may go anywhere; the part of one cut from it only where `may` says.
    if (!may(p, to)) continue;
    seqs.add(s);
    add(p, st.delta(from, [p], []));
    acc += c;
  }
  return acc >= yLo && acc <= yHi && pieces.length > 0 ? { pieces, seqs, dFrom, dTo } : null;
}

/**
 * Token-neutral refinement of the loader layout (deployment mode (b), loader-layout.ts).
 *
 * The loader layout is levelled to equal tokens (within TOKEN_BAND) after a placement balanced by
 * one weight per block, the forward plus the backward modelled time (weights.ts). Levelling moves
 * tokens with no regard to compute, and the two phases weigh pieces differently, so the layout the
 * simulator sees is left a few percent off in each phase (longtail, seed 1, 128 ranks: forward
 * 3.4%, backward 5.0%). Both phases run in this layout, so what a training step pays is the busiest
 * rank's forward plus the busiest rank's backward: {@link refineLoaderLayout} lowers
 * max_r fwd_r + max_r bwd_r (phase-cost.ts) by exchanging pieces between a busiest rank and a
 * lighter one so that both keep their tokens in the band. The loader can deliver any layout, so a
 * piece may go anywhere; moving it only changes which K/V must be fetched.
 */
import type { Layout } from '../../../plan/types.ts';
import type { PhaseLoads, SwapModel } from './phase-cost.ts';
import { type Delta, type Piece, SwapLayout, sum } from './swap-state.ts';

export type { PhaseLoads, SwapModel } from './phase-cost.ts';
export { layoutPhaseMs } from './phase-cost.ts';

/** What {@link refineLoaderLayout} returns: the refined layout and its loads before and after. */
export interface SwapResult {
  readonly layout: Layout;
  /** Exchanges applied. */
  readonly steps: number;
  readonly before: PhaseLoads;
  readonly after: PhaseLoads;
}

/** Bounds of the refinement. */
export interface SwapOptions {
  /** Per rank, the least and the most tokens it may hold (loader-layout.ts, tokenBounds). */
  readonly lo: Float64Array;
  readonly hi: Float64Array;
  /** Most exchanges applied. */
  readonly steps: number;
  /** Lighter ranks tried as partners of a busiest rank per step. */
  readonly partners: number;
}

/** Finest cut of a row's pieces: its block size / 2^SUB_GRID. */
const SUB_GRID = 2;

/**
 * Weight of the work an exchange adds in total (both ranks, both phases) in its score: cutting a
 * run or a short sequence in two costs kernel efficiency, which a gain on the busiest rank alone
 * would hide.
 */
const WASTE = 0.25;

/** Relative gain below which an exchange is not worth a step (float noise of the sums). */
const EPS = 1e-9;

/** What a step reads of one rank: its pieces with their removal changes, and its rows. */
interface RankView {
  readonly pieces: Piece[];
  readonly rem: Delta[];
  /** Non-empty rows by removal change per token (normalised), dearest first. */
  readonly dear: number[];
  /** Removal change of each whole row. */
  readonly rowRem: Map<number, Delta>;
}

/** An exchange: pieces from the busy rank A to B and from B to A, and the load changes of both. */
interface Move {
  readonly A: number;
  readonly B: number;
  readonly give: readonly Piece[];
  readonly take: readonly Piece[];
  readonly dA: Delta;
  readonly dB: Delta;
}

/** The three ranks of largest load, largest first (ties: lower rank). */
function top3(load: Float64Array): number[] {
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
function topWithout(load: Float64Array, top: readonly number[], x: number, y: number): number {
  for (const r of top) if (r !== x && r !== y) return load[r]!;
  return 0;
}

/** The k ranks (other than `skip`) of least key, ascending (ties: lower rank). */
function lowest(world: number, k: number, skip: number, key: (r: number) => number): number[] {
  const low: number[] = [];
  for (let r = 0; r < world; r++) {
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
 * Lowers max_r fwd_r + max_r bwd_r of `layout` by exchanging pieces between a busiest rank and a
 * lighter one, every rank's tokens staying within [lo, hi] (a rank that starts outside may not
 * move further out). Each step takes the rank with the largest forward load and the one with the
 * largest backward load (A) and a few lightest partners (B: by forward, by backward, by both), and
 * tries a piece of A for a piece of B (pieces: whole rows, rows cut at their first or last two
 * block-grid points, or at a half or quarter block), a piece alone, and a piece of one side
 * against a fill of the other side's rows up to the token count (A takes B's cheapest rows per
 * token, or gives its dearest; the last row cut to the count, at a grid point where one fits). Of
 * the exchanges that do not raise the objective, it applies the one of least score: the new
 * objective plus the pair's own (max of their forward loads plus max of their backward loads: so
 * that equal maxima still make progress) plus {@link WASTE} x the work added; it must beat the
 * score of standing still. Ties go to the first tried: deterministic. The objective never rises,
 * and the loads are exact under the model (every exchange is costed on the rows as they are).
 */
export function refineLoaderLayout(layout: Layout, world: number, m: SwapModel, o: SwapOptions): SwapResult {
  const st = new SwapLayout(layout, world, m);
  const { fwd, bwd, tokens, seq, start, end } = st;
  const before: PhaseLoads = { fwd: fwd.slice(), bwd: bwd.slice() };
  let meanF = 0;
  let meanB = 0;
  for (let r = 0; r < world; r++) {
    meanF += fwd[r]! / world;
    meanB += bwd[r]! / world;
  }
  const nf = meanF > 0 ? 1 / meanF : 0;
  const nb = meanB > 0 ? 1 / meanB : 0;
  const lo = (r: number): number => Math.min(o.lo[r]!, tokens[r]!);
  const hi = (r: number): number => Math.max(o.hi[r]!, tokens[r]!);
  const views = new Map<number, RankView>();
  const viewOf = (r: number): RankView => {
    let v = views.get(r);
    if (v === undefined) {
      const pieces = piecesOf(st, r, m.blockSize);
      const rem = pieces.map((p) => st.delta(r, [p], []));
      const rowRem = new Map<number, Delta>();
      pieces.forEach((p, k) => {
        if (p.a === start[p.row] && p.e === end[p.row]) rowRem.set(p.row, rem[k]!);
      });
      const per = (i: number): number =>
        (rowRem.get(i)![0] * nf + rowRem.get(i)![1] * nb) / (end[i]! - start[i]!);
      const dear = [...rowRem.keys()].sort((x, y) => per(x) - per(y) || x - y);
      v = { pieces, rem, dear, rowRem };
      views.set(r, v);
    }
    return v;
  };

  let steps = 0;
  while (steps < o.steps) {
    const tf = top3(fwd);
    const tb = top3(bwd);
    const F = fwd[tf[0]!]! + bwd[tb[0]!]!;
    let best = null as Move | null;
    let bestScore = Number.POSITIVE_INFINITY;
    for (const A of [...new Set([tf[0]!, tb[0]!])].sort((x, y) => x - y)) {
      const va = viewOf(A);
      const k = Math.max(1, Math.ceil(o.partners / 3));
      const partners = new Set<number>([
        ...lowest(world, k, A, (r) => fwd[r]!),
        ...lowest(world, k, A, (r) => bwd[r]!),
        ...lowest(world, k, A, (r) => fwd[r]! * nf + bwd[r]! * nb),
      ]);
      for (const B of [...partners].sort((x, y) => x - y)) {
        const vb = viewOf(B);
        const oF = topWithout(fwd, tf, A, B);
        const oB = topWithout(bwd, tb, A, B);
        const still = F + Math.max(fwd[A]!, fwd[B]!) + Math.max(bwd[A]!, bwd[B]!);
        const consider = (give: Piece[], take: Piece[], dA: Delta, dB: Delta): void => {
          const fA = fwd[A]! + dA[0];
          const bA = bwd[A]! + dA[1];
          const fB = fwd[B]! + dB[0];
          const bB = bwd[B]! + dB[1];
          const nF = Math.max(oF, fA, fB) + Math.max(oB, bA, bB);
          if (nF > F * (1 + EPS)) return;
          const score = nF + Math.max(fA, fB) + Math.max(bA, bB) + WASTE * (dA[0] + dA[1] + dB[0] + dB[1]);
          if (score < still * (1 - EPS) && score < bestScore * (1 - EPS)) {
            best = { A, B, give, take, dA, dB };
            bestScore = score;
          }
        };
        // Net tokens from A to B that keep both in their bands.
        const netLo = Math.max(tokens[A]! - hi(A), lo(B) - tokens[B]!);
        const netHi = Math.min(tokens[A]! - lo(A), hi(B) - tokens[B]!);
        const fits = (x: number): boolean => x >= netLo && x <= netHi;
        const addB = va.pieces.map((p) => st.arrive(B, p));
        const addA = vb.pieces.map((p) => st.arrive(A, p));
        /** Exact changes of an exchange whose pieces share a sequence (not separable). */
        const exchange = (give: Piece[], take: Piece[]): void => {
          consider(give, take, st.delta(A, give, take), st.delta(B, take, give));
        };
        const cheap = [...vb.dear].reverse();
        for (let p = 0; p < va.pieces.length; p++) {
          const P = va.pieces[p]!;
          const x = P.e - P.a;
          const sP = seq[P.row]!;
          if (fits(x)) consider([P], [], va.rem[p]!, addB[p]!);
          for (let q = 0; q < vb.pieces.length; q++) {
            const Q = vb.pieces[q]!;
            if (!fits(x - (Q.e - Q.a))) continue;
            if (seq[Q.row] === sP) exchange([P], [Q]);
            else consider([P], [Q], sum(va.rem[p]!, addA[q]!), sum(vb.rem[q]!, addB[p]!));
          }
          const take = fill(st, cheap, sP, x - netHi, x - netLo, true, m.blockSize);
          if (take !== null) fillMove([P], take, va.rem[p]!, addB[p]!, vb, false);
        }
        for (let q = 0; q < vb.pieces.length; q++) {
          const Q = vb.pieces[q]!;
          const y = Q.e - Q.a;
          const give = fill(st, va.dear, seq[Q.row]!, y + netLo, y + netHi, false, m.blockSize);
          if (give !== null) fillMove(give, [Q], addA[q]!, vb.rem[q]!, va, true);
        }
        /**
         * An exchange of one piece against a fill of distinct other sequences (separable): the
         * piece's changes on A and on B (d1, d2) plus each fill row's removal from its rank (its
         * view `vf`) and arrival on the other.
         */
        function fillMove(
          give: Piece[],
          take: Piece[],
          d1: Delta,
          d2: Delta,
          vf: RankView,
          fromA: boolean,
        ): void {
          const from = fromA ? A : B;
          const to = fromA ? B : A;
          let dFrom: Delta = [0, 0];
          let dTo: Delta = [0, 0];
          for (const p of fromA ? give : take) {
            const whole = p.a === start[p.row] && p.e === end[p.row];
            dFrom = sum(dFrom, whole ? vf.rowRem.get(p.row)! : st.delta(from, [p], []));
            dTo = sum(dTo, st.arrive(to, p));
          }
          if (fromA) consider(give, take, sum(d1, dFrom), sum(d2, dTo));
          else consider(give, take, sum(d1, dTo), sum(d2, dFrom));
        }
      }
    }
    if (best === null) break;
    st.apply(best.A, best.B, best.give, best.take, best.dA, best.dB);
    views.delete(best.A);
    views.delete(best.B);
    steps++;
  }
  return { layout: st.toLayout(), steps, before, after: { fwd: fwd.slice(), bwd: bwd.slice() } };
}

/**
 * Pieces rank r may give: whole rows, prefixes up to and suffixes from the first two block-grid
 * points inside, and the first and last half- and quarter-block points (a block of a long sequence
 * can outweigh the gap to any partner).
 */
function piecesOf(st: SwapLayout, r: number, blockSize: Int32Array): Piece[] {
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

/**
 * A fill of whole rows taken in `order`, of distinct sequences other than `avoid`, with tokens in
 * [yLo, yHi]; the last row is cut to the count (`prefix`: its first tokens, else its last), at a
 * block-grid point where one fits. Null when the rows do not reach yLo.
 */
function fill(
  st: SwapLayout,
  order: readonly number[],
  avoid: number,
  yLo: number,
  yHi: number,
  prefix: boolean,
  blockSize: Int32Array,
): Piece[] | null {
  if (yHi < 1 || yLo > yHi) return null;
  const out: Piece[] = [];
  const used = new Set<number>([avoid]);
  let acc = 0;
  for (const i of order) {
    if (acc >= yLo) break;
    const s = st.seq[i]!;
    const a = st.start[i]!;
    const e = st.end[i]!;
    if (used.has(s) || e <= a) continue;
    used.add(s);
    if (acc + e - a <= yHi) {
      out.push({ row: i, a, e });
      acc += e - a;
      continue;
    }
    const cLo = Math.max(1, yLo - acc);
    const cHi = yHi - acc;
    const b = blockSize[s]!;
    let c = cLo;
    if (prefix) {
      const g = Math.ceil((a + cLo) / b) * b;
      if (g - a <= cHi) c = g - a;
      out.push({ row: i, a, e: a + c });
    } else {
      const g = Math.floor((e - cLo) / b) * b;
      if (e - g <= cHi && g > a) c = e - g;
      out.push({ row: i, a: e - c, e });
    }
    acc += c;
  }
  return acc >= yLo && acc <= yHi && out.length > 0 ? out : null;
}

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

import { sameNode } from '../../../core/nodes.ts';
import type { Layout } from '../../../plan/types.ts';
import type { PhaseLoads, SwapModel } from './phase-cost.ts';
import {
  type Fill,
  fillOf,
  firstAtLeast,
  lowest,
  piecesOf,
  type RankView,
  top3,
  topWithout,
} from './swap-pieces.ts';
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
  /** GPUs per node: a piece may cross nodes only where it brings no new K/V dependency there. */
  readonly nodeSize: number;
  /**
   * Pieces never leave their rank's node (mode (a), phase-swaps.ts: a piece away from its user
   * rank is reshuffled in every layer). Unset: they may cross nodes where `may` allows.
   */
  readonly nodeOnly?: boolean;
}

/**
 * Weight of the work an exchange adds in total (both ranks, both phases) in its score: cutting a
 * run or a short sequence in two costs kernel efficiency, which a gain on the busiest rank alone
 * would hide.
 */
const WASTE = 0.25;

/** Relative gain below which an exchange is not worth a step (float noise of the sums). */
const EPS = 1e-9;

/** An exchange: pieces from the busy rank A to B and from B to A, and the load changes of both. */
interface Move {
  readonly A: number;
  readonly B: number;
  readonly give: readonly Piece[];
  readonly take: readonly Piece[];
  readonly dA: Delta;
  readonly dB: Delta;
}

/**
 * Lowers max_r fwd_r + max_r bwd_r of `layout` by exchanging pieces between a busiest rank and a
 * lighter one, every rank's tokens staying within [lo, hi] (a rank that starts outside may not
 * move further out). Each step takes the rank with the largest forward load and the one with the
 * largest backward load (A) and a few lightest partners (B: by forward, by backward, by both, in
 * the world and in A's node), and
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
      const whole = new Map<number, Piece>();
      pieces.forEach((p, k) => {
        if (p.a !== start[p.row] || p.e !== end[p.row]) return;
        rowRem.set(p.row, rem[k]!);
        whole.set(p.row, p);
      });
      const per = (i: number): number =>
        (rowRem.get(i)![0] * nf + rowRem.get(i)![1] * nb) / (end[i]! - start[i]!);
      const dear = [...rowRem.keys()].sort((x, y) => per(x) - per(y) || x - y);
      const size = (k: number): number => pieces[k]!.e - pieces[k]!.a;
      const bySize = Int32Array.from(pieces.keys()).sort((x, y) => size(x) - size(y) || x - y);
      v = { rank: r, pieces, rem, dear, rowRem, whole, bySize };
      views.set(r, v);
    }
    return v;
  };

  const node = Math.max(1, o.nodeSize);
  /**
   * Whether piece p may go to rank `to`: within its node, or where it needs no K/V from elsewhere
   * (a whole sequence) or `to` already fetches that sequence's (it holds some of it). Swaps that
   * sent blocks of long sequences to new ranks across nodes balanced compute but added NIC K/V
   * (simulated, magi, 3 batches, fwd MFU at 128 / 256 ranks: 0.553 -> 0.526, 0.530 -> 0.487).
   */
  const may = (p: Piece, to: number): boolean => {
    const s = seq[p.row]!;
    if (sameNode(st.rank[p.row]!, to, node)) return true;
    if (o.nodeOnly === true) return false;
    return (p.a === 0 && p.e === m.sequences[s]) || st.holds(to, s);
  };

  /** What a partner is light by: forward, backward, both (normalised). */
  const partnerKeys = [
    (r: number): number => fwd[r]!,
    (r: number): number => bwd[r]!,
    (r: number): number => fwd[r]! * nf + bwd[r]! * nb,
  ];
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
      // The lightest by each key in the world, and in A's own node: a piece of a sequence A
      // shares may go only there (or to a rank that holds some of it, `may`), and the lightest
      // ranks of the world are mostly elsewhere, so without its node mates a busiest rank full of
      // long-sequence blocks found no exchange (256 ranks, longtail seeds 1-3: 1, 0 and 2 steps of
      // 32, modelled backward imbalance left at 2.0-4.2%).
      const n0 = Math.floor(A / node) * node;
      const partners = new Set<number>();
      for (const key of partnerKeys) {
        // With `nodeOnly` no piece crosses nodes: a partner elsewhere has nothing to exchange.
        if (o.nodeOnly !== true || node >= world)
          for (const r of lowest(0, world, k, A, key)) partners.add(r);
        if (node > 1 && world > node)
          for (const r of lowest(n0, Math.min(world, n0 + node), k, A, key)) partners.add(r);
      }
      for (const B of [...partners].sort((x, y) => x - y)) {
        const vb = viewOf(B);
        const oF = topWithout(fwd, tf, A, B);
        const oB = topWithout(bwd, tb, A, B);
        const still = F + Math.max(fwd[A]!, fwd[B]!) + Math.max(bwd[A]!, bwd[B]!);
        /** Score of an exchange with these load changes (Infinity: it would raise the objective or gain nothing). */
        const scoreOf = (dAf: number, dAb: number, dBf: number, dBb: number): number => {
          const fA = fwd[A]! + dAf;
          const bA = bwd[A]! + dAb;
          const fB = fwd[B]! + dBf;
          const bB = bwd[B]! + dBb;
          const nF = Math.max(oF, fA, fB) + Math.max(oB, bA, bB);
          if (nF > F * (1 + EPS)) return Number.POSITIVE_INFINITY;
          const score = nF + Math.max(fA, fB) + Math.max(bA, bB) + WASTE * (dAf + dAb + dBf + dBb);
          return score < still * (1 - EPS) && score < bestScore * (1 - EPS)
            ? score
            : Number.POSITIVE_INFINITY;
        };
        const consider = (give: readonly Piece[], take: readonly Piece[], dA: Delta, dB: Delta): void => {
          const score = scoreOf(dA[0], dA[1], dB[0], dB[1]);
          if (score === Number.POSITIVE_INFINITY) return;
          best = { A, B, give, take, dA, dB };
          bestScore = score;
        };
        // Net tokens from A to B that keep both in their bands.
        const netLo = Math.max(tokens[A]! - hi(A), lo(B) - tokens[B]!);
        const netHi = Math.min(tokens[A]! - lo(A), hi(B) - tokens[B]!);
        const addB = va.pieces.map((p) => st.arrive(B, p));
        const addA = vb.pieces.map((p) => st.arrive(A, p));
        const cheap = [...vb.dear].reverse();
        const takes = new Map<number, Fill | null>();
        for (let p = 0; p < va.pieces.length; p++) {
          const P = va.pieces[p]!;
          const x = P.e - P.a;
          const sP = seq[P.row]!;
          const rA = va.rem[p]!;
          const aB = addB[p]!;
          if (!may(P, B)) continue;
          if (x >= netLo && x <= netHi) consider([P], [], rA, aB);
          // B's pieces of y tokens with x - y in [netLo, netHi] (vb.bySize: ascending size).
          for (let k = firstAtLeast(vb, x - netHi); k < vb.bySize.length; k++) {
            const q = vb.bySize[k]!;
            const Q = vb.pieces[q]!;
            if (Q.e - Q.a > x - netLo) break;
            if (!may(Q, A)) continue;
            if (seq[Q.row] === sP) {
              consider([P], [Q], st.delta(A, [P], [Q]), st.delta(B, [Q], [P]));
              continue;
            }
            const rB = vb.rem[q]!;
            const aA = addA[q]!;
            const score = scoreOf(rA[0] + aA[0], rA[1] + aA[1], rB[0] + aB[0], rB[1] + aB[1]);
            if (score === Number.POSITIVE_INFINITY) continue;
            best = { A, B, give: [P], take: [Q], dA: sum(rA, aA), dB: sum(rB, aB) };
            bestScore = score;
          }
          // A fill of B's cheapest rows (cached by size; one of its own when it holds sP).
          let f = takes.get(x);
          if (f === undefined) {
            f = fillOf(st, vb, A, cheap, -1, x - netHi, x - netLo, true, m.blockSize, may);
            takes.set(x, f);
          }
          if (f?.seqs.has(sP)) f = fillOf(st, vb, A, cheap, sP, x - netHi, x - netLo, true, m.blockSize, may);
          if (f !== null) consider([P], f.pieces, sum(rA, f.dTo), sum(aB, f.dFrom));
        }
        const gives = new Map<number, Fill | null>();
        for (let q = 0; q < vb.pieces.length; q++) {
          const Q = vb.pieces[q]!;
          if (!may(Q, A)) continue;
          const y = Q.e - Q.a;
          const sQ = seq[Q.row]!;
          let f = gives.get(y);
          if (f === undefined) {
            f = fillOf(st, va, B, va.dear, -1, y + netLo, y + netHi, false, m.blockSize, may);
            gives.set(y, f);
          }
          if (f?.seqs.has(sQ))
            f = fillOf(st, va, B, va.dear, sQ, y + netLo, y + netHi, false, m.blockSize, may);
          if (f !== null) consider(f.pieces, [Q], sum(addA[q]!, f.dFrom), sum(vb.rem[q]!, f.dTo));
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

/**
 * The mutable layout behind the loader layout's refinement (token-swap.ts): rows by rank and by
 * rank-sequence pair, each rank's tokens and modelled forward and backward loads, and the exact
 * load change of moving pieces of rows between ranks. A rank's load is the sum over its sequences
 * of the tiles of that sequence's runs there (phase-cost.ts), so changes of different sequences
 * add up, and only the pairs a move touches are walked again.
 */

import { TripleIds } from '../../../core/triple-ids.ts';
import type { Layout } from '../../../plan/types.ts';
import { PhaseTileCost, walkTiles } from '../grid.ts';
import type { SwapModel } from './phase-cost.ts';

/** A piece of a row that may change rank: [a, e), a prefix, a suffix or the whole row. */
export interface Piece {
  readonly row: number;
  readonly a: number;
  readonly e: number;
}

/** A load change: forward and backward ms. */
export type Delta = [number, number];

/** Sum of two load changes. */
export const sum = (x: Delta, y: Delta): Delta => [x[0] + y[0], x[1] + y[1]];

/** See the module comment. Rows emptied by a move stay, with no tokens (every reader skips them). */
export class SwapLayout {
  readonly rank: number[];
  readonly seq: number[];
  readonly start: number[];
  readonly end: number[];
  /** Row ids by rank. */
  readonly byRank: number[][];
  readonly tokens: Float64Array;
  readonly fwd: Float64Array;
  readonly bwd: Float64Array;
  private readonly S: number;
  private readonly rsRows = new Map<number, number[]>();
  private readonly base = new Map<number, Delta>();
  private readonly cost: PhaseTileCost;
  private qa = new Int32Array(16);
  private qe = new Int32Array(16);
  /** Loads of runs alone ({@link runCost}), by the dense id of (sequence, start, end). */
  private readonly runIds = new TripleIds();
  private readonly runLoads: Delta[] = [];
  private readonly causal: boolean;

  constructor(
    layout: Layout,
    readonly world: number,
    private readonly m: SwapModel,
  ) {
    this.S = m.sequences.length;
    this.rank = Array.from(layout.rank);
    this.seq = Array.from(layout.seq);
    this.start = Array.from(layout.start);
    this.end = Array.from(layout.start, (a, i) => a + layout.length[i]!);
    this.byRank = Array.from({ length: world }, () => []);
    this.tokens = new Float64Array(world);
    this.fwd = new Float64Array(world);
    this.bwd = new Float64Array(world);
    this.causal = m.mask === 'causal';
    this.cost = new PhaseTileCost(m.kernel, this.causal);
    for (let i = 0; i < this.rank.length; i++) {
      this.index(i);
      this.tokens[this.rank[i]!]! += this.end[i]! - this.start[i]!;
    }
    for (const k of this.rsRows.keys()) {
      const r = Math.floor(k / this.S);
      const [f, b] = this.baseOf(r, k % this.S);
      this.fwd[r]! += f;
      this.bwd[r]! += b;
    }
  }

  private index(i: number): void {
    const k = this.rank[i]! * this.S + this.seq[i]!;
    const l = this.rsRows.get(k);
    if (l === undefined) this.rsRows.set(k, [i]);
    else l.push(i);
    this.byRank[this.rank[i]!]!.push(i);
  }

  /** Whether rank r holds tokens of sequence s. */
  holds(r: number, s: number): boolean {
    for (const i of this.rsRows.get(r * this.S + s) ?? []) if (this.end[i]! > this.start[i]!) return true;
    return false;
  }

  /** Loads of sequence s on rank r with `rem` taken out and `add` put in. */
  private costOf(r: number, s: number, rem: readonly Piece[], add: readonly Piece[]): Delta {
    const { start, end, seq } = this;
    const rows = this.rsRows.get(r * this.S + s) ?? [];
    // Interval bounds in typed scratch arrays with a count (truncating a plain array is a runtime
    // call, a tenth of this function's time when it was one).
    const cap = rows.length + add.length;
    if (this.qa.length < cap) {
      this.qa = new Int32Array(2 * cap);
      this.qe = new Int32Array(2 * cap);
    }
    const { qa, qe } = this;
    let n = 0;
    for (const i of rows) {
      let a = start[i]!;
      let e = end[i]!;
      for (const p of rem) {
        if (p.row !== i) continue;
        if (p.a === a) a = p.e;
        else e = p.a;
      }
      if (e > a) {
        qa[n] = a;
        qe[n++] = e;
      }
    }
    for (const p of add) {
      if (seq[p.row] !== s) continue;
      qa[n] = p.a;
      qe[n++] = p.e;
    }
    // Few intervals: insertion sort by start.
    for (let x = 1; x < n; x++)
      for (let y = x; y > 0 && qa[y - 1]! > qa[y]!; y--) {
        const ta = qa[y - 1]!;
        qa[y - 1] = qa[y]!;
        qa[y] = ta;
        const te = qe[y - 1]!;
        qe[y - 1] = qe[y]!;
        qe[y] = te;
      }
    // Adjacent intervals are one run (as addRuns merges them); each run's loads are memoised.
    let f = 0;
    let b = 0;
    let x = 0;
    while (x < n) {
      const a = qa[x]!;
      let e = qe[x]!;
      x++;
      while (x < n && qa[x] === e) e = qe[x++]!;
      const d = this.runCost(s, a, e);
      f += d[0];
      b += d[1];
    }
    return [f, b];
  }

  /**
   * Loads of the run [a, e) of sequence s alone, memoised: an exchange search costs the same runs
   * again and again (the rows a piece leaves behind, a partner's runs with and without it), and
   * the tiles of a long sequence's run are most of the refinement's time (mode (a) at 16 ranks:
   * three quarters of its planning before the memo).
   */
  private runCost(s: number, a: number, e: number): Delta {
    const id = this.runIds.intern(s, a, e);
    if (id === this.runLoads.length) {
      this.cost.fwd = 0;
      this.cost.bwd = 0;
      walkTiles(a, e, this.m.sequences[s]!, this.m.blockSize[s]!, this.causal, this.m.grid, this.cost);
      this.runLoads.push([this.cost.fwd, this.cost.bwd]);
    }
    return this.runLoads[id]!;
  }

  private baseOf(r: number, s: number): Delta {
    const k = r * this.S + s;
    let v = this.base.get(k);
    if (v === undefined) {
      v = this.costOf(r, s, [], []);
      this.base.set(k, v);
    }
    return v;
  }

  /** Change of rank r's loads when the pieces `rem` leave it and `add` arrive. */
  delta(r: number, rem: readonly Piece[], add: readonly Piece[]): Delta {
    const seqs: number[] = [];
    for (const p of rem) if (!seqs.includes(this.seq[p.row]!)) seqs.push(this.seq[p.row]!);
    for (const p of add) if (!seqs.includes(this.seq[p.row]!)) seqs.push(this.seq[p.row]!);
    let f = 0;
    let b = 0;
    for (const s of seqs) {
      const [f0, b0] = this.baseOf(r, s);
      const [f1, b1] = this.costOf(r, s, rem, add);
      f += f1 - f0;
      b += b1 - b0;
    }
    return [f, b];
  }

  /** Change of rank r's loads when piece p arrives: its cost alone where r holds none of its sequence. */
  arrive(r: number, p: Piece): Delta {
    const s = this.seq[p.row]!;
    if (this.holds(r, s)) return this.delta(r, [], [p]);
    return this.runCost(s, p.a, p.e);
  }

  /** Moves the pieces and applies the load changes computed for them (`dFrom`, `dTo` of ranks from and to). */
  apply(
    from: number,
    to: number,
    give: readonly Piece[],
    take: readonly Piece[],
    dFrom: Delta,
    dTo: Delta,
  ): void {
    const touched = new Set<number>();
    for (const p of give) touched.add(this.seq[p.row]!);
    for (const p of take) touched.add(this.seq[p.row]!);
    for (const p of give) this.move(p, to);
    for (const p of take) this.move(p, from);
    for (const r of [from, to]) for (const s of touched) this.base.delete(r * this.S + s);
    this.fwd[from]! += dFrom[0];
    this.bwd[from]! += dFrom[1];
    this.fwd[to]! += dTo[0];
    this.bwd[to]! += dTo[1];
  }

  private move(p: Piece, to: number): void {
    const i = p.row;
    const from = this.rank[i]!;
    if (p.a === this.start[i]) this.start[i] = p.e;
    else this.end[i] = p.a;
    const j = this.rank.length;
    this.rank.push(to);
    this.seq.push(this.seq[i]!);
    this.start.push(p.a);
    this.end.push(p.e);
    this.index(j);
    this.tokens[from]! -= p.e - p.a;
    this.tokens[to]! += p.e - p.a;
  }

  /** The rows in (rank, sequence, start) order, adjacent rows of one sequence on one rank merged. */
  toLayout(): Layout {
    const { rank, seq, start, end } = this;
    const order: number[] = [];
    for (let i = 0; i < rank.length; i++) if (end[i]! > start[i]!) order.push(i);
    order.sort((x, y) => rank[x]! - rank[y]! || seq[x]! - seq[y]! || start[x]! - start[y]!);
    const R: number[] = [];
    const Sq: number[] = [];
    const A: number[] = [];
    const L: number[] = [];
    for (const i of order) {
      const k = R.length - 1;
      if (k >= 0 && R[k] === rank[i] && Sq[k] === seq[i] && A[k]! + L[k]! === start[i]) {
        L[k]! += end[i]! - start[i]!;
        continue;
      }
      R.push(rank[i]!);
      Sq.push(seq[i]!);
      A.push(start[i]!);
      L.push(end[i]! - start[i]!);
    }
    return {
      rank: Int32Array.from(R),
      seq: Int32Array.from(Sq),
      start: Int32Array.from(A),
      length: Int32Array.from(L),
    };
  }
}

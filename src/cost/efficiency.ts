/**
 * Efficiency (fraction of peak FLOP/s) of attention launches, interpolated from calibration points.
 *
 * Varlen: a 2-D table over x = log2(lq) and y = log2(lk / lq), one per (direction, causal). The grid
 * need not be a full product (the H200 grid lacks 8K x 128K): each measured lq is a row, piecewise
 * linear in y and clamped at its ends; between rows, linear in x. Exact at every measured point.
 * Dense: a 1-D table over log2(L) of equal L x L squares, per (direction, causal).
 *
 * Outside the table: longer launches keep the efficiency of the largest measured one (attention
 * efficiency saturates by 8K). A segment shorter than the smallest measured length (128) in queries
 * or keys takes as long as the 128-padded segment (flash kernels compute whole 128-row query tiles
 * and whole key tiles, so a 2 x 2 segment costs what a 128 x 128 one does): its efficiency is scaled
 * by its pairs over the padded segment's pairs. A segment with fewer keys than queries is costed at
 * the efficiency of the square of its key length (the per-tile key loop is what amortises the tile
 * prologue and epilogue).
 */

/** Causal pairs of one bottom-right aligned segment of lq queries against lk >= lq keys. */
export function bottomRightPairs(lq: number, lk: number): number {
  return lq * (lk - lq) + (lq * (lq + 1)) / 2;
}

/** Pairs one calibration segment attends. */
export function pointPairs(lq: number, lk: number, causal: boolean): number {
  return causal ? bottomRightPairs(lq, Math.max(lq, lk)) : lq * lk;
}

interface Row {
  ys: Float64Array;
  vs: Float64Array;
}

/** Piecewise linear interpolation over sorted xs, clamped at the ends. */
function interp1(xs: Float64Array, vs: Float64Array, x: number): number {
  const n = xs.length;
  if (x <= xs[0]!) return vs[0]!;
  if (x >= xs[n - 1]!) return vs[n - 1]!;
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! <= x) lo = mid;
    else hi = mid;
  }
  const t = (x - xs[lo]!) / (xs[hi]! - xs[lo]!);
  return vs[lo]! + t * (vs[hi]! - vs[lo]!);
}

/** Varlen efficiency table of one (direction, causal). */
export class VarlenGrid {
  private readonly xs: Float64Array;
  private readonly rows: Row[];
  /** Smallest measured query length. */
  readonly minLq: number;

  /** `points`: (lq, lk, efficiency) with lk >= lq; `causal`: bottom-right aligned segments. */
  constructor(
    points: readonly { lq: number; lk: number; eff: number }[],
    private readonly causal: boolean,
  ) {
    const byLq = new Map<number, { y: number; v: number }[]>();
    for (const p of points) {
      const list = byLq.get(p.lq) ?? [];
      list.push({ y: Math.log2(p.lk / p.lq), v: p.eff });
      byLq.set(p.lq, list);
    }
    const lqs = [...byLq.keys()].sort((a, b) => a - b);
    this.minLq = lqs[0] ?? 1;
    this.xs = Float64Array.from(lqs, (l) => Math.log2(l));
    this.rows = lqs.map((l) => {
      // Average duplicates of one point, then sort by y.
      const acc = new Map<number, { s: number; n: number }>();
      for (const { y, v } of byLq.get(l)!) {
        const a = acc.get(y) ?? { s: 0, n: 0 };
        a.s += v;
        a.n++;
        acc.set(y, a);
      }
      const ys = [...acc.keys()].sort((a, b) => a - b);
      return { ys: Float64Array.from(ys), vs: Float64Array.from(ys, (y) => acc.get(y)!.s / acc.get(y)!.n) };
    });
  }

  /** Efficiency of segments of lq queries against lk keys. */
  eval(lq: number, lk: number): number {
    if (this.rows.length === 0) return Number.NaN;
    if (lk < lq) lq = lk;
    let scale = 1;
    const m = this.minLq;
    if (lq < m || lk < m) {
      // Tile floor: the segment costs what its 128-padded version costs.
      const lq2 = Math.max(lq, m);
      const lk2 = Math.max(lk, lq2);
      scale = pointPairs(lq, lk, this.causal) / pointPairs(lq2, lk2, this.causal);
      lq = lq2;
      lk = lk2;
    }
    const x = Math.log2(lq);
    const y = Math.log2(lk / lq);
    const xs = this.xs;
    const n = xs.length;
    let v: number;
    if (n === 1 || x <= xs[0]!) v = this.rowAt(0, y);
    else if (x >= xs[n - 1]!) v = this.rowAt(n - 1, y);
    else {
      let i = 0;
      while (xs[i + 1]! < x) i++;
      const t = (x - xs[i]!) / (xs[i + 1]! - xs[i]!);
      v = this.rowAt(i, y) * (1 - t) + this.rowAt(i + 1, y) * t;
    }
    return v * scale;
  }

  private rowAt(i: number, y: number): number {
    const r = this.rows[i]!;
    return interp1(r.ys, r.vs, y);
  }
}

/** Dense efficiency table of one (direction, causal): equal L x L squares. */
export class DenseLine {
  private readonly xs: Float64Array;
  private readonly vs: Float64Array;
  /** Smallest measured L; below it the dense path is not used. */
  readonly minL: number;

  constructor(points: readonly { l: number; eff: number }[]) {
    const sorted = [...points].sort((a, b) => a.l - b.l);
    this.xs = Float64Array.from(sorted, (p) => Math.log2(p.l));
    this.vs = Float64Array.from(sorted, (p) => p.eff);
    this.minL = sorted[0]?.l ?? Number.POSITIVE_INFINITY;
  }

  /** Efficiency of squares of side L, or NaN when L is below the table. */
  eval(l: number): number {
    if (this.xs.length === 0 || l < this.minL) return Number.NaN;
    return interp1(this.xs, this.vs, Math.log2(l));
  }
}

/**
 * Efficiency (fraction of peak FLOP/s) of attention launches, interpolated from calibration points.
 *
 * A 2-D table over x = log2(lq) and y = log2(lk / lq), one per (path, direction, causal): varlen
 * segments, or dense launches (equal squares and full rectangles). The grid need not be a full
 * product (the H200 grid lacks 8K x 128K): each measured lq is a row, piecewise linear in y and
 * clamped at its ends; between rows, linear in x. Exact at every measured point.
 *
 * Outside the table: longer launches keep the efficiency of the largest measured one (attention
 * efficiency saturates by 8K). A segment shorter than the smallest measured length (128) in queries
 * or keys pays a fraction `floor` of the 128-padded segment's time whatever its size (flash kernels
 * compute whole 128-row query tiles), plus the rest in proportion to its pairs; `floor` = 1 prices
 * a 2 x 2 segment like a 128 x 128 one. A segment with fewer keys than queries is costed at
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
  /** Number of measured points. */
  readonly size: number;

  /**
   * `points`: (lq, lk, efficiency) with lk >= lq; `causal`: bottom-right aligned segments; `floor`:
   * the fraction of a 128-padded segment's time a smaller segment pays regardless of its size.
   */
  constructor(
    points: readonly { lq: number; lk: number; eff: number }[],
    private readonly causal: boolean,
    private readonly floor = 1,
  ) {
    const byLq = new Map<number, { y: number; v: number }[]>();
    for (const p of points) {
      const list = byLq.get(p.lq) ?? [];
      list.push({ y: Math.log2(p.lk / p.lq), v: p.eff });
      byLq.set(p.lq, list);
    }
    const lqs = [...byLq.keys()].sort((a, b) => a - b);
    this.size = points.length;
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
      // Tile floor: a fraction `floor` of the 128-padded segment's time is paid whatever the size,
      // the rest in proportion to the pairs actually attended.
      const lq2 = Math.max(lq, m);
      const lk2 = Math.max(lk, lq2);
      const r = pointPairs(lq, lk, this.causal) / pointPairs(lq2, lk2, this.causal);
      scale = r / (this.floor + (1 - this.floor) * r);
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

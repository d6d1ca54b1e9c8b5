/**
 * Tile geometry: how the attention of a rank's query run is cut into tasks that run as dense
 * batched squares (docs/design.md, FCP's planner; the kernel model in src/cost runs an equal square that
 * is fully visible or on the causal diagonal at about twice the varlen efficiency).
 *
 * Blocks are aligned at position 0 of their sequence (blocks.ts), so every run boundary is a
 * multiple of the sequence's block size b. A run [qa, qb) is cut into query tiles [x, x + t) with t
 * a power-of-two multiple of b (at most `tmax`) that divides x, the largest that fits (a buddy
 * decomposition: runs of several blocks give large tiles). Because t divides x, the visible keys
 * [0, x) of the tile are exactly x / t squares of side t, and the diagonal [x, x + t) is a causal
 * square: no remainder strips, whatever blocks the other ranks hold. Exceptions:
 *
 * - a run that starts at 0 and is at most `wholeMax` long (a whole short sequence, or the first
 *   blocks of a long one) is one causal square: the largest, most efficient kernel;
 * - a tile that cannot divide its start (the short last block of a sequence, or blocks cut at
 *   arbitrary positions) has its visible keys cut into squares of halving sides down to
 *   `minTile`, and what is left stays one rectangle (varlen);
 * - full mask: keys [0, L) in squares of the tile side, the last partial square a strip.
 *
 * The same walk both emits the tiles (tasks.ts) and sums their modelled time (the distributor's
 * weights), through a {@link TileSink}.
 */
import type { KernelTime } from './kernel-time.ts';

/** Tiling parameters. */
export interface TileGeometry {
  /** Largest square side. */
  readonly tmax: number;
  /** Smallest square side in remainder strips (below it a strip stays a rectangle). */
  readonly minTile: number;
  /** A run [0, c) with c <= wholeMax is one square. */
  readonly wholeMax: number;
}

/** Receives the tiles of a query run. Keys of `squares` are [ka + i*side, ka + (i+1)*side), i < count. */
export interface TileSink {
  squares(qa: number, side: number, ka: number, count: number): void;
  /** The square [qa, qa + side) x [qa, qa + side): causal (full mask: fully visible); `whole`: a whole prefix [0, side). */
  diagonal(qa: number, side: number, whole: boolean): void;
  /** Queries [qa, qb) against fully visible keys [ka, kb): a rectangle. */
  rect(qa: number, qb: number, ka: number, kb: number): void;
}

/**
 * Walks the tiles of queries [qa, qb) of a sequence of length `len` with block size `b` (module
 * comment). Tiles partition the attended pairs of the range: causal, keys [0, q] for query q;
 * full, keys [0, len).
 */
export function walkTiles(
  qa: number,
  qb: number,
  len: number,
  b: number,
  causal: boolean,
  g: TileGeometry,
  sink: TileSink,
): void {
  if (qb <= qa) return;
  if (qa === 0 && qb <= g.wholeMax && (causal || qb === len)) {
    sink.diagonal(0, qb, true);
    return;
  }
  const t0 = Math.max(1, Math.min(b, g.tmax));
  let x = qa;
  while (x < qb) {
    const rem = qb - x;
    let t: number;
    const off = x % t0;
    if (off === 0 && rem >= t0) {
      t = t0;
      while (2 * t <= g.tmax && 2 * t <= rem && x % (2 * t) === 0) t *= 2;
    } else t = Math.min(rem, t0 - off);
    if (causal) {
      if (x % t === 0) {
        if (x > 0) sink.squares(x, t, 0, x / t);
      } else stripTiles(x, x + t, 0, x, g, sink);
      sink.diagonal(x, t, false);
    } else {
      const n = Math.floor(len / t);
      if (n > 0) sink.squares(x, t, 0, n);
      if (n * t < len) stripTiles(x, x + t, n * t, len, g, sink);
    }
    x += t;
  }
}

/**
 * Fully visible queries [qa, qb) x keys [ka, kb): squares of the largest power-of-two side (down
 * from the query length, at least `minTile`) that fits both, then the two remainder strips the
 * same way; a piece below `minTile` in either direction stays one rectangle.
 */
export function stripTiles(
  qa: number,
  qb: number,
  ka: number,
  kb: number,
  g: TileGeometry,
  sink: TileSink,
): void {
  const lq = qb - qa;
  const lk = kb - ka;
  if (lq <= 0 || lk <= 0) return;
  let side = 1;
  while (side * 2 <= Math.min(lq, lk, g.tmax)) side *= 2;
  if (side < g.minTile) {
    sink.rect(qa, qb, ka, kb);
    return;
  }
  const nq = Math.floor(lq / side);
  const nk = Math.floor(lk / side);
  for (let i = 0; i < nq; i++) sink.squares(qa + i * side, side, ka, nk);
  const q1 = qa + nq * side;
  const k1 = ka + nk * side;
  if (k1 < kb) stripTiles(qa, q1, k1, kb, g, sink);
  if (q1 < qb) stripTiles(q1, qb, ka, kb, g, sink);
}

/** A {@link TileSink} that sums modelled time (forward plus backward ms). */
export class TileCost implements TileSink {
  total = 0;
  constructor(
    private readonly tm: KernelTime,
    private readonly causal: boolean,
  ) {}
  squares(_qa: number, side: number, _ka: number, count: number): void {
    // As the task builder emits them when all arrive together (grid-tasks.ts).
    if (!this.tm.mergeSquares(side)) {
      this.total += count * this.tm.squareMs(side, false);
      return;
    }
    for (let n = count; n > 0; ) {
      const w = 2 ** Math.floor(Math.log2(n));
      this.total += this.tm.rectMs(side, w * side);
      n -= w;
    }
  }
  diagonal(_qa: number, side: number, whole: boolean): void {
    const c = this.causal;
    this.total += whole ? this.tm.loneSquareMs(side, c) : this.tm.squareMs(side, c);
  }
  rect(qa: number, qb: number, ka: number, kb: number): void {
    this.total += this.tm.rectMs(qb - qa, kb - ka);
  }
}

/** Modelled time of the tiles of queries [qa, qb) (see {@link walkTiles}). */
export function rangeMs(
  qa: number,
  qb: number,
  len: number,
  b: number,
  causal: boolean,
  g: TileGeometry,
  cost: TileCost,
): number {
  cost.total = 0;
  walkTiles(qa, qb, len, b, causal, g, cost);
  return cost.total;
}

/**
 * A {@link TileSink} that sums modelled time per direction (`fwd`, `bwd` ms): the same tiles and
 * the same square merging as {@link TileCost}, whose total is their sum. The loader layout's
 * refinement (placement/token-swap.ts) balances the two phases apart, since a layout balanced for
 * their sum leaves either one unbalanced (the backward runs small pieces and diagonals relatively
 * slower than the forward).
 */
export class PhaseTileCost implements TileSink {
  fwd = 0;
  bwd = 0;
  constructor(
    private readonly tm: KernelTime,
    private readonly causal: boolean,
  ) {}
  private add(lq: number, lk: number, causal: boolean, n: number): void {
    this.fwd += n * this.tm.pieceMs('forward', lq, lk, causal);
    this.bwd += n * this.tm.pieceMs('backward', lq, lk, causal);
  }
  squares(_qa: number, side: number, _ka: number, count: number): void {
    if (!this.tm.mergeSquares(side)) {
      this.add(side, side, false, count);
      return;
    }
    for (let n = count; n > 0; ) {
      const w = 2 ** Math.floor(Math.log2(n));
      this.add(side, w * side, false, 1);
      n -= w;
    }
  }
  diagonal(_qa: number, side: number, whole: boolean): void {
    if (!whole) {
      this.add(side, side, this.causal, 1);
      return;
    }
    this.fwd += this.tm.loneSquarePhaseMs('forward', side, this.causal);
    this.bwd += this.tm.loneSquarePhaseMs('backward', side, this.causal);
  }
  rect(qa: number, qb: number, ka: number, kb: number): void {
    this.add(qb - qa, kb - ka, false, 1);
  }
}

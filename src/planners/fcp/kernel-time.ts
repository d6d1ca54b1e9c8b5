/**
 * Modelled kernel time of the tasks the planner emits, for balancing by time rather than by
 * attended pairs (pairs ignore kernel efficiency: small pieces, causal diagonals and short
 * sequences run far below large dense ones; on `longtail` at 64 ranks a 0.5% pair imbalance was a
 * 14% time imbalance).
 *
 * The costs follow the simulator's kernel model (src/cost/kernel.ts, pieces.ts): a task is cut into
 * pieces as the GPU runtime cuts it, and each piece runs on the dense or the varlen path as the
 * kernel policy decides. A weight is forward plus backward milliseconds (one number balances both
 * phases; their ratio varies little between shapes). The calibration is data: the default tables
 * are loaded once and shared, or the caller passes its own, so the planner stays a pure function of
 * its inputs.
 */

import { doubled } from '../../core/doubled.ts';
import { TripleIds } from '../../core/triple-ids.ts';
import type { Calibration } from '../../cost/calibration.ts';
import { defaultCalibration } from '../../cost/calibration.ts';
import { type Direction, KernelModel } from '../../cost/kernel.ts';
import { decompose } from '../../cost/pieces.ts';
import type { ModelShape } from '../../plan/types.ts';

const PIECE_CACHE_BITS = 14;
const PIECE_CACHE = 1 << PIECE_CACHE_BITS;

/** Kernel time of task shapes, in ms; memoised. */
export class KernelTime {
  private readonly kernel: KernelModel;
  /**
   * Every piece time computed so far, by the piece's id in `shapes` (lq, lk, flags;
   * core/triple-ids.ts). A Map keyed by one number above 2^31 hashed heap numbers: the 65K lookups
   * that miss the direct-mapped cache in a mode (b) plan at 256 ranks (longtail) took 36 ms, 21
   * with a typed table.
   */
  private readonly shapes = new TripleIds(1 << 11);
  private shapeMs = new Float64Array(1 << 11);
  /** Per-launch overhead, forward plus backward. */
  readonly launchMs: number;
  private dir: Direction = 'forward';
  private acc = 0;
  private readonly sink = (lq: number, lk: number, causal: boolean): void => {
    this.acc += this.pieceMs(this.dir, lq, lk, causal);
  };

  constructor(model: ModelShape, calibration: Calibration = defaultCalibration()) {
    this.kernel = new KernelModel(model, { calibration });
    this.launchMs = this.kernel.launchMs('forward') + this.kernel.launchMs('backward');
  }

  /**
   * Direct-mapped cache in front of {@link pieces}: the Map's keys exceed 2^31 (heap numbers, slow
   * to hash) and pieceMs runs once per task piece (over a million at 4096 ranks). Entries hold
   * lq, lk and the flags (bit 0 causal, bit 1 backward; -1 empty).
   */
  private readonly hitLq = new Int32Array(PIECE_CACHE);
  private readonly hitLk = new Int32Array(PIECE_CACHE);
  private readonly hitFlags = new Int8Array(PIECE_CACHE).fill(-1);
  private readonly hitMs = new Float64Array(PIECE_CACHE);

  /** One piece (lq queries, lk keys, causal bottom-right or full) in one direction, no launch. */
  pieceMs(dir: Direction, lq: number, lk: number, causal: boolean): number {
    if (lq <= 0 || lk <= 0) return 0;
    const flags = (causal ? 1 : 0) | (dir === 'forward' ? 0 : 2);
    // The flags are mixed in before the shift keeps the top bits: xored in as they are (bits 0-1),
    // a shape's forward and backward shared one slot and evicted each other on every alternation
    // (weights and phase costs ask for both in turn: 16 of 17 lookups missed).
    const h =
      (Math.imul(lq, 0x9e3779b1) ^ Math.imul(lk, 0x85ebca77) ^ Math.imul(flags + 1, 0xc2b2ae35)) >>>
      (32 - PIECE_CACHE_BITS);
    if (this.hitFlags[h] === flags && this.hitLq[h] === lq && this.hitLk[h] === lk) return this.hitMs[h]!;
    const v = this.pieceMsSlow(dir, lq, lk, causal, flags);
    this.hitLq[h] = lq;
    this.hitLk[h] = lk;
    this.hitFlags[h] = flags;
    this.hitMs[h] = v;
    return v;
  }

  private pieceMsSlow(dir: Direction, lq: number, lk: number, causal: boolean, flags: number): number {
    const known = this.shapes.get(lq, lk, flags);
    if (known >= 0) return this.shapeMs[known]!;
    const k = this.kernel;
    let v = k.isDense(lq, lk, causal) ? k.denseMs(dir, lq, lk, causal) : k.varlenMs(dir, lq, lk, causal);
    if (!Number.isFinite(v)) v = k.varlenMs(dir, lq, lk, causal);
    // At most 2^20 shapes kept (then forgotten, as the Map before it).
    if (this.shapes.size >= 1 << 20) this.shapes.clear();
    const id = this.shapes.intern(lq, lk, flags);
    if (id >= this.shapeMs.length) this.shapeMs = doubled(this.shapeMs);
    this.shapeMs[id] = v;
    return v;
  }

  /** Time of one task in one direction (ms, no launch): the sum of its pieces. */
  taskMs(dir: Direction, causal: boolean, qs: number, ql: number, ks: number, kl: number): number {
    this.dir = dir;
    this.acc = 0;
    decompose(causal, this.kernel.pieceMode, qs, ql, ks, kl, this.sink);
    return this.acc;
  }

  /** One l x l square, fully visible or (`causal`) on the diagonal, forward plus backward. */
  squareMs(l: number, causal: boolean): number {
    return this.pieceMs('forward', l, l, causal) + this.pieceMs('backward', l, l, causal);
  }

  /**
   * {@link loneSquareMs} in one direction: the square and, on the dense path, its own launch (the
   * loader layout's refinement weighs the forward and the backward apart, token-swap.ts).
   */
  loneSquarePhaseMs(dir: Direction, l: number, causal: boolean): number {
    const k = this.kernel;
    return this.pieceMs(dir, l, l, causal) + (k.isDense(l, l, causal) ? k.launchMs(dir) : 0);
  }

  /** A square of a side no other task shares (a whole short sequence): it pays its own launch on the dense path. */
  loneSquareMs(l: number, causal: boolean): number {
    return this.squareMs(l, causal) + (this.kernel.isDense(l, l, causal) ? this.launchMs : 0);
  }

  private readonly rectsWin = new Map<number, boolean>();

  /**
   * Whether consecutive visible l x l squares of one query tile run faster as one rectangle than
   * as separate squares (true for small sides, where the longer key loop amortises the tile; false
   * for 4K squares, which the calibration runs fastest in the backward).
   */
  mergeSquares(l: number): boolean {
    let v = this.rectsWin.get(l);
    if (v === undefined) {
      v = this.rectMs(l, 2 * l) < 2 * this.squareMs(l, false);
      this.rectsWin.set(l, v);
    }
    return v;
  }

  /** A fully visible lq x lk rectangle, forward plus backward. */
  rectMs(lq: number, lk: number): number {
    return this.pieceMs('forward', lq, lk, false) + this.pieceMs('backward', lq, lk, false);
  }
}

/**
 * Modelled kernel time of the tiles the planner emits, for balancing by time rather than by
 * attended pairs (pairs ignore kernel efficiency: small squares, causal diagonals and short
 * sequences run far below the large dense squares; on `longtail` at 64 ranks a 0.5% pair
 * imbalance was a 14% time imbalance).
 *
 * The costs follow the simulator's kernel model (src/cost/kernel.ts, op-cost.ts): an equal square
 * that is fully visible or on the causal diagonal runs on the dense batched path where that is
 * cheaper, anything else on the varlen path. A tile's weight is its forward plus backward
 * milliseconds (one number balances both phases; their ratio varies little between shapes). The
 * calibration is data: the default H200 tables are loaded once and shared, or the caller passes
 * its own, so the planner stays a pure function of its inputs.
 */
import type { Calibration } from '../../cost/calibration.ts';
import { defaultCalibration } from '../../cost/calibration.ts';
import { KernelModel } from '../../cost/kernel.ts';
import type { ModelShape } from '../../plan/types.ts';

/** Kernel time of tile shapes, forward plus backward, in ms; memoised. */
export class TimeModel {
  private readonly kernel: KernelModel;
  private readonly squares = new Map<number, number>();
  private readonly rects = new Map<number, number>();
  /** Per-launch overhead, forward plus backward. */
  readonly launchMs: number;

  constructor(model: ModelShape, calibration: Calibration = defaultCalibration()) {
    this.kernel = new KernelModel(model, { calibration });
    this.launchMs = this.kernel.launchMs('forward') + this.kernel.launchMs('backward');
  }

  /**
   * One l x l square, fully visible (`causal` false) or on the causal diagonal: the cheaper of the
   * dense path (its launch shared with other squares of the side) and the varlen path.
   */
  squareMs(l: number, causal: boolean): number {
    const key = 2 * l + (causal ? 1 : 0);
    let v = this.squares.get(key);
    if (v === undefined) {
      const k = this.kernel;
      const pairs = causal ? (l * (l + 1)) / 2 : l * l;
      let dense = 0;
      let varlen = 0;
      for (const dir of ['forward', 'backward'] as const) {
        const d = k.denseMs(dir, l, causal, 1);
        dense += Number.isFinite(d) ? d : Number.POSITIVE_INFINITY;
        varlen += k.varlenMs(dir, l, l, causal, pairs);
      }
      v = Math.min(dense, varlen);
      this.squares.set(key, v);
    }
    return v;
  }

  /**
   * A square of a side that no other tile shares (a whole short sequence): the dense path pays
   * its own launch, so it wins only when that is still cheaper than joining the varlen launch.
   */
  loneSquareMs(l: number, causal: boolean): number {
    const dense = this.squareMs(l, causal);
    const k = this.kernel;
    const pairs = causal ? (l * (l + 1)) / 2 : l * l;
    const varlen = k.varlenMs('forward', l, l, causal, pairs) + k.varlenMs('backward', l, l, causal, pairs);
    return Math.min(dense + this.launchMs, varlen);
  }

  /** A fully visible lq x lk rectangle on the varlen path. */
  rectMs(lq: number, lk: number): number {
    if (lq <= 0 || lk <= 0) return 0;
    const key = lq * 4194304 + lk;
    let v = this.rects.get(key);
    if (v === undefined) {
      const k = this.kernel;
      v = k.varlenMs('forward', lq, lk, false, lq * lk) + k.varlenMs('backward', lq, lk, false, lq * lk);
      if (this.rects.size > 1 << 18) this.rects.clear();
      this.rects.set(key, v);
    }
    return v;
  }

  /** Forward plus backward time of `pairs` attended pairs at the best dense efficiency (a lower bound per pair). */
  pairMs(pairs: number): number {
    return (pairs * this.squareMs(4096, false)) / (4096 * 4096);
  }
}

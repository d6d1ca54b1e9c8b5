/**
 * Kernel model: time of attention launches on one GPU, from a {@link Calibration}, following the
 * GPU runtime's kernel policy (python/fcp_torch/kernels.py):
 *
 * - tasks are cut into pieces (pieces.ts), never merged across tasks;
 * - `auto` (the runtime's default): pieces with both sides >= 512 tokens that are full rectangles
 *   or causal squares run as dense cuDNN batches, one batch per identical shape, batch sizes split
 *   into powers of two (one launch each); the rest run as varlen flash, one launch per mask kind;
 * - `varlen` (the runtime's `flash`): every piece on varlen flash;
 * - `cudnn`: every piece dense (causal pieces are squares).
 *
 * A piece takes FLOPs / (peak x efficiency(lq, lk, causal)), efficiency interpolated from the
 * calibration's varlen grid or dense rows (efficiency.ts). A launch adds a fixed overhead derived
 * from the calibration's launch-floor probe (a single 64 x 64 segment) so that the model reproduces
 * every measured point. Compute runs on the SMs not reserved for communication: piece times scale
 * by totalSms / (totalSms - commSms).
 */
import type { ModelShape } from '../plan/types.ts';
import type { Calibration, KernelPoint } from './calibration.ts';
import { defaultCalibration } from './calibration.ts';
import { pointPairs, VarlenGrid } from './efficiency.ts';
import type { PieceMode } from './pieces.ts';

/** Attention direction. */
export type Direction = 'forward' | 'backward';

/** The runtime's kernel policies (`varlen` is its `flash`). */
export type KernelPolicy = 'auto' | 'varlen' | 'cudnn';

/** The kernel policies, for option parsing (`flash` is accepted as `varlen`). */
export const KERNEL_POLICIES: readonly KernelPolicy[] = ['auto', 'varlen', 'cudnn'];

/** Kernel model parameters; defaults in {@link KernelModel}'s constructor. */
export interface KernelOptions {
  calibration?: Calibration;
  policy?: KernelPolicy;
  /** Peak TFLOP/s of the simulated GPU (default: the calibration's). */
  peakTflops?: number;
  /** Factor on compute time (SMs reserved for communication); default 1. */
  slowdown?: number;
  /** Per-launch overhead, ms; default derived from the calibration's launch floor. */
  launchMs?: { forward: number; backward: number };
  /** `auto`: smallest piece side that runs dense (the runtime's FCP_AUTO_MIN_LEN, default 512). */
  denseMinLen?: number;
  /** Fraction of a 128-padded tile's time a smaller piece pays whatever its size (default {@link DEFAULT_TILE_FLOOR}). */
  tileFloor?: number;
  /** Cost of one empty tile of a varlen launch's grid, per query head, in ms (default {@link DEFAULT_EMPTY_TILE_MS}). */
  emptyTileMs?: number;
}

/** Default tile floor (see efficiency.ts), fitted to the runtime's ring replay at 64 ranks. */
export const DEFAULT_TILE_FLOOR = 0.6;

/** Default cost of an empty varlen grid tile per head, ms, fitted with the tile floor. */
export const DEFAULT_EMPTY_TILE_MS = 1e-6;

/** Fallback launch overhead when a calibration has no launch-floor probe (H200: ~0.03 / 0.06 ms). */
export const FALLBACK_LAUNCH_MS = { forward: 0.03, backward: 0.06 } as const;

/** The runtime's default `auto` threshold. */
export const DEFAULT_DENSE_MIN_LEN = 512;

/** The calibration's attention shape: its FLOP convention is 4 * pairs * 64 * 128. */
const CAL_FLOPS_PER_PAIR = 4 * 64 * 128;

interface DirTables {
  varlen: [VarlenGrid, VarlenGrid]; // [full, causal]
  dense: [VarlenGrid, VarlenGrid];
  launchMs: number;
}

/** Per-launch times of attention pieces for one GPU. */
export class KernelModel {
  readonly policy: KernelPolicy;
  readonly peakTflops: number;
  readonly slowdown: number;
  readonly calibration: Calibration;
  readonly denseMinLen: number;
  /** How tasks are cut: squares where pieces may run dense, bottom-right otherwise. */
  readonly pieceMode: PieceMode;
  /** Whether the calibration has dense rows of each mask ([full, causal]). */
  readonly hasDense: [boolean, boolean];
  private readonly fwd: DirTables;
  private readonly bwd: DirTables;
  private readonly flopsPerPair: { forward: number; backward: number };
  private readonly cache = new Map<number, number>();
  private readonly emptyTile: number;
  private readonly heads: number;

  constructor(model: ModelShape, o: KernelOptions = {}) {
    this.emptyTile = o.emptyTileMs ?? DEFAULT_EMPTY_TILE_MS;
    this.heads = model.qHeads;
    this.calibration = o.calibration ?? defaultCalibration();
    this.policy = o.policy ?? 'auto';
    this.peakTflops = o.peakTflops ?? this.calibration.peakTflops;
    this.slowdown = o.slowdown ?? 1;
    this.denseMinLen = o.denseMinLen ?? DEFAULT_DENSE_MIN_LEN;
    const calPeak = this.calibration.peakTflops;
    const floor = o.tileFloor ?? DEFAULT_TILE_FLOOR;
    this.fwd = buildTables(this.calibration, 'forward', calPeak, o.launchMs?.forward, floor);
    this.bwd = buildTables(this.calibration, 'backward', calPeak, o.launchMs?.backward, floor);
    this.hasDense = [
      this.fwd.dense[0].size > 0 && this.bwd.dense[0].size > 0,
      this.fwd.dense[1].size > 0 && this.bwd.dense[1].size > 0,
    ];
    this.pieceMode = this.policy !== 'varlen' && this.hasDense[1] ? 'square' : 'br';
    const f = 4 * model.qHeads * model.headDim;
    this.flopsPerPair = { forward: f, backward: 2.5 * f };
  }

  /** FLOPs of `pairs` attended pairs in direction `dir`. */
  flops(dir: Direction, pairs: number): number {
    return pairs * this.flopsPerPair[dir];
  }

  /** Per-launch overhead, ms. */
  launchMs(dir: Direction): number {
    return (dir === 'forward' ? this.fwd : this.bwd).launchMs;
  }

  /** Whether a piece runs on the dense path under the policy. */
  isDense(lq: number, lk: number, causal: boolean): boolean {
    if (this.policy === 'varlen' || !this.hasDense[causal ? 1 : 0]) return false;
    if (causal && lq !== lk) return false; // cuDNN's causal is top-left: squares only
    return this.policy === 'cudnn' || (lq >= this.denseMinLen && lk >= this.denseMinLen);
  }

  /** Varlen efficiency of lq x lk pieces (no slowdown). */
  varlenEfficiency(dir: Direction, lq: number, lk: number, causal: boolean): number {
    return this.efficiency(dir, lq, lk, causal, 0);
  }

  /** Dense efficiency of lq x lk pieces (no slowdown); NaN without dense rows for the mask. */
  denseEfficiency(dir: Direction, lq: number, lk: number, causal: boolean): number {
    if (!this.hasDense[causal ? 1 : 0]) return Number.NaN;
    return this.efficiency(dir, lq, lk, causal, 1);
  }

  private efficiency(dir: Direction, lq: number, lk: number, causal: boolean, dense: 0 | 1): number {
    const key = (((lq * 1048576 + lk) * 2 + (causal ? 1 : 0)) * 2 + (dir === 'forward' ? 0 : 1)) * 2 + dense;
    let e = this.cache.get(key);
    if (e === undefined) {
      const t = dir === 'forward' ? this.fwd : this.bwd;
      e = (dense ? t.dense : t.varlen)[causal ? 1 : 0].eval(lq, lk);
      if (this.cache.size > 1 << 20) this.cache.clear();
      this.cache.set(key, e);
    }
    return e;
  }

  /** Compute time (ms, slowdown included, no launch) of `n` pieces of one shape on the varlen path. */
  varlenMs(dir: Direction, lq: number, lk: number, causal: boolean, n = 1): number {
    const pairs = pointPairs(lq, lk, causal);
    if (pairs <= 0) return 0;
    return (
      ((n * this.flops(dir, pairs)) / (this.peakTflops * 1e9 * this.varlenEfficiency(dir, lq, lk, causal))) *
      this.slowdown
    );
  }

  /** Compute time (ms, no launch) of `n` pieces of one shape on the dense path (NaN without dense rows). */
  denseMs(dir: Direction, lq: number, lk: number, causal: boolean, n = 1): number {
    const pairs = pointPairs(lq, lk, causal);
    if (pairs <= 0) return 0;
    return (
      ((n * this.flops(dir, pairs)) / (this.peakTflops * 1e9 * this.denseEfficiency(dir, lq, lk, causal))) *
      this.slowdown
    );
  }

  /**
   * Extra time of a varlen launch from its grid: flash varlen sizes its grid by the longest
   * segment (forward: query tiles of max lq per segment and head; backward: key tiles of max lk),
   * so a launch mixing one long segment with many short ones runs mostly empty tiles. `qTiles`,
   * `kTiles`: the tiles the segments actually fill.
   */
  emptyTilesMs(
    dir: Direction,
    segments: number,
    qTiles: number,
    kTiles: number,
    maxLq: number,
    maxLk: number,
  ): number {
    if (this.emptyTile === 0) return 0;
    const empty =
      dir === 'forward'
        ? Math.ceil(maxLq / 128) * segments - qTiles
        : Math.ceil(maxLk / 128) * segments - kTiles;
    return Math.max(0, empty) * this.heads * this.emptyTile * this.slowdown;
  }

  /** Modelled time (ms) of one calibration launch, for checking the model against its own table. */
  pointMs(dir: Direction, path: 'varlen' | 'dense', p: KernelPoint): number {
    const compute =
      path === 'dense'
        ? this.denseMs(dir, p.lq, p.lk, p.causal, p.count)
        : this.varlenMs(dir, p.lq, p.lk, p.causal, p.count);
    return compute + this.launchMs(dir);
  }
}

function buildTables(
  cal: Calibration,
  dir: Direction,
  calPeak: number,
  launchOverride: number | undefined,
  tileFloor: number,
): DirTables {
  const msOf = (p: KernelPoint): number | undefined => (dir === 'forward' ? p.fwdMs : p.bwdMs);
  const flopsPerPair = CAL_FLOPS_PER_PAIR * (dir === 'forward' ? 1 : 2.5);
  const effOf = (p: KernelPoint, ms: number, launch: number): number =>
    (p.count * pointPairs(p.lq, p.lk, p.causal) * flopsPerPair) /
    (calPeak * 1e9 * Math.max(ms - launch, 1e-6));
  const grids = (list: readonly KernelPoint[], launch: number): [VarlenGrid, VarlenGrid] => {
    const pts: [{ lq: number; lk: number; eff: number }[], { lq: number; lk: number; eff: number }[]] = [
      [],
      [],
    ];
    for (const p of list) {
      const ms = msOf(p);
      if (ms !== undefined)
        pts[p.causal ? 1 : 0].push({ lq: p.lq, lk: Math.max(p.lk, p.lq), eff: effOf(p, ms, launch) });
    }
    return [new VarlenGrid(pts[0], false, tileFloor), new VarlenGrid(pts[1], true, tileFloor)];
  };
  const build = (launch: number): DirTables => ({
    varlen: grids(cal.varlen, launch),
    dense: grids(cal.dense, launch),
    launchMs: launch,
  });
  if (launchOverride !== undefined) return build(launchOverride);
  const floor = cal.floor;
  const floorMs = floor ? msOf(floor) : undefined;
  if (!floor || floorMs === undefined) return build(FALLBACK_LAUNCH_MS[dir]);
  // Fixed point: the floor probe = its (tiny) compute + the launch overhead.
  let launch = floorMs;
  let t = build(launch);
  for (let i = 0; i < 50; i++) {
    const pairs = pointPairs(floor.lq, floor.lk, floor.causal);
    const eff = t.varlen[floor.causal ? 1 : 0].eval(floor.lq, floor.lk);
    const compute = (floor.count * pairs * flopsPerPair) / (calPeak * 1e9 * eff);
    const next = Math.max(0, floorMs - compute);
    const done = Math.abs(next - launch) < 1e-12;
    launch = next;
    t = build(launch);
    if (done) break;
  }
  return t;
}

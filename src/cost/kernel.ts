/**
 * Kernel model: time of attention launches on one GPU, from a {@link Calibration}.
 *
 * A segment (lq queries against lk contiguous keys, causal bottom-right aligned or full) takes
 * FLOPs / (peak x efficiency(lq, lk, causal)); efficiency is interpolated from the calibration
 * (see efficiency.ts). A launch adds a fixed overhead, derived from the calibration's launch-floor
 * probe (a single 64 x 64 segment) so that the model reproduces every measured point. Compute runs
 * on the SMs not reserved for communication: times scale by totalSms / (totalSms - commSms).
 *
 * Two kernel paths, as the GPU runtime uses them: varlen flash for arbitrary segments (the default
 * for everything), and dense batched SDPA for equal square blocks (a causal diagonal block or a full
 * off-diagonal block) when it is cheaper including its own launch (`policy: 'auto'`).
 */
import type { ModelShape } from '../plan/types.ts';
import type { Calibration, KernelPoint } from './calibration.ts';
import { defaultCalibration } from './calibration.ts';
import { DenseLine, pointPairs, VarlenGrid } from './efficiency.ts';

/** Attention direction. */
export type Direction = 'forward' | 'backward';

/**
 * `auto`: dense batched launches for equal square blocks where cheaper, varlen otherwise (what the
 * GPU runtime does). `varlen`: varlen only. `dense`: a what-if beyond the measurements: every
 * segment of at least the smallest dense side (512) in queries and keys runs at the dense (cuDNN)
 * efficiency of its shorter side (full part at the full, diagonal at the causal efficiency), as an
 * FA3-class varlen kernel might; smaller segments stay on the varlen grid.
 */
export type KernelPolicy = 'auto' | 'varlen' | 'dense';

/** The kernel policies, for option parsing. */
export const KERNEL_POLICIES: readonly KernelPolicy[] = ['auto', 'varlen', 'dense'];

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
}

/** Fallback launch overhead when a calibration has no launch-floor probe (H200: 0.029 / 0.059 ms). */
export const FALLBACK_LAUNCH_MS = { forward: 0.03, backward: 0.06 } as const;

/** The calibration's attention shape: its FLOP convention is 4 * pairs * 64 * 128. */
const CAL_FLOPS_PER_PAIR = 4 * 64 * 128;

interface DirTables {
  varlen: [VarlenGrid, VarlenGrid]; // [full, causal]
  dense: [DenseLine, DenseLine];
  launchMs: number;
}

/** Shape of one segment after the mask: what the kernel actually iterates. */
export interface SegmentShape {
  lq: number;
  lk: number;
  causal: boolean;
  pairs: number;
}

/**
 * Normalises queries [qs, qs+ql) against keys [ks, ks+kl) of one sequence into a kernel segment.
 * Full mask, or every key at or before the first query: a full lq x lk rectangle. Otherwise causal:
 * queries before the first key attend nothing and keys after the last query are never attended, so
 * the segment is trimmed to queries [max(qs, ks), qe) and keys [ks, min(ke, qe)).
 */
export function segmentShape(
  causal: boolean,
  qs: number,
  ql: number,
  ks: number,
  kl: number,
  out: SegmentShape,
): SegmentShape {
  const qe = qs + ql;
  const ke = ks + kl;
  if (!causal || ke - 1 <= qs) {
    out.lq = ql;
    out.lk = kl;
    out.causal = false;
    out.pairs = ql * kl;
    return out;
  }
  const q0 = Math.max(qs, ks);
  const k1 = Math.min(ke, qe);
  if (q0 >= qe || k1 <= ks) {
    out.lq = 0;
    out.lk = 0;
    out.causal = true;
    out.pairs = 0;
    return out;
  }
  out.lq = qe - q0;
  out.lk = k1 - ks;
  out.causal = true;
  // Queries q in [q0, qe) attend keys [ks, min(q + 1, k1)).
  const lq = out.lq;
  const lk = out.lk;
  const firstCount = q0 - ks + 1; // keys attended by the first query
  if (firstCount >= lk) out.pairs = lq * lk;
  else {
    const ramp = Math.min(lq, lk - firstCount + 1); // queries still below the full key count
    out.pairs = (ramp * (firstCount + firstCount + ramp - 1)) / 2 + (lq - ramp) * lk;
  }
  return out;
}

/** Per-launch times of attention segments for one GPU. */
export class KernelModel {
  readonly policy: KernelPolicy;
  readonly peakTflops: number;
  readonly slowdown: number;
  readonly calibration: Calibration;
  private readonly fwd: DirTables;
  private readonly bwd: DirTables;
  private readonly flopsPerPair: { forward: number; backward: number };
  private readonly cache = new Map<number, number>();

  constructor(model: ModelShape, o: KernelOptions = {}) {
    this.calibration = o.calibration ?? defaultCalibration();
    this.policy = o.policy ?? 'auto';
    this.peakTflops = o.peakTflops ?? this.calibration.peakTflops;
    this.slowdown = o.slowdown ?? 1;
    const calPeak = this.calibration.peakTflops;
    this.fwd = buildTables(this.calibration, 'forward', calPeak, o.launchMs?.forward);
    this.bwd = buildTables(this.calibration, 'backward', calPeak, o.launchMs?.backward);
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

  /** Varlen-path efficiency of lq x lk segments (no slowdown; policy `dense` lifts it). */
  varlenEfficiency(dir: Direction, lq: number, lk: number, causal: boolean): number {
    const key = ((lq * 1048576 + lk) * 2 + (causal ? 1 : 0)) * 2 + (dir === 'forward' ? 0 : 1);
    let e = this.cache.get(key);
    if (e === undefined) {
      const t = dir === 'forward' ? this.fwd : this.bwd;
      e = t.varlen[causal ? 1 : 0].eval(lq, lk);
      if (this.policy === 'dense') {
        // Full part at the dense full efficiency, diagonal part at the dense causal one.
        const side = Math.min(lq, lk);
        const eF = t.dense[0].eval(side);
        let d = eF;
        if (causal && lk >= lq) {
          const pf = lq * (lk - lq);
          const pd = (lq * (lq + 1)) / 2;
          d = (pf + pd) / (pf / eF + pd / t.dense[1].eval(side));
        } else if (causal) d = t.dense[1].eval(side);
        if (d > e) e = d;
      }
      if (this.cache.size > 1 << 20) this.cache.clear();
      this.cache.set(key, e);
    }
    return e;
  }

  /** Dense efficiency of L x L squares, NaN when the dense path is unavailable for L. */
  denseEfficiency(dir: Direction, l: number, causal: boolean): number {
    const t = dir === 'forward' ? this.fwd : this.bwd;
    return t.dense[causal ? 1 : 0].eval(l);
  }

  /** Compute time (ms, slowdown included, no launch overhead) of a varlen segment. */
  varlenMs(dir: Direction, lq: number, lk: number, causal: boolean, pairs: number): number {
    if (pairs <= 0) return 0;
    const eff = this.varlenEfficiency(dir, lq, lk, causal);
    return (this.flops(dir, pairs) / (this.peakTflops * 1e9 * eff)) * this.slowdown;
  }

  /** Compute time (ms, no launch) of `n` dense L x L squares, or NaN if the dense path does not apply. */
  denseMs(dir: Direction, l: number, causal: boolean, n: number): number {
    if (this.policy === 'varlen') return Number.NaN;
    const eff = this.denseEfficiency(dir, l, causal);
    if (!(eff > 0)) return Number.NaN;
    const pairs = causal ? (l * (l + 1)) / 2 : l * l;
    return ((n * this.flops(dir, pairs)) / (this.peakTflops * 1e9 * eff)) * this.slowdown;
  }

  /** Modelled time (ms) of one calibration launch, for checking the model against its own table. */
  pointMs(dir: Direction, path: 'varlen' | 'dense', p: KernelPoint): number {
    const pairs = pointPairs(p.lq, p.lk, p.causal);
    const compute =
      path === 'dense'
        ? this.denseMs(dir, p.lq, p.causal, p.count)
        : p.count * this.varlenMs(dir, p.lq, p.lk, p.causal, pairs);
    return compute + this.launchMs(dir);
  }
}

function buildTables(
  cal: Calibration,
  dir: Direction,
  calPeak: number,
  launchOverride: number | undefined,
): DirTables {
  const msOf = (p: KernelPoint): number | undefined => (dir === 'forward' ? p.fwdMs : p.bwdMs);
  const flopsPerPair = CAL_FLOPS_PER_PAIR * (dir === 'forward' ? 1 : 2.5);
  const effOf = (p: KernelPoint, ms: number, launch: number): number =>
    (p.count * pointPairs(p.lq, p.lk, p.causal) * flopsPerPair) /
    (calPeak * 1e9 * Math.max(ms - launch, 1e-6));
  const build = (launch: number): DirTables => {
    const pts: [{ lq: number; lk: number; eff: number }[], { lq: number; lk: number; eff: number }[]] = [
      [],
      [],
    ];
    for (const p of cal.varlen) {
      const ms = msOf(p);
      if (ms !== undefined)
        pts[p.causal ? 1 : 0].push({ lq: p.lq, lk: Math.max(p.lk, p.lq), eff: effOf(p, ms, launch) });
    }
    const dpts: [{ l: number; eff: number }[], { l: number; eff: number }[]] = [[], []];
    for (const p of cal.dense) {
      const ms = msOf(p);
      if (ms !== undefined) dpts[p.causal ? 1 : 0].push({ l: p.lq, eff: effOf(p, ms, launch) });
    }
    return {
      varlen: [new VarlenGrid(pts[0], false), new VarlenGrid(pts[1], true)],
      dense: [new DenseLine(dpts[0]), new DenseLine(dpts[1])],
      launchMs: launch,
    };
  };
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

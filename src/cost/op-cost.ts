/**
 * Time of one compute op (the launches of one rank for one op), as the GPU runtime runs it
 * (python/fcp_torch/kernels.py, `plan_launches`): every task is cut into pieces (pieces.ts, never
 * merged across tasks); pieces the policy sends to the dense path are batched per identical shape
 * (lq, lk, causal), each batch split into powers of two, one launch each; the other pieces run as
 * varlen flash, one launch per mask kind (full, causal), whose grid is sized by the longest
 * segment (see {@link KernelModel.emptyTilesMs}). Chunk-row work arrives as pieces with
 * multiplicities or as pre-summed varlen work with its segment statistics (chunks.ts).
 */
import type { Direction, KernelModel } from './kernel.ts';
import { decompose } from './pieces.ts';

/** Reusable accumulator: `reset`, add tasks or pieces, `finish` for the op's milliseconds. */
export class OpCost {
  private readonly causal: boolean;
  private dir: Direction = 'forward';
  private varlenMs = 0;
  /** Varlen launch statistics per mask kind [full, causal] (the kernel grid: kernel.ts). */
  private readonly vl = [newLaunchStats(), newLaunchStats()];
  /** Dense batches: key (lq, lk, causal) -> count. */
  private readonly dense = new Map<number, number>();
  private readonly sink: (lq: number, lk: number, causal: boolean) => void;

  constructor(
    private readonly kernel: KernelModel,
    mask: 'causal' | 'full',
  ) {
    this.causal = mask === 'causal';
    this.sink = (lq, lk, c) => this.addPiece(lq, lk, c, 1);
  }

  /** Starts a new op. */
  reset(dir: Direction): void {
    this.dir = dir;
    this.varlenMs = 0;
    resetLaunchStats(this.vl[0]!);
    resetLaunchStats(this.vl[1]!);
    this.dense.clear();
  }

  /** Adds a task (queries [qs, qs+ql) against keys [ks, ks+kl) of one sequence). */
  addTask(qs: number, ql: number, ks: number, kl: number): void {
    decompose(this.causal, this.kernel.pieceMode, qs, ql, ks, kl, this.sink);
  }

  /** Adds `count` pieces of one shape. */
  addPiece(lq: number, lk: number, causal: boolean, count: number): void {
    if (count <= 0 || lq <= 0 || lk <= 0) return;
    const k = this.kernel;
    if (k.isDense(lq, lk, causal)) {
      const key = (lq * 1048576 + lk) * 2 + (causal ? 1 : 0);
      this.dense.set(key, (this.dense.get(key) ?? 0) + count);
      return;
    }
    this.varlenMs += k.varlenMs(this.dir, lq, lk, causal, count);
    this.addSegments(causal, count, count * tiles(lq), count * tiles(lk), lq, lk);
  }

  /** Adds varlen work already costed (ms, no launch) of one mask kind, with its segment statistics. */
  addVarlen(
    ms: number,
    causal: boolean,
    segments: number,
    qTiles: number,
    kTiles: number,
    maxLq: number,
    maxLk: number,
  ): void {
    if (segments <= 0) return;
    this.varlenMs += ms;
    this.addSegments(causal, segments, qTiles, kTiles, maxLq, maxLk);
  }

  private addSegments(
    causal: boolean,
    segments: number,
    qTiles: number,
    kTiles: number,
    maxLq: number,
    maxLk: number,
  ): void {
    const v = this.vl[causal ? 1 : 0]!;
    v.segments += segments;
    v.qTiles += qTiles;
    v.kTiles += kTiles;
    if (maxLq > v.maxLq) v.maxLq = maxLq;
    if (maxLk > v.maxLk) v.maxLk = maxLk;
  }

  /** The op's time in ms (launch overheads included). */
  finish(): number {
    const k = this.kernel;
    const dir = this.dir;
    const launch = k.launchMs(dir);
    let total = this.varlenMs;
    for (const v of this.vl)
      if (v.segments > 0)
        total += launch + k.emptyTilesMs(dir, v.segments, v.qTiles, v.kTiles, v.maxLq, v.maxLk);
    for (const [key, count] of this.dense) {
      const causal = key % 2 === 1;
      const rest = (key - (causal ? 1 : 0)) / 2;
      const lk = rest % 1048576;
      const lq = (rest - lk) / 1048576;
      total += k.denseMs(dir, lq, lk, causal, count) + batchLaunches(count) * launch;
    }
    return total;
  }
}

/** Query or key tiles of a varlen segment (128 rows each). */
export const tiles = (l: number): number => Math.ceil(l / 128);

interface LaunchStats {
  segments: number;
  qTiles: number;
  kTiles: number;
  maxLq: number;
  maxLk: number;
}

function newLaunchStats(): LaunchStats {
  return { segments: 0, qTiles: 0, kTiles: 0, maxLq: 0, maxLk: 0 };
}

function resetLaunchStats(v: LaunchStats): void {
  v.segments = 0;
  v.qTiles = 0;
  v.kTiles = 0;
  v.maxLq = 0;
  v.maxLk = 0;
}

/**
 * Launches of a batch of `n` identical dense pieces, split into powers of two (one launch each):
 * the number of set bits of `n`. The planner cuts ops with the same rule (fcp/launch-carry.ts).
 */
export function batchLaunches(n: number): number {
  let c = 0;
  for (let x = n; x > 0; x = Math.floor(x / 2)) c += x % 2;
  return c;
}

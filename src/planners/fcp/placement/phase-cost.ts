/**
 * Per-rank forward and backward modelled kernel time of a layout whose runs are the home runs
 * (mode (b), the loader layout: the user layout is the home layout). A rank's load in a phase is
 * the tiles of its runs (grid.ts, walkTiles, as grid-tasks.ts cuts them) costed in that phase
 * ({@link PhaseTileCost}); against the simulator's per-rank compute (longtail, seed 1, 16 ranks)
 * this is 0.929-0.936 of it on every rank in both phases, so it orders ranks as the simulator does.
 */
import type { Layout, Mask } from '../../../plan/types.ts';
import { PhaseTileCost, type TileGeometry, walkTiles } from '../grid.ts';
import type { KernelTime } from '../kernel-time.ts';

/** Per-rank modelled kernel time of each phase (ms). */
export interface PhaseLoads {
  readonly fwd: Float64Array;
  readonly bwd: Float64Array;
}

/** What the layout's cost reads: the batch, the tile grid and the kernel model. */
export interface SwapModel {
  readonly sequences: Int32Array;
  readonly mask: Mask;
  /** Block size of each sequence (the tile grid). */
  readonly blockSize: Int32Array;
  readonly grid: TileGeometry;
  readonly kernel: KernelTime;
}

/**
 * Adds the forward and backward time of the runs [a[i], e[i]) (sorted, disjoint) of sequence `s` on
 * one rank to `cost`; adjacent intervals are one run, as homeRuns merges them.
 */
export function addRuns(
  m: SwapModel,
  s: number,
  a: readonly number[],
  e: readonly number[],
  cost: PhaseTileCost,
): void {
  const len = m.sequences[s]!;
  const b = m.blockSize[s]!;
  const causal = m.mask === 'causal';
  let i = 0;
  while (i < a.length) {
    const qa = a[i]!;
    let qb = e[i]!;
    i++;
    while (i < a.length && a[i] === qb) qb = e[i++]!;
    walkTiles(qa, qb, len, b, causal, m.grid, cost);
  }
}

/** Per-rank forward and backward modelled time of `layout` (see the module comment). */
export function layoutPhaseMs(layout: Layout, world: number, m: SwapModel): PhaseLoads {
  const fwd = new Float64Array(world);
  const bwd = new Float64Array(world);
  const n = layout.rank.length;
  const order = Array.from({ length: n }, (_, i) => i);
  order.sort(
    (x, y) =>
      layout.rank[x]! - layout.rank[y]! ||
      layout.seq[x]! - layout.seq[y]! ||
      layout.start[x]! - layout.start[y]!,
  );
  const cost = new PhaseTileCost(m.kernel, m.mask === 'causal');
  let k = 0;
  while (k < n) {
    const r = layout.rank[order[k]!]!;
    const s = layout.seq[order[k]!]!;
    const a: number[] = [];
    const e: number[] = [];
    while (k < n && layout.rank[order[k]!] === r && layout.seq[order[k]!] === s) {
      const i = order[k++]!;
      a.push(layout.start[i]!);
      e.push(layout.start[i]! + layout.length[i]!);
    }
    cost.fwd = 0;
    cost.bwd = 0;
    addRuns(m, s, a, e, cost);
    fwd[r]! += cost.fwd;
    bwd[r]! += cost.bwd;
  }
  return { fwd, bwd };
}

/**
 * Owner-computes tasks as grid tiles (grid.ts): every rank computes the attention of its home
 * query runs, cut into squares on the sequence's block grid; where the kernel model runs a fully
 * visible rectangle faster than its squares (small sides), consecutive squares of a query tile
 * that become ready together are one rectangle task of 2^k squares (powers of two keep the shapes
 * few, so that the dense batches stay large). Each tile becomes usable when the
 * last of its data has arrived on the rank: the latest group of the query pieces it covers (their
 * forward `in`) and of the key pieces it covers (home runs, user row, or `kv` transfers; see
 * {@link keyPiecesOf}). Tiles of one rank and ready group form one compute op (order.ts), so a
 * rank computes whatever squares each group completes while the next group is in flight.
 *
 * A rectangle left where a run does not start on the block grid is cut along its keys when it
 * would outlast an op ({@link rectStep}).
 *
 * A whole short sequence is one causal square (grid.ts, `wholeMax`) unless its data arrives in
 * parts: then it is cut on the block grid like any run, so that its resident tiles run at once.
 *
 * Waiting for a tile's latest piece costs a little pipelining against cutting tiles at every
 * arrival boundary, but keeps every tile a square of the grid: the key pieces of a rank are cut at
 * user-row and home-run boundaries, which lie anywhere.
 */
import { freezeColumns, IntColumn, intColumns } from '../../core/int-column.ts';
import { COLUMNS } from '../../plan/types.ts';
import { type TileGeometry, type TileSink, walkTiles } from './grid.ts';
import type { KernelTime } from './kernel-time.ts';
import { MAX_OP_MS } from './op-cut.ts';
import {
  type EdgesByRs,
  type KeyPieces,
  keyPiecesOf,
  newKeyPieces,
  type TaskContext,
  type Tasks,
} from './tasks.ts';
import type { KvEdges } from './transfers/fetch.ts';

/** Latest group of the key pieces overlapping [ka, kb) (pieces sorted, tiling the span). */
function keyGroup(kp: KeyPieces, ka: number, kb: number): number {
  let lo = 0;
  let hi = kp.n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (kp.b[mid]! <= ka) lo = mid + 1;
    else hi = mid;
  }
  let g = -1;
  for (let k = lo; k < kp.n && kp.a[k]! < kb; k++) if (kp.t[k]! > g) g = kp.t[k]!;
  return g;
}

/**
 * Key width of the tasks a fully visible rectangle of `lq` queries against `width` keys is cut
 * into: the whole width, unless its modelled backward time exceeds {@link MAX_OP_MS}; then as many
 * parts as that takes, each a whole number of tiles (`g.tmax`) wide, rounded down (at least one
 * tile; the last part takes the rest).
 *
 * A rectangle is what is left of a query run that does not start on its sequence's block grid
 * (grid.ts): a mode (b) run cut by the token levelling, or a run the user layout splits in mode
 * (a). Left whole, a sliver of a long sequence is one task against the sequence's whole prefix:
 * `longtail` at 1024 ranks, mode (b), seed 1, 241 queries against 364,544 keys ran 36 ms as one
 * backward op, and the `dkv` partials of all 80 home runs it crosses left at its end, a 28 ms tail
 * on the NIC that made that rank the last (`npx tsx bench/fcp-gaps.ts --worlds 1024 --seeds 1
 * --loader-layout --dir backward --rank 986`). Cut, order.ts places the parts in key order among
 * the other exporting work, so the partials leave as their keys are done, and each part waits only
 * for its own keys. The kernel model runs a part at about the whole's efficiency (the
 * calibration's rows are nearly flat beyond 4K keys), so the weights (grid.ts, TileCost) stay
 * those of the whole (costing the parts there instead was measured neutral: docs/results.md,
 * "Session 18: changes tried and not kept"). Measured (simulated, fluid, hopper-ib, B - A mean ± standard error over
 * paired batches, `npx tsx bench/quality-ab.ts --base 7581d41 [--loader-layout] --worlds W --seeds
 * N`), forward / backward MFU: mode (b) 1024 ranks (18 batches) -0.0006 ± 0.0021 / +0.0071 ±
 * 0.0018 (`longtail` +0.0109, `magi` +0.0117 backward), mode (a) 1024 ranks (9 batches) +0.0002 ±
 * 0.0004 / +0.0257 ± 0.0088; 16-256 ranks mode (b) (90 batches) +0.0002 ± 0.0006 / +0.0003 ±
 * 0.0004 (256 ranks backward +0.0037 ± 0.0011), mode (a) (60 batches) -0.0005 ± 0.0009 / +0.0007 ±
 * 0.0008. Rounding the parts up instead (one more tile each): the same within the errors; parts of
 * at most 4 ms or 8 ms: 1024 ranks backward +0.0066 / +0.0036 in mode (b), +0.0264 / +0.0204 in
 * mode (a).
 */
export function rectStep(lq: number, width: number, g: TileGeometry, tm: KernelTime): number {
  if (width <= g.tmax) return width;
  const ms = tm.taskMs('backward', false, 0, lq, 0, width);
  if (ms <= MAX_OP_MS) return width;
  const parts = Math.ceil(ms / MAX_OP_MS);
  return Math.max(g.tmax, Math.floor(width / parts / g.tmax) * g.tmax);
}

/** Builds the grid tiles of every RS with their ready groups (see the module comment). */
export function buildGridTasks(
  ctx: TaskContext,
  blockSize: Int32Array,
  g: TileGeometry,
  tm: KernelTime,
  pieceGroup: Int32Array,
  edges: KvEdges,
  byRs: EdgesByRs,
  edgeGroup: Int32Array,
): Tasks {
  const { runs, pieces, sequences } = ctx;
  const causal = ctx.mask === 'causal';
  const RS = runs.rsRank.length;
  const cols = intColumns(COLUMNS.tasks);
  const ready = new IntColumn();
  const rsOff = new Int32Array(RS + 1);
  const kp = newKeyPieces();
  let h = 0;
  let s = 0;
  let p0 = 0;
  let p1 = 0;
  /** Latest `in` group of the run pieces p0..p1-1 overlapping queries [qa, qb). */
  const queryGroup = (qa: number, qb: number): number => {
    let t = -1;
    for (let i = p0; i < p1; i++) {
      const a = pieces.start[i]!;
      if (a >= qb) break;
      if (a + pieces.length[i]! > qa && pieceGroup[i]! > t) t = pieceGroup[i]!;
    }
    return t;
  };
  const emit = (qa: number, qb: number, ka: number, kb: number, t: number): void => {
    cols.rank.push(h);
    cols.seq.push(s);
    cols.qStart.push(qa);
    cols.qLength.push(qb - qa);
    cols.kvStart.push(ka);
    cols.kvLength.push(kb - ka);
    ready.push(t);
  };
  const sink: TileSink = {
    squares(qa, side, ka, count) {
      // Consecutive squares that become ready together run as rectangles of 1, 2, 4, ... squares
      // (largest first) where that is faster (small sides): one task each, few distinct shapes for
      // the dense batches.
      const tq = queryGroup(qa, qa + side);
      const merge = tm.mergeSquares(side);
      let i = 0;
      while (i < count) {
        const t = Math.max(tq, keyGroup(kp, ka + i * side, ka + (i + 1) * side));
        let j = i + 1;
        while (merge && j < count && Math.max(tq, keyGroup(kp, ka + j * side, ka + (j + 1) * side)) === t)
          j++;
        for (let n = j - i; n > 0; ) {
          const w = 2 ** Math.floor(Math.log2(n));
          emit(qa, qa + side, ka + i * side, ka + (i + w) * side, t);
          i += w;
          n -= w;
        }
      }
    },
    diagonal(qa, side) {
      emit(qa, qa + side, qa, qa + side, Math.max(queryGroup(qa, qa + side), keyGroup(kp, qa, qa + side)));
    },
    rect(qa, qb, ka, kb) {
      const tq = queryGroup(qa, qb);
      const step = rectStep(qb - qa, kb - ka, g, tm);
      for (let x = ka; x < kb; ) {
        const y = Math.min(kb, x + step);
        emit(qa, qb, x, y, Math.max(tq, keyGroup(kp, x, y)));
        x = y;
      }
    },
  };
  // A whole sequence whose data arrives in parts (some of it resident, some by `in` or `kv`) is
  // cut on the block grid instead of being one causal square, so the tiles of the part already
  // there run while the rest is on its way (issue 15, deliverable 4). Mode (a), longtail seed 1 at
  // 16 ranks: a 29K-token sequence 97% resident waited 10.1 ms for 924 tokens as one square; cut,
  // the forward's first op starts at 1.8/7.3 ms mean/max (was 3.5/10.1), MFU 0.532 -> 0.556.
  // Simulated, 3 batches (`npx tsx bench/fcp-timeline.ts --batch B --worlds 16,64,256 --seeds
  // 1,2,3`), fwd/bwd MFU: longtail 16 0.430/0.441 -> 0.438/0.441, 64 0.508/0.476 -> 0.508/0.479,
  // 256 0.422/0.417 -> 0.423/0.418; magi 16 unchanged 0.453/0.447, 64 0.323/0.392 ->
  // 0.330/0.395, 256 0.270/0.320 -> 0.272/0.318; mode (b) unchanged (nothing moves).
  const split: TileGeometry = { ...g, wholeMax: 0 };
  const mixedArrival = (e: number): boolean => {
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (let i = p0; i < p1; i++) {
      const t = pieceGroup[i]!;
      if (t < lo) lo = t;
      if (t > hi) hi = t;
    }
    for (let k = 0; k < kp.n && kp.a[k]! < e; k++) {
      const t = kp.t[k]!;
      if (t < lo) lo = t;
      if (t > hi) hi = t;
    }
    return lo < hi;
  };
  for (let rs = 0; rs < RS; rs++) {
    h = runs.rsRank[rs]!;
    s = runs.rsSeq[rs]!;
    keyPiecesOf(ctx, rs, pieceGroup, edges, byRs, edgeGroup, kp);
    const len = sequences[s]!;
    const b = blockSize[s]!;
    for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
      const run = runs.byRank[p]!;
      p0 = pieces.runOff[run]!;
      p1 = pieces.runOff[run + 1]!;
      const a = runs.start[run]!;
      const e = a + runs.length[run]!;
      walkTiles(a, e, len, b, causal, a === 0 && e <= g.wholeMax && mixedArrival(e) ? split : g, sink);
    }
    rsOff[rs + 1] = cols.rank.length;
  }
  return {
    table: freezeColumns(cols),
    rsOff,
    ready: ready.toArray(),
  };
}

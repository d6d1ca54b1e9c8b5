/**
 * A phase's compute ops (forward.ts, backward.ts): ordered so that exports finish early and local
 * work fills both ends (order.ts), with the local work kept for the end sized per rank
 * ({@link reserveOf}); the pipeline ablations; and which op last touches each reshuffle piece (the
 * op its `out` push must wait for). Split from phase.ts, which places the rounds.
 */
import { kvBytesPerToken, qBytesPerToken } from '../../model/attention.ts';
import type { ComputeTable } from '../../plan/types.ts';
import type { PhaseContext } from './context.ts';
import { carryLaunchBatches } from './launch-carry.ts';
import { batchShapes } from './launch-shapes.ts';
import { MAX_OP_MS } from './op-cut.ts';
import { buildOps } from './ops-by-group.ts';
import type { FcpOptions } from './options.ts';
import { groupArrival, orderOps } from './order.ts';
import { orderKeys, pushUnits } from './task-keys.ts';
import { exportFlags, firstPieceEndingAfter, rsPiecesInto, type TaskContext, type Tasks } from './tasks.ts';
import type { GroupPlacer } from './transfers/groups.ts';
import { estimateGroups, type TimelineContext } from './transfers/timeline.ts';
import type { TransferList } from './transfers/transfer-list.ts';

/** Most local work kept for the end of a phase, ms (order.ts): it covers the last pushes and the `out` reshuffle. */
const RESERVE_MS = 10;
/**
 * Local work kept per rank for the end (ms, at most RESERVE_MS): what its largest push takes across
 * nodes (`tailFactor` times, latency included); the backward of a loader layout (mode (b)) uses it.
 * A fixed 10 ms held all local work of a rank with less than that back to cover a 1-2 ms tail
 * while the rank idled through its whole first group; the exposed time is the same for any split
 * between the start and the end as long as each end is covered, so the end gets only what it needs.
 */
export function reserveOf(
  tasks: Tasks['table'],
  exported: Uint8Array,
  ms: number,
  backward: boolean,
  tctx: TimelineContext,
  tailFactor = 2,
): Float64Array {
  const { model, links, world } = tctx;
  const q = qBytesPerToken(model);
  const kv = kvBytesPerToken(model);
  const push = new Float64Array(world);
  for (let i = 0; i < tasks.rank.length; i++) {
    if (exported[i] === 0) continue;
    // Forward: O rows; backward: dQ rows and the dK,dV partial (an upper bound of what it exports).
    const bytes = tasks.qLength[i]! * q + (backward ? tasks.kvLength[i]! * kv : 0);
    const r = tasks.rank[i]!;
    if (bytes > push[r]!) push[r] = bytes;
  }
  const out = new Float64Array(world);
  for (let r = 0; r < world; r++)
    out[r] =
      push[r]! > 0 ? Math.min(ms, tailFactor * (push[r]! / links.interBytesPerMs + links.groupLatencyMs)) : 0;
  return out;
}

/**
 * Compute ops of a phase: ordered so that exports finish early and local work fills both ends
 * (order.ts), or, under the pipeline ablations, one op per ready group.
 */
export function buildPhaseOps(
  ctx: PhaseContext,
  tasks: Tasks,
  after: Int32Array,
  ms: Float64Array,
  backward: boolean,
  tctx: TimelineContext,
  placer: GroupPlacer,
  list: TransferList,
): { compute: ComputeTable; opOfTask: Int32Array } {
  const { world, o } = ctx;
  if (o.noPipeline) return buildOps(tasks.table.rank, after, world);
  const t = tasks.table;
  const { groupEnd, groups } = estimateGroups(tctx, placer, list);
  const exported = exportFlags(ctx, tasks, backward);
  const unit = pushUnits(ctx, tasks, backward);
  const shape = batchShapes(t, ctx.mask === 'causal');
  const reshuffle = ctx.pieces.moving.length > 0;
  const order = orderKeys(ctx, t, backward, unit, shape);
  const input = { rank: t.rank, ready: after, exported, ms, key: order, unit, shape };
  // Local work kept for the end of the phase (order.ts). Without a reshuffle (a loader layout) the
  // backward's tail (dK,dV partials) is sized per rank (reserveOf) and local work fills the
  // estimated waits. The forward with one (mode (a)) keeps none: its ranks that import the most
  // have the least work of their own, and that little is worth more at the start, while the first
  // `in` group is on its way (longtail 16 ranks seed 1: rank 8 held back all of its 2.4 ms for a
  // 2.7 ms reserve and idled 10.1 ms), than under the last `out` push. Measured (simulated, `npx
  // tsx bench/quality-ab.ts --worlds W --seeds N`, per-rank reserve -> none, forward MFU, mean ±
  // standard error over paired batches; backward unchanged): hopper-ib fluid 16 / 32 ranks seeds
  // 1-6 +0.0154 ± 0.0032 / +0.0066 ± 0.0021 (26 up, 5 down), contention +0.0151 / +0.0077 (25 up,
  // 4 down), ratio-5920 +0.0046 / +0.0025 (25 up, 1 down), held-out seeds 7-12 +0.0110 / +0.0047
  // (24 up, 5 down); 64-256 seeds 1-3 +0.0008 ± 0.0011, 64/128 seeds 4-6 +0.0013 ± 0.0010. (Half
  // and one and a half times the largest push were in between: +0.0039 and -0.0020 over 16/32.)
  // The backward of mode (a) keeps the fixed reserve and no gap filling: its `out` pushes queue
  // behind the last ops and the per-group estimate is rougher (measured: both cost up to 0.003
  // MFU in mode (a), `magi` and `bimodal`, 64-256 ranks; none or 5 ms instead of 10, with the
  // forward's change: -0.0006 ± 0.0010 / -0.0005 ± 0.0007 backward at 16/32).
  // (The forward of a loader layout exports nothing: it keeps no reserve either way.)
  const reserve = !backward ? 0 : reshuffle ? RESERVE_MS : reserveOf(t, exported, RESERVE_MS, backward, tctx);
  // Ops of exporting work wait for a later group only in the backward: in the forward (mode (a):
  // moved queries' O) each later group opens an op (simulated, mode (a), fluid, 3 batches, fwd MFU
  // at 16-256: longtail 0.470/0.467/0.518/0.485/0.436 -> 0.485/0.469/0.523/0.478/0.439, magi
  // 0.472/0.444/0.348/0.295/0.270 -> 0.481/0.453/0.346/0.293/0.273, bimodal
  // 0.553/0.514/0.489/0.447/0.453 -> 0.563/0.518/0.494/0.456/0.456, backward unchanged; the same
  // in the backward lost at 256 ranks, longtail 0.440 -> 0.426, magi 0.331 -> 0.321).
  const ordered = orderOps(
    input,
    groupEnd,
    groups,
    world,
    MAX_OP_MS,
    reserve,
    !reshuffle || !backward,
    backward,
  );
  // Batches of a launch shape completed across ops where the estimate sees no delay
  // (launch-carry.ts). Measured in session 20: docs/results.md.
  return carryLaunchBatches(ordered.compute, ordered.opOfTask, input, groupArrival(groupEnd, groups, world));
}

/** Applies the pipeline ablations to tasks' ready groups. */
export function applyAblations(
  ready: Int32Array,
  pieceGroup: Int32Array,
  lastFetchGroup: number,
  o: FcpOptions,
): Int32Array {
  let lastIn = -1;
  for (let p = 0; p < pieceGroup.length; p++) lastIn = Math.max(lastIn, pieceGroup[p]!);
  const out = ready.slice();
  for (let t = 0; t < out.length; t++) {
    if (o.noPipeline) out[t] = lastFetchGroup;
    else if (o.noReshuffleOverlap) out[t] = Math.max(out[t]!, lastIn);
  }
  return out;
}

/**
 * Last op of each piece's home touching the piece: as queries (the op writing its O or dQ rows),
 * and with `withKeys` also as keys (the backward's dK/dV rows).
 */
export function lastWriter(
  ctx: TaskContext,
  tasks: Tasks,
  opOfTask: Int32Array,
  withKeys = false,
): Int32Array {
  const { runs, pieces } = ctx;
  const t = tasks.table;
  const lastOp = new Int32Array(pieces.seq.length).fill(-1);
  const rsPieces = new Int32Array(pieces.seq.length);
  const sides = withKeys ? 2 : 1;
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    const np = rsPiecesInto(ctx, rs, rsPieces);
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const op = opOfTask[i]!;
      for (let side = 0; side < sides; side++) {
        const a = side === 0 ? t.qStart[i]! : t.kvStart[i]!;
        const b = a + (side === 0 ? t.qLength[i]! : t.kvLength[i]!);
        for (
          let k = firstPieceEndingAfter(pieces, rsPieces, np, a);
          k < np && pieces.start[rsPieces[k]!]! < b;
          k++
        ) {
          const pk = rsPieces[k]!;
          if (lastOp[pk]! < op) lastOp[pk] = op;
        }
      }
    }
  }
  return lastOp;
}

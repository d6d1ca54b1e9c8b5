/**
 * What orderOps (order.ts) reads of a phase's tasks beside their times and ready groups: each
 * task's push unit (the push its results join, which leaves after the last op feeding it) and its
 * order key (which available task a rank takes next). buildPhaseOps (phase-ops.ts) builds both here.
 *
 * Keys start from positions: the token's offset in the packed batch (sequence, then position; of
 * the keys in the backward, of the queries in the forward), so that partials and rows complete
 * progressively. The backward of a loader layout (mode (b)) takes its available tasks shape by
 * shape (launch-shapes.ts); with a reshuffle (mode (a)) both phases take the tasks whose push
 * crosses nodes first (push-links.ts): the backward's dK,dV partial, the forward's O rows.
 */
import type { PhaseContext } from './context.ts';
import { shapeMajorKeys } from './launch-shapes.ts';
import { firstEndingAfter } from './placement/layout.ts';
import { nodeLocalLast } from './push-links.ts';
import { firstPieceEndingAfter, rsPiecesInto, type Tasks } from './tasks.ts';

/** Per task, its push unit: the backward's keyRuns, the forward's queryPieces. */
export function pushUnits(ctx: PhaseContext, tasks: Tasks, backward: boolean): Int32Array {
  return backward ? keyRuns(ctx, tasks.table) : queryPieces(ctx, tasks);
}

/**
 * Per task, its order key (module comment): positions (small enough for launch-shapes.ts to put a
 * shape rank above them exactly), by launch shape in the backward of a loader layout, NIC-first
 * with a reshuffle. `unit`: {@link pushUnits}; `shape`: launch-shapes.ts, batchShapes.
 */
export function orderKeys(
  ctx: PhaseContext,
  t: Tasks['table'],
  backward: boolean,
  unit: Int32Array,
  shape: Float64Array,
): Float64Array {
  const lens = ctx.problem.sequences;
  const seqStart = new Float64Array(lens.length);
  for (let s = 1; s < lens.length; s++) seqStart[s] = seqStart[s - 1]! + lens[s - 1]!;
  const key = new Float64Array(t.rank.length);
  for (let i = 0; i < key.length; i++)
    key[i] = seqStart[t.seq[i]!]! + (backward ? t.kvStart[i]! : t.qStart[i]!);
  if (ctx.pieces.moving.length === 0) return backward ? shapeMajorKeys(key, shape) : key;
  const pushTo = backward ? homeRanks(ctx, unit) : userRanks(ctx, t.rank, unit);
  return nodeLocalLast(key, t.rank, pushTo, ctx.links.nodeSize);
}

/**
 * Per task, the home run holding the start of its keys: the backward's push unit (order.ts), since
 * a rank's `dkv` partial of another rank's keys leaves as one push per home run it crosses
 * (backward.ts). Ops of exporting work are not cut inside a unit before twice `maxOpMs`, which
 * cuts the backward's launches (bimodal 16 ranks seed 1, mode (b): 678 -> 424 ops). Measured,
 * simulated, 3 batches (seeds 1-3), backward MFU at 16/32/64/128/256 ranks, before -> after:
 * see docs/results.md, "Session 14".
 */
function keyRuns(ctx: PhaseContext, t: Tasks['table']): Int32Array {
  const { runs } = ctx;
  const unit = new Int32Array(t.rank.length);
  for (let i = 0; i < unit.length; i++) {
    const s = t.seq[i]!;
    unit[i] = firstEndingAfter(runs.start, runs.length, runs.off[s]!, runs.off[s + 1]!, t.kvStart[i]!);
  }
  return unit;
}

/** Per task, the rank of its push unit's home run (keyRuns): where its dK,dV partial goes. */
function homeRanks(ctx: PhaseContext, unit: Int32Array): Int32Array {
  return Int32Array.from(unit, (u) => ctx.runs.rank[u]!);
}

/** Per task, the user rank of its forward push unit (queryPieces): where its O rows go (its own rank when none move). */
function userRanks(ctx: PhaseContext, rank: Int32Array, unit: Int32Array): Int32Array {
  return Int32Array.from(unit, (u, i) => (u >= 0 ? ctx.pieces.user[u]! : rank[i]!));
}

/**
 * Per task, the reshuffle piece holding the start of its queries: the forward's push unit (order.ts),
 * since O leaves as one `out` push per moving piece after the last op writing its rows
 * (forward.ts). Measured with the backward's rule (keyRuns) in place, simulated, mode (a), 3
 * batches, forward MFU at 16/32/64/128/256 ranks: fluid `longtail` 0.485/0.469/0.523/0.478/0.439
 * -> 0.487/0.471/0.528/0.484/0.438, `magi` 0.484/0.453/0.346/0.293/0.273 ->
 * 0.487/0.451/0.355/0.294/0.277, `bimodal` 0.563/0.518/0.494/0.463/0.456 ->
 * 0.567/0.521/0.497/0.464/0.458; contention and ratio-5920 and held-out seeds 4-6 in
 * docs/results.md, "Session 14". The forward of a loader layout exports nothing: no op there changes.
 */
function queryPieces(ctx: PhaseContext, tasks: Tasks): Int32Array {
  // Every task lies in one RS; one past the RS's last piece (none: queries are home) would get a
  // unit of its own.
  const { runs, pieces } = ctx;
  const t = tasks.table;
  const unit = new Int32Array(t.rank.length);
  const rsPieces = new Int32Array(pieces.seq.length);
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    const np = rsPiecesInto(ctx, rs, rsPieces);
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const k = firstPieceEndingAfter(pieces, rsPieces, np, t.qStart[i]!);
      unit[i] = k < np ? rsPieces[k]! : -1 - i;
    }
  }
  return unit;
}

/**
 * Launch batches completed across ops (issue 15, kernel efficiency): the GPU runtime batches an
 * op's identical dense pieces and splits each batch into powers of two, one launch each
 * (python/fcp_torch/kernels.py, `plan_launches`: seven 4096 x 4096 tiles run as 4 + 2 + 1). Ops of
 * work that exports nothing are cut where the ready group changes (order.ts), so their batch sizes
 * are whatever a group brings: in the forward of mode (b) at 256 ranks (`longtail` seed 1) a third
 * of the launches were such splits (14859 launches, 5086 of them beyond one per batch shape).
 *
 * Between two consecutive ops of one rank that both export nothing, the tasks of a launch shape
 * beyond the first op's largest power of two move to the next op when that op holds the shape
 * too and the move saves launches there and then (a batch of 3 beside one of 1: 2 + 1 and 1
 * launches become 2 and 2, one launch each). A moved task waits for the later op's group, so the
 * move is made only where the estimate (the phase's group ends, transfers/timeline.ts) has that
 * group arrive before the shortened first op ends: the rank's timeline keeps its shape, less the
 * launches. Nothing that feeds a push moves (exporting ops are cut by order.ts for their pushes),
 * so no push leaves later.
 */
import type { ComputeTable } from '../../plan/types.ts';

/** Per task what the carry reads (order.ts's input): rank-free, as ops carry their rank. */
export interface CarryInput {
  /** Nonzero where a task's results leave its rank (order.ts). */
  readonly exported: Uint8Array;
  /** Estimated ms of each task (no launches). */
  readonly ms: Float64Array;
  /** Per task, a key of its launch shape (phase.ts, `batchShapes`). */
  readonly shape: Float64Array;
}

/** Launches of a batch of `n` identical pieces (split into powers of two). */
export function batchLaunches(n: number): number {
  let c = 0;
  for (let x = n; x > 0; x = Math.floor(x / 2)) c += x % 2;
  return c;
}

/** Largest power of two not above `n` (n >= 1). */
function floorPow2(n: number): number {
  let p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/**
 * Moves tasks between consecutive non-exporting ops of each rank (module comment) and returns the
 * new ops; `ops` and `opOfTask` are not modified. `readyAt(g, r)`: estimated arrival of group g on
 * rank r, ms (0 for g < 0). Ops keep their rank, `after` and order; a moved task joins the end of
 * the next op's list (it was ready earlier, so the op's `after` still covers it).
 */
export function carryLaunchBatches(
  ops: ComputeTable,
  opOfTask: Int32Array,
  t: CarryInput,
  readyAt: (g: number, r: number) => number,
): { compute: ComputeTable; opOfTask: Int32Array } {
  const n = ops.rank.length;
  const off = ops.taskOffsets;
  const ids = ops.taskIds;
  // Per op: whether it exports, and its ms.
  const exports = new Uint8Array(n);
  const opMs = new Float64Array(n);
  for (let k = 0; k < n; k++)
    for (let j = off[k]!; j < off[k + 1]!; j++) {
      const i = ids[j]!;
      if (t.exported[i] !== 0) exports[k] = 1;
      opMs[k]! += t.ms[i]!;
    }
  const newOp = opOfTask.slice();
  let moved = 0;
  // Tasks of the op being looked at: its own and those carried into it, in order.
  let cur: number[] = [];
  let curMs = 0;
  let end = 0;
  const isCarried = new Uint8Array(opOfTask.length);
  for (let k = 0; k < n; k++) {
    const r = ops.rank[k]!;
    if (k === 0 || ops.rank[k - 1] !== r) {
      end = 0;
      cur = [];
      curMs = 0;
    }
    for (let j = off[k]!; j < off[k + 1]!; j++) cur.push(ids[j]!);
    let ms = opMs[k]! + curMs;
    const start = Math.max(end, readyAt(ops.after[k]!, r));
    // The next op of the rank, when neither exports and it waits for no earlier group (a rank's
    // last op of local work waits for none: what it would take might not have arrived).
    const next =
      k + 1 < n &&
      ops.rank[k + 1] === r &&
      exports[k] === 0 &&
      exports[k + 1] === 0 &&
      ops.after[k + 1]! >= ops.after[k]!
        ? k + 1
        : -1;
    const carried: number[] = [];
    if (next >= 0) {
      // Batches of the op and of the next one, by shape.
      const here = new Map<number, number[]>();
      for (const i of cur) {
        const s = t.shape[i]!;
        const list = here.get(s);
        if (list === undefined) here.set(s, [i]);
        else list.push(i);
      }
      const there = new Map<number, number>();
      for (let j = off[next]!; j < off[next + 1]!; j++) {
        const s = t.shape[ids[j]!]!;
        there.set(s, (there.get(s) ?? 0) + 1);
      }
      const arrival = readyAt(ops.after[next]!, r);
      let left = ms;
      for (const [s, list] of here) {
        const c = list.length;
        const m = there.get(s) ?? 0;
        const keep = floorPow2(c);
        const extra = c - keep;
        if (extra === 0 || m === 0) continue;
        const saved = batchLaunches(c) + batchLaunches(m) - 1 - batchLaunches(m + extra);
        if (saved <= 0) continue;
        let extraMs = 0;
        for (let q = keep; q < c; q++) extraMs += t.ms[list[q]!]!;
        if (arrival > start + left - extraMs + Number(process.env.FCP_CARRY_TOL ?? 0)) continue;
        left -= extraMs;
        for (let q = keep; q < c; q++) carried.push(list[q]!);
      }
      curMs = ms - left;
      ms = left;
    }
    for (const i of carried) isCarried[i] = 1;
    for (const i of cur) if (isCarried[i] === 0) newOp[i] = k;
    for (const i of carried) {
      isCarried[i] = 0;
      newOp[i] = next;
      moved++;
    }
    end = start + ms;
    cur = carried;
    if (carried.length === 0) curMs = 0;
  }
  if (moved === 0) return { compute: ops, opOfTask };
  // The ops' task lists again: each op's own tasks in their order, then those carried into it.
  const count = new Int32Array(n + 1);
  for (let j = 0; j < ids.length; j++) count[newOp[ids[j]!]! + 1]!++;
  for (let k = 0; k < n; k++) count[k + 1]! += count[k]!;
  const taskOffsets = count.slice();
  const taskIds = new Int32Array(ids.length);
  const fill = count.slice(0, n);
  // Own tasks first (op order), then the carried ones (their old op's order).
  for (let j = 0; j < ids.length; j++) {
    const i = ids[j]!;
    if (newOp[i] === opOfTask[i]) taskIds[fill[newOp[i]!]!++] = i;
  }
  for (let j = 0; j < ids.length; j++) {
    const i = ids[j]!;
    if (newOp[i] !== opOfTask[i]) taskIds[fill[newOp[i]!]!++] = i;
  }
  return { compute: { rank: ops.rank, after: ops.after, taskOffsets, taskIds }, opOfTask: newOp };
}

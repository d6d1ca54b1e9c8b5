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
 *
 * order.ts first completes an op's batches before its cut with tasks that have arrived
 * (`completeBatches`); this pass moves what is still left over forward. Alone, simulated, mode (b),
 * 45 batches: +0.0004 ± 0.0001 forward MFU, 26 up, none down (docs/results.md, "Session 20").
 */
import { batchLaunches } from '../../cost/op-cost.ts';
import type { ComputeTable } from '../../plan/types.ts';

/** Per task what the carry reads (order.ts's input): rank-free, as ops carry their rank. */
export interface CarryInput {
  /** Nonzero where a task's results leave its rank (order.ts). */
  readonly exported: Uint8Array;
  /** Estimated ms of each task (no launches). */
  readonly ms: Float64Array;
  /** Per task, a key of its launch shape (launch-shapes.ts, `batchShapes`). */
  readonly shape: Float64Array;
}

/** Task counts by launch shape of one op, in order of first appearance (ops hold few shapes). */
export class ShapeCounts {
  /** Most shapes tracked; an op with more is left as it is. */
  static readonly MAX = 64;
  readonly key = new Float64Array(ShapeCounts.MAX);
  readonly count = new Int32Array(ShapeCounts.MAX);
  n = 0;
  clear(): void {
    this.n = 0;
  }
  /** Counts one task of shape `s`; false when the table is full. */
  add(s: number): boolean {
    for (let h = 0; h < this.n; h++)
      if (this.key[h] === s) {
        this.count[h]!++;
        return true;
      }
    if (this.n === ShapeCounts.MAX) return false;
    this.key[this.n] = s;
    this.count[this.n++] = 1;
    return true;
  }
  countOf(s: number): number {
    for (let h = 0; h < this.n; h++) if (this.key[h] === s) return this.count[h]!;
    return 0;
  }
}

/** `a` copied into a larger array of at least `size` entries. */
function grow(a: Int32Array, size: number): Int32Array<ArrayBuffer> {
  const b = new Int32Array(Math.max(size, 2 * a.length));
  b.set(a);
  return b;
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
  // Tasks carried into the op being looked at (their newOp already says so), and their ms.
  let cur = new Int32Array(16);
  let curN = 0;
  let curMs = 0;
  let carried = new Int32Array(16);
  let carriedN = 0;
  const here = new ShapeCounts();
  const there = new ShapeCounts();
  let end = 0;
  for (let k = 0; k < n; k++) {
    const r = ops.rank[k]!;
    if (k === 0 || ops.rank[k - 1] !== r) {
      end = 0;
      curN = 0;
      curMs = 0;
    }
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
    carriedN = 0;
    if (next >= 0) {
      // Batches of the op (the tasks carried in, then its own) and of the next one, by shape.
      here.clear();
      there.clear();
      let fits = true;
      for (let q = 0; q < curN && fits; q++) fits = here.add(t.shape[cur[q]!]!);
      for (let j = off[k]!; j < off[k + 1]! && fits; j++) fits = here.add(t.shape[ids[j]!]!);
      for (let j = off[next]!; j < off[next + 1]! && fits; j++) fits = there.add(t.shape[ids[j]!]!);
      const arrival = readyAt(ops.after[next]!, r);
      let left = ms;
      for (let h = 0; h < here.n && fits; h++) {
        const s = here.key[h]!;
        const c = here.count[h]!;
        const m = there.countOf(s);
        const keep = floorPow2(c);
        const extra = c - keep;
        if (extra === 0 || m === 0) continue;
        if (batchLaunches(c) + batchLaunches(m) - 1 - batchLaunches(m + extra) <= 0) continue;
        // The op's tasks of this shape past the first `keep`, in the op's order.
        if (carried.length < carriedN + extra) carried = grow(carried, carriedN + extra);
        const from = carriedN;
        let seen = 0;
        let extraMs = 0;
        const take = (i: number): void => {
          if (t.shape[i] !== s || seen++ < keep) return;
          carried[carriedN++] = i;
          extraMs += t.ms[i]!;
        };
        for (let q = 0; q < curN; q++) take(cur[q]!);
        for (let j = off[k]!; j < off[k + 1]!; j++) take(ids[j]!);
        if (arrival > start + left - extraMs) carriedN = from;
        else left -= extraMs;
      }
      curMs = ms - left;
      ms = left;
    }
    // Tasks carried in and not carried on stay in this op: newOp says so already.
    for (let q = 0; q < carriedN; q++) newOp[carried[q]!] = next;
    moved += carriedN;
    end = start + ms;
    // What was carried is the next op's carried-in set.
    const swap = cur;
    cur = carried;
    curN = carriedN;
    carried = swap;
    if (carriedN === 0) curMs = 0;
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

/**
 * Helpers that break plans on purpose (validator tests): copies, row removal with id renumbering,
 * row duplication.
 */
import type { Phase, Plan } from '../../src/plan/types.ts';

/** A deep copy (typed arrays included). */
export const clonePlan = (p: Plan): Plan => structuredClone(p);

type Columns = Record<string, Int32Array | Uint8Array>;

/** Keeps rows where `keep(i)`; returns the table with every column filtered. */
function filterRows<T extends object>(table: T, keep: (i: number) => boolean): T {
  const out: Columns = {};
  for (const [k, v] of Object.entries(table as Columns))
    out[k] = (v as Int32Array).filter((_, i) => keep(i)) as Int32Array;
  return out as T;
}

/** Appends a copy of row `i` to every column; returns the new row's id. */
function appendRow<T extends object>(table: T, i: number): { table: T; row: number } {
  const out: Columns = {};
  let n = 0;
  for (const [k, v] of Object.entries(table as Columns)) {
    const arr = v as Int32Array;
    const grown = new (arr.constructor as Int32ArrayConstructor)(arr.length + 1);
    grown.set(arr);
    grown[arr.length] = arr[i]!;
    out[k] = grown;
    n = arr.length;
  }
  return { table: out as T, row: n };
}

/** Rewrites a phase's task CSR: `map(id)` returns the new ids for an id (empty list: dropped). */
function mapTaskIds(ph: Phase, map: (id: number) => number[]): void {
  const c = ph.compute;
  const offsets = [0];
  const ids: number[] = [];
  for (let o = 0; o + 1 < c.taskOffsets.length; o++) {
    for (let k = c.taskOffsets[o]!; k < c.taskOffsets[o + 1]!; k++) ids.push(...map(c.taskIds[k]!));
    offsets.push(ids.length);
  }
  c.taskOffsets = Int32Array.from(offsets);
  c.taskIds = Int32Array.from(ids);
}

/** Removes task `t` from the task table and from every op. */
export function removeTask(p: Plan, t: number): Plan {
  const q = clonePlan(p);
  q.tasks = filterRows(q.tasks, (i) => i !== t);
  for (const ph of [q.forward, q.backward]) mapTaskIds(ph, (id) => (id === t ? [] : [id > t ? id - 1 : id]));
  return q;
}

/** Duplicates task `t` (a new row) and runs the copy right after the original in both phases. */
export function duplicateTask(p: Plan, t: number): Plan {
  const q = clonePlan(p);
  const { table, row } = appendRow(q.tasks, t);
  q.tasks = table;
  for (const ph of [q.forward, q.backward]) mapTaskIds(ph, (id) => (id === t ? [id, row] : [id]));
  return q;
}

/** Moves task `t` from its op to op `op` in one phase. */
export function moveTask(ph: Phase, t: number, op: number): void {
  const c = ph.compute;
  const lists: number[][] = [];
  for (let o = 0; o + 1 < c.taskOffsets.length; o++)
    lists.push(
      Array.from(c.taskIds.subarray(c.taskOffsets[o]!, c.taskOffsets[o + 1]!)).filter((x) => x !== t),
    );
  lists[op]!.push(t);
  c.taskOffsets = Int32Array.from([
    0,
    ...lists.map((_, i) => lists.slice(0, i + 1).reduce((s, l) => s + l.length, 0)),
  ]);
  c.taskIds = Int32Array.from(lists.flat());
}

/** Removes transfer `x` of a phase and its sendAfter pairs. */
export function removeTransfer(ph: Phase, x: number): void {
  ph.transfers = filterRows(ph.transfers, (i) => i !== x);
  const sa = ph.sendAfter;
  const keep = Array.from(sa.transfer, (tx) => tx !== x);
  const transfer = sa.transfer.filter((_, i) => keep[i]).map((tx) => (tx > x ? tx - 1 : tx));
  ph.sendAfter = { ...sa, transfer, compute: sa.compute.filter((_, i) => keep[i]) };
}

/** Duplicates transfer `x` (same round, same sendAfter); returns the new row. */
export function duplicateTransfer(ph: Phase, x: number): number {
  const { table, row } = appendRow(ph.transfers, x);
  ph.transfers = table;
  const sa = ph.sendAfter;
  const extra: number[] = [];
  for (let i = 0; i < sa.transfer.length; i++) if (sa.transfer[i] === x) extra.push(sa.compute[i]!);
  ph.sendAfter = {
    ...sa,
    transfer: Int32Array.from([...sa.transfer, ...extra.map(() => row)]),
    compute: Int32Array.from([...sa.compute, ...extra]),
  };
  return row;
}

/** Op ids of a phase that run task `t`. */
export function opsOf(ph: Phase, t: number): number[] {
  const c = ph.compute;
  const out: number[] = [];
  for (let o = 0; o + 1 < c.taskOffsets.length; o++)
    for (let k = c.taskOffsets[o]!; k < c.taskOffsets[o + 1]!; k++) if (c.taskIds[k] === t) out.push(o);
  return out;
}

/** Codes of a list of issues. */
export const codes = (issues: readonly { code: string }[]): string[] => issues.map((i) => i.code);

/** Removes task `t` from every op of a phase (the task row stays). */
export const unscheduleTask = (ph: Phase, t: number): void => mapTaskIds(ph, (id) => (id === t ? [] : [id]));

/** Lists task `t` twice in its op of a phase. */
export const scheduleTwice = (ph: Phase, t: number): void =>
  mapTaskIds(ph, (id) => (id === t ? [id, id] : [id]));

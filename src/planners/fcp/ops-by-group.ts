/**
 * Compute ops of the `noPipeline` ablation (phase-ops.ts): one op per rank and ready group, so that
 * every op waits for the group completing its data and nothing overlaps inside a rank.
 */
import { IntColumn } from '../../core/int-column.ts';
import type { ComputeTable } from '../../plan/types.ts';
import { countingSort } from './transfers/groups.ts';

/**
 * Compute ops from each task's rank and `after` group: one op per (rank, after), ops rank-major
 * and by ascending `after` within a rank (so a rank's ops run in group order), tasks in id order.
 */
export function buildOps(
  taskRank: Int32Array,
  taskAfter: Int32Array,
  world: number,
): { compute: ComputeTable; opOfTask: Int32Array } {
  const n = taskRank.length;
  let maxAfter = -1;
  for (let t = 0; t < n; t++) maxAfter = Math.max(maxAfter, taskAfter[t]!);
  // Two stable counting sorts: by after, then by rank.
  const afterKey = new Int32Array(n);
  for (let t = 0; t < n; t++) afterKey[t] = taskAfter[t]! + 1;
  const byAfter = countingSort(afterKey, maxAfter + 2, null);
  const order = countingSort(taskRank, world, byAfter);
  const rank = new IntColumn();
  const after = new IntColumn();
  const offsets = new IntColumn();
  const opOfTask = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const t = order[i]!;
    const ops = rank.length;
    if (ops === 0 || rank.get(ops - 1) !== taskRank[t] || after.get(ops - 1) !== taskAfter[t]) {
      rank.push(taskRank[t]!);
      after.push(taskAfter[t]!);
      offsets.push(i);
    }
    opOfTask[t] = rank.length - 1;
  }
  offsets.push(n);
  return {
    compute: { rank: rank.toArray(), after: after.toArray(), taskOffsets: offsets.toArray(), taskIds: order },
    opOfTask,
  };
}

/**
 * What one rank does in one phase, derived from the plan: its sends and receives per group, its
 * compute ops in table order, and for each group the last op its sends must follow (`sendAfter`;
 * a transfer with several pairs waits for the latest).
 */
import type { Plan } from '../../plan/types.ts';
import { PHASES } from './protocol.ts';

/** A plan error found while scheduling a rank (the worker reports it with the rank). */
export class ScheduleError extends Error {
  override name = 'ScheduleError';
}

/** Per-phase schedule of this rank. */
export interface Schedule {
  groups: number;
  /** Transfer ids this rank sends / receives, per group, ascending. */
  sends: number[][];
  recvs: number[][];
  /** Compute op ids of this rank, in table order. */
  ops: number[];
  /** For each group: index into `ops` of the last op its sends must follow (-1: none). */
  sendAfterUpTo: Int32Array;
  groupOfTransfer: Int32Array;
}

/** The schedule of `rank` in `phase` (0 forward, 1 backward). */
export function rankSchedule(plan: Plan, phase: 0 | 1, rank: number): Schedule {
  const ph = phase === 0 ? plan.forward : plan.backward;
  const name = PHASES[phase];
  const T = ph.transfers;
  const gor = ph.groupOfRound;
  let groups = 0;
  for (let r = 0; r < gor.length; r++) groups = Math.max(groups, gor[r]! + 1);
  const n = T.round.length;
  const groupOfTransfer = new Int32Array(n);
  const sends: number[][] = Array.from({ length: groups }, () => []);
  const recvs: number[][] = Array.from({ length: groups }, () => []);
  for (let t = 0; t < n; t++) {
    const g = gor[T.round[t]!];
    if (g === undefined || g < 0)
      throw new ScheduleError(
        `${name} transfer ${t} is in round ${T.round[t]}, which has no group (groupOfRound has ${gor.length} rounds)`,
      );
    groupOfTransfer[t] = g;
    if (T.src[t] === rank) sends[g]!.push(t);
    if (T.dst[t] === rank) recvs[g]!.push(t);
  }
  const C = ph.compute;
  const ops: number[] = [];
  const pos = new Int32Array(C.rank.length).fill(-1);
  for (let op = 0; op < C.rank.length; op++)
    if (C.rank[op] === rank) {
      pos[op] = ops.length;
      ops.push(op);
    }
  const sendAfterUpTo = new Int32Array(groups).fill(-1);
  const sa = ph.sendAfter;
  for (let i = 0; i < sa.transfer.length; i++) {
    const t = sa.transfer[i]!;
    if (T.src[t] !== rank) continue;
    const op = sa.compute[i]!;
    const p = op >= 0 && op < pos.length ? pos[op]! : -1;
    if (p < 0)
      throw new ScheduleError(
        `${name} sendAfter pair ${i}: transfer ${t} is sent by rank ${rank} but must follow compute op ${op}, which is not an op of rank ${rank}`,
      );
    const g = groupOfTransfer[t]!;
    if (p > sendAfterUpTo[g]!) sendAfterUpTo[g] = p;
  }
  return { groups, sends, recvs, ops, sendAfterUpTo, groupOfTransfer };
}

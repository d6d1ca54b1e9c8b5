/**
 * Rule 5: deadlock-free ordering. Groups run in one global order on every rank and a rank's ops run
 * in table order, so the only wait that can close a cycle is `sendAfter`: transfer x (group g) waits
 * for op o on its sender, and o waits for group `after` of itself and of every earlier op on that
 * rank. Hence g must exceed all of those. Also `groupOfRound` starts at 0, never decreases and
 * never skips a group.
 */
import type { Phase, Plan } from './types.ts';
import { chunkLiveness } from './validate-expand.ts';
import type { IssueSink } from './validate-issues.ts';

/** Effective `sendAfter` op of each transfer and chunk transfer (-1: none; the latest op when several). */
export interface SendAfterOf {
  transfers: Int32Array;
  chunkTransfers: Int32Array;
}

/** Checks rule 5 for one phase; returns each transfer's effective `sendAfter` op. */
export function checkOrder(plan: Plan, ph: Phase, name: string, sink: IssueSink): SendAfterOf {
  const g = ph.groupOfRound;
  for (let r = 0; r < g.length; r++) {
    const prev = r === 0 ? -1 : g[r - 1]!;
    if (r === 0 && g[0] !== 0)
      sink.add(
        'plan.rule5.groupStart',
        `round 0 is in group ${g[0]}; groups start at 0`,
        `${name}.groupOfRound`,
        0,
      );
    else if (g[r]! < prev)
      sink.add(
        'plan.rule5.groupOrder',
        `round ${r} is in group ${g[r]}, before round ${r - 1}'s group ${prev}`,
        `${name}.groupOfRound`,
        r,
      );
    else if (r > 0 && g[r]! > prev + 1)
      sink.add(
        'plan.rule5.groupGap',
        `round ${r} jumps from group ${prev} to ${g[r]}; groups are consecutive`,
        `${name}.groupOfRound`,
        r,
      );
  }
  const c = ph.compute;
  const nOps = c.rank.length;
  // prefMax[o]: the largest `after` of op o and every earlier op of its rank.
  const prefMax = new Int32Array(nOps);
  const running = new Map<number, number>();
  for (let o = 0; o < nOps; o++) {
    const m = Math.max(running.get(c.rank[o]!) ?? -1, c.after[o]!);
    running.set(c.rank[o]!, m);
    prefMax[o] = m;
  }
  const one = (
    trIds: Int32Array | undefined,
    ops: Int32Array | undefined,
    n: number,
    round: Int32Array,
    src: Int32Array,
    what: string,
    skip: (x: number) => boolean,
  ): Int32Array => {
    const eff = new Int32Array(n).fill(-1);
    if (!trIds || !ops) return eff;
    for (let i = 0; i < trIds.length; i++) {
      const x = trIds[i]!;
      const o = ops[i]!;
      if (skip(x)) continue;
      const group = g[round[x]!]!;
      if (c.rank[o] !== src[x]) {
        sink.add(
          'plan.rule5.sendAfterRank',
          `${what} ${x} from rank ${src[x]} waits for op ${o} of rank ${c.rank[o]}; it must be on the sender`,
          `${name}.sendAfter`,
          i,
        );
        continue;
      }
      if (group <= prefMax[o]!)
        sink.add(
          'plan.rule5.deadlock',
          `${what} ${x} (group ${group}) waits for op ${o}, which (or an earlier op of rank ${src[x]}) waits for group ${prefMax[o]}: deadlock`,
          `${name}.sendAfter`,
          i,
        );
      if (o > eff[x]!) eff[x] = o;
    }
    return eff;
  };
  const ctr = ph.chunkTransfers;
  const live = chunkLiveness(plan);
  // A chunk transfer of a part empty for every sequence of its set stands for no transfer.
  const empty = (x: number): boolean => ctr !== undefined && ctr.part[x]! >= live(ctr.set[x]!, ctr.parts[x]!);
  return {
    transfers: one(
      ph.sendAfter.transfer,
      ph.sendAfter.compute,
      ph.transfers.round.length,
      ph.transfers.round,
      ph.transfers.src,
      'transfer',
      () => false,
    ),
    chunkTransfers: one(
      ph.sendAfter.chunkTransfer,
      ph.sendAfter.chunkCompute,
      ctr ? ctr.round.length : 0,
      ctr ? ctr.round : new Int32Array(0),
      ctr ? ctr.src : new Int32Array(0),
      'chunk transfer',
      empty,
    ),
  };
}

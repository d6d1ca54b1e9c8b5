/**
 * Chunk rows of TransformerEngine's context-parallel variants (variants.ts, all-gather.ts):
 * transfers collected by logical group and sub-round, then emitted with empty groups dropped.
 */
import type { KindCode } from '../../plan/types.ts';
import type { PlanBuilder } from '../shared/plan-builder.ts';

/** One collected chunk transfer: logical group, sub-round inside it, the row and its sendAfter slot. */
export interface Row {
  group: number;
  sub: number;
  src: number;
  dst: number;
  kind: KindCode;
  set: number;
  parts: number;
  part: number;
  afterSlot: number;
}

/** One compute task (chunk task `id`, rows shared by both phases): rank, slot, logical group it waits for. */
export interface Job {
  id: number;
  rank: number;
  slot: number;
  after: number;
}

/**
 * Emits collected rows and jobs of one phase: logical groups without rows are dropped (an op that
 * waited for one waits for the last non-empty group before it), sub-rounds without rows too.
 * Returns groupOfRound.
 */
export function emitPhase(
  b: PlanBuilder,
  phase: 'forward' | 'backward',
  rows: Row[],
  jobs: Job[],
  logicalGroups: number,
): Int32Array {
  const ph = b[phase];
  const subs = new Map<number, Set<number>>();
  for (const r of rows) {
    const s = subs.get(r.group) ?? new Set<number>();
    s.add(r.sub);
    subs.set(r.group, s);
  }
  const groupId = new Int32Array(logicalGroups).fill(-1);
  const roundOf = new Map<string, number>();
  const groupOfRound: number[] = [];
  let g = 0;
  for (let lg = 0; lg < logicalGroups; lg++) {
    const s = subs.get(lg);
    if (!s) continue;
    groupId[lg] = g;
    for (const sub of [...s].sort((x, y) => x - y)) {
      roundOf.set(`${lg}:${sub}`, groupOfRound.length);
      groupOfRound.push(g);
    }
    g++;
  }
  // Last non-empty group at or before each logical group (-1: none).
  const upTo = new Int32Array(logicalGroups);
  let last = -1;
  for (let lg = 0; lg < logicalGroups; lg++) {
    if (groupId[lg]! >= 0) last = groupId[lg]!;
    upTo[lg] = last;
  }
  for (const j of jobs) ph.chunkTask(j.rank, j.slot, j.after < 0 ? -1 : upTo[j.after]!, j.id);
  for (const r of rows) {
    const id = ph.chunkTransfer(
      roundOf.get(`${r.group}:${r.sub}`)!,
      r.src,
      r.dst,
      r.kind,
      r.set,
      r.parts,
      r.part,
    );
    if (r.afterSlot >= 0 && ph.hasOp(r.src, r.afterSlot)) ph.chunkSendAfter(id, r.src, r.afterSlot);
  }
  return Int32Array.from(groupOfRound);
}

/** What a variant added: the groupOfRound of both phases. */
export interface VariantInfo {
  forwardGroups: Int32Array;
  backwardGroups: Int32Array;
}

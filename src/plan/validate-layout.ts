/**
 * Rule 1: `userLayout` and `homeLayout` (with their chunk rows) each cover every token of every
 * sequence exactly once. One sorted sweep per sequence: a row starting after the covered prefix
 * leaves a gap, a row starting inside it overlaps.
 */
import type { FlatLayout, FlatPlan } from './validate-expand.ts';
import { bucketBySeq, type SeqBuckets } from './validate-index.ts';
import { type IssueSink, whereOf } from './validate-issues.ts';

/** Checks one layout; returns its rows bucketed by sequence and sorted by start. */
export function checkLayout(
  flat: FlatPlan,
  l: FlatLayout,
  name: 'userLayout' | 'homeLayout',
  sink: IssueSink,
): SeqBuckets {
  const chunkName = name === 'userLayout' ? 'userChunks' : 'homeChunks';
  const nSeq = flat.seqLen.length;
  const b = bucketBySeq(nSeq, l.seq, l.n, l.start);
  for (let s = 0; s < nSeq; s++) {
    if (!flat.active[s]) continue;
    const L = flat.seqLen[s]!;
    let covered = 0;
    let last = -1;
    for (let i = b.offsets[s]!; i < b.offsets[s + 1]!; i++) {
      const row = b.order[i]!;
      const w = whereOf(l.origin[row]!, name, chunkName);
      if (l.start[row]! > covered)
        sink.add(
          'plan.rule1.gap',
          `tokens [${covered}, ${l.start[row]}) of sequence ${s} are on no rank`,
          w.path,
          w.row,
        );
      else if (l.start[row]! < covered)
        sink.add(
          'plan.rule1.overlap',
          `tokens [${l.start[row]}, ${Math.min(covered, l.end[row]!)}) of sequence ${s} are on rank ${l.rank[row]} and on another rank`,
          w.path,
          w.row,
        );
      covered = Math.max(covered, l.end[row]!);
      last = row;
    }
    if (covered < L) {
      const w = last >= 0 ? whereOf(l.origin[last]!, name, chunkName) : { path: name, row: undefined };
      sink.add('plan.rule1.gap', `tokens [${covered}, ${L}) of sequence ${s} are on no rank`, w.path, w.row);
    }
  }
  return b;
}

/**
 * Walks a layout's rows of one sequence at increasing positions: `at(a)` is the rank holding token
 * `a` (-1 when no row or several rows hold it: rule 1 reports those).
 */
export class OwnerWalk {
  private i: number;
  constructor(
    private readonly l: FlatLayout,
    private readonly b: SeqBuckets,
    private readonly seq: number,
  ) {
    this.i = b.offsets[seq]!;
  }

  at(a: number): number {
    const hi = this.b.offsets[this.seq + 1]!;
    const { order } = this.b;
    while (this.i < hi && this.l.end[order[this.i]!]! <= a) this.i++;
    if (this.i >= hi) return -1;
    const row = order[this.i]!;
    if (this.l.start[row]! > a) return -1;
    // A second row covering `a` (an overlap) makes the owner ambiguous.
    for (let j = this.i + 1; j < hi && this.l.start[order[j]!]! <= a; j++)
      if (this.l.end[order[j]!]! > a) return -1;
    return this.l.rank[row]!;
  }
}

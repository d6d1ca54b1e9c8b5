/**
 * Layout helpers: the user layout (the packed batch split evenly across ranks, as data loaders
 * produce it) and lookups over layouts.
 */
import { IntColumn } from '../core/int-column.ts';
import type { Layout } from './types.ts';

/**
 * The packed batch (sequences concatenated in id order) cut into `world` equal contiguous pieces:
 * rank r holds packed tokens [floor(r*T/W), floor((r+1)*T/W)). Rows are in rank order, then
 * sequence order.
 */
export function evenUserLayout(sequences: ArrayLike<number>, world: number): Layout {
  let total = 0;
  for (let i = 0; i < sequences.length; i++) total += sequences[i]!;
  const rank = new IntColumn();
  const seq = new IntColumn();
  const start = new IntColumn();
  const length = new IntColumn();
  let s = 0; // current sequence
  let off = 0; // offset inside it
  for (let r = 0; r < world; r++) {
    let need = Math.floor(((r + 1) * total) / world) - Math.floor((r * total) / world);
    while (need > 0) {
      const len = sequences[s]!;
      const take = Math.min(need, len - off);
      rank.push(r);
      seq.push(s);
      start.push(off);
      length.push(take);
      need -= take;
      off += take;
      if (off === len) {
        s++;
        off = 0;
      }
    }
  }
  return { rank: rank.toArray(), seq: seq.toArray(), start: start.toArray(), length: length.toArray() };
}

/** Sum of all sequence lengths. */
export function totalTokens(sequences: ArrayLike<number>): number {
  let t = 0;
  for (let i = 0; i < sequences.length; i++) t += sequences[i]!;
  return t;
}

/**
 * Layout helpers: the user layout (the packed batch split evenly across ranks, as data loaders
 * produce it) and lookups over layouts.
 */
import { IntColumn } from '../core/int-column.ts';
import { partLength } from './parts.ts';
import type { Layout, Plan } from './types.ts';

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

/**
 * Tokens each rank holds in the layout the rest of the model runs on: the plan's `userLayout` rows
 * plus its `userChunks` rows (real tokens; padding is not counted).
 */
export function userTokensPerRank(plan: Plan): Float64Array {
  const out = new Float64Array(plan.world);
  const u = plan.userLayout;
  for (let i = 0; i < u.rank.length; i++) out[u.rank[i]!]! += u.length[i]!;
  const c = plan.userChunks;
  const sets = plan.seqSets;
  if (c && sets)
    for (let i = 0; i < c.rank.length; i++) {
      const s = c.set[i]!;
      for (let k = sets.offsets[s]!; k < sets.offsets[s + 1]!; k++)
        out[c.rank[i]!]! += partLength(plan.sequences[sets.seqs[k]!]!, c.parts[i]!, c.part[i]!);
    }
  return out;
}

/**
 * Token imbalance (max/mean - 1) of the layout the rest of the model runs on: MLP, projections and
 * norms run per token on every layer, so a layout that gives a rank 1.5x the mean tokens costs
 * that rank 1.5x outside attention, whatever attention itself does.
 */
export function userTokenImbalance(plan: Plan): number {
  const t = userTokensPerRank(plan);
  let max = 0;
  let sum = 0;
  for (const x of t) {
    max = Math.max(max, x);
    sum += x;
  }
  return sum > 0 ? max / (sum / t.length) - 1 : 0;
}

/**
 * Peak K/V tokens a rank holds from `kv` receptions during one phase (part of the rule-6 report).
 *
 * Model, in group time: a range received in group g is held from g until its last use on that
 * rank: an op with `after` >= g that reads an overlapping key range (use time = the op's `after`),
 * or a `kv` send of an overlapping range in a later group (use time = that group). A range never
 * used is held during g only. The peak is the largest sum of held tokens over groups. Ranges
 * received twice are counted twice. Explicit rows are matched to explicit rows by token overlap,
 * chunk rows to chunk rows by (set, parts, part); a chunk reception read only by explicit tasks
 * (no planner does that) counts as held during its arrival group only.
 */
import { Kind, type Phase, type Plan } from './types.ts';
import { bucketBySeq } from './validate-index.ts';

/** Tokens of chunk row (set, parts, part) summed over the set. */
export type ChunkTokens = (set: number, parts: number, part: number) => number;

/** Per-rank peak of K/V tokens held from `kv` receptions in one phase. */
export function residentKvPeak(plan: Plan, ph: Phase, chunkTokens: ChunkTokens): Float64Array {
  const W = plan.world;
  const tr = ph.transfers;
  const g = ph.groupOfRound;
  const c = ph.compute;
  // Explicit receptions bucketed by sequence, sorted by (rank, start) inside a bucket.
  let n = 0;
  for (let i = 0; i < tr.round.length; i++) if (tr.kind[i] === Kind.kv) n++;
  const rec = new Int32Array(n);
  const seqOf = new Int32Array(n);
  const dstOf = new Int32Array(n);
  const startOf = new Int32Array(n);
  for (let i = 0, k = 0; i < tr.round.length; i++)
    if (tr.kind[i] === Kind.kv) {
      rec[k] = i;
      seqOf[k] = tr.seq[i]!;
      dstOf[k] = tr.dst[i]!;
      startOf[k++] = tr.start[i]!;
    }
  const bk = bucketBySeq(plan.sequences.length, seqOf, n, dstOf, startOf);
  const rRank = new Int32Array(n);
  const rStart = new Int32Array(n);
  const rEnd = new Int32Array(n);
  const rArr = new Int32Array(n);
  for (let k = 0; k < n; k++) {
    const i = rec[bk.order[k]!]!;
    rRank[k] = tr.dst[i]!;
    rStart[k] = tr.start[i]!;
    rEnd[k] = tr.start[i]! + tr.length[i]!;
    rArr[k] = g[tr.round[i]!]!;
  }
  const rRel = rArr.slice();
  // groupMax[k]: the longest reception of k's (seq, rank) group, which bounds how far back a
  // lookup must start (receptions are block-sized, layout-sized ranges would slow every lookup).
  const groupMax = new Int32Array(n);
  for (let g0 = 0; g0 < n; ) {
    let g1 = g0;
    let m = 0;
    const seq0 = seqOf[bk.order[g0]!]!;
    while (g1 < n && rRank[g1] === rRank[g0] && seqOf[bk.order[g1]!] === seq0) {
      m = Math.max(m, rEnd[g1]! - rStart[g1]!);
      g1++;
    }
    groupMax.fill(m, g0, g1);
    g0 = g1;
  }
  /** Extends receptions of (rank, seq) overlapping [a, b) that arrived by `latest` to `time`. */
  const use = (rank: number, seq: number, a: number, b: number, latest: number, time: number): void => {
    let lo = bk.offsets[seq]!;
    let hi = bk.offsets[seq + 1]!;
    const end = hi;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (rRank[mid]! < rank) lo = mid + 1;
      else hi = mid;
    }
    if (lo >= end || rRank[lo] !== rank) return;
    const from = a - groupMax[lo]!;
    hi = end;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (rRank[mid] === rank && rStart[mid]! < from) lo = mid + 1;
      else hi = mid;
    }
    for (let k = lo; k < end && rRank[k] === rank && rStart[k]! < b; k++)
      if (rEnd[k]! > a && rArr[k]! <= latest && rRel[k]! < time) rRel[k] = time;
  };
  const t = plan.tasks;
  for (let o = 0; o < c.rank.length; o++)
    for (let k = c.taskOffsets[o]!; k < c.taskOffsets[o + 1]!; k++) {
      const id = c.taskIds[k]!;
      use(c.rank[o]!, t.seq[id]!, t.kvStart[id]!, t.kvStart[id]! + t.kvLength[id]!, c.after[o]!, c.after[o]!);
    }
  for (let i = 0; i < tr.round.length; i++)
    if (tr.kind[i] === Kind.kv) {
      const grp = g[tr.round[i]!]!;
      use(tr.src[i]!, tr.seq[i]!, tr.start[i]!, tr.start[i]! + tr.length[i]!, grp - 1, grp);
    }

  // Chunk receptions, keyed by (rank, set, parts, part).
  const ctr = ph.chunkTransfers;
  const cRec = new Map<number, number[]>();
  const cArr: number[] = [];
  const cRel: number[] = [];
  const cRank: number[] = [];
  const cTok: number[] = [];
  // Numeric keys: (set, parts) combination id, then rank, then part.
  const combos = new Map<number, number>();
  let maxParts = 1;
  if (ctr) for (let j = 0; j < ctr.round.length; j++) maxParts = Math.max(maxParts, ctr.parts[j]!);
  const key = (rank: number, set: number, parts: number, part: number): number => {
    const ck = set * (maxParts + 1) + parts;
    let id = combos.get(ck);
    if (id === undefined) {
      id = combos.size;
      combos.set(ck, id);
    }
    return (id * W + rank) * (maxParts + 1) + part;
  };
  if (ctr)
    for (let j = 0; j < ctr.round.length; j++) {
      if (ctr.kind[j] !== Kind.kv) continue;
      const k = key(ctr.dst[j]!, ctr.set[j]!, ctr.parts[j]!, ctr.part[j]!);
      let list = cRec.get(k);
      if (!list) {
        list = [];
        cRec.set(k, list);
      }
      list.push(cArr.length);
      cArr.push(g[ctr.round[j]!]!);
      cRel.push(g[ctr.round[j]!]!);
      cRank.push(ctr.dst[j]!);
      cTok.push(chunkTokens(ctr.set[j]!, ctr.parts[j]!, ctr.part[j]!));
    }
  const useChunk = (k: number, latest: number, time: number): void => {
    for (const r of cRec.get(k) ?? []) if (cArr[r]! <= latest && cRel[r]! < time) cRel[r] = time;
  };
  const ct = plan.chunkTasks;
  if (ct && c.chunkTaskOffsets && c.chunkTaskIds)
    for (let o = 0; o < c.rank.length; o++)
      for (let k = c.chunkTaskOffsets[o]!; k < c.chunkTaskOffsets[o + 1]!; k++) {
        const id = c.chunkTaskIds[k]!;
        useChunk(key(c.rank[o]!, ct.set[id]!, ct.parts[id]!, ct.kvPart[id]!), c.after[o]!, c.after[o]!);
      }
  if (ctr)
    for (let j = 0; j < ctr.round.length; j++)
      if (ctr.kind[j] === Kind.kv) {
        const grp = g[ctr.round[j]!]!;
        useChunk(key(ctr.src[j]!, ctr.set[j]!, ctr.parts[j]!, ctr.part[j]!), grp - 1, grp);
      }

  // Per rank, sweep +tokens at arrival and -tokens after release.
  const m = n + cArr.length;
  const evRank = new Int32Array(2 * m);
  const evTime = new Int32Array(2 * m);
  const evTok = new Float64Array(2 * m);
  const ev = (i: number, rank: number, time: number, tok: number): void => {
    evRank[i] = rank;
    evTime[i] = time;
    evTok[i] = tok;
  };
  for (let k = 0; k < n; k++) {
    const tok = rEnd[k]! - rStart[k]!;
    ev(2 * k, rRank[k]!, rArr[k]!, tok);
    ev(2 * k + 1, rRank[k]!, rRel[k]! + 1, -tok);
  }
  for (let r = 0; r < cArr.length; r++) {
    ev(2 * (n + r), cRank[r]!, cArr[r]!, cTok[r]!);
    ev(2 * (n + r) + 1, cRank[r]!, cRel[r]! + 1, -cTok[r]!);
  }
  // Sort by (rank, time, release before arrival): a range freed after group g is not held in
  // g+1. Packed numeric keys (with the event index in the low bits) sort natively.
  let maxTime = 1;
  for (let i = 0; i < 2 * m; i++) maxTime = Math.max(maxTime, evTime[i]! + 1);
  const IDX = 2 ** Math.ceil(Math.log2(2 * m + 1));
  const packed = new Float64Array(2 * m);
  for (let i = 0; i < 2 * m; i++)
    packed[i] = ((evRank[i]! * (maxTime + 1) + evTime[i]!) * 2 + (evTok[i]! > 0 ? 1 : 0)) * IDX + i;
  if ((W * (maxTime + 1) + maxTime) * 2 * IDX < 2 ** 53) packed.sort();
  else {
    // Too large to pack exactly: sort indices with a comparator instead (same order).
    const order = Array.from({ length: 2 * m }, (_, i) => i).sort(
      (a, b) =>
        evRank[a]! - evRank[b]! ||
        evTime[a]! - evTime[b]! ||
        Number(evTok[a]! > 0) - Number(evTok[b]! > 0) ||
        a - b,
    );
    for (let i = 0; i < 2 * m; i++) packed[i] = order[i]!;
  }
  const peak = new Float64Array(W);
  let cur = 0;
  let prevRank = -1;
  const exact = (W * (maxTime + 1) + maxTime) * 2 * IDX < 2 ** 53;
  for (const key of packed) {
    const i = exact ? key % IDX : key;
    if (evRank[i] !== prevRank) {
      prevRank = evRank[i]!;
      cur = 0;
    }
    cur += evTok[i]!;
    if (cur > peak[prevRank]!) peak[prevRank] = cur;
  }
  return peak;
}

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

  // Chunk receptions, keyed per receiving rank by (set, parts) combination and part. Bucketed by
  // rank and sorted by key inside a bucket, in typed arrays: at 1024 ranks a ring plan has 2M chunk
  // receptions, and a Map of per-key arrays spent 8-13 s building them (profiled).
  const ctr = ph.chunkTransfers;
  const combos = new Map<number, number>();
  let maxParts = 1;
  const cOff = new Int32Array(W + 1);
  if (ctr)
    for (let j = 0; j < ctr.round.length; j++) {
      maxParts = Math.max(maxParts, ctr.parts[j]!);
      if (ctr.kind[j] === Kind.kv) cOff[ctr.dst[j]! + 1]!++;
    }
  for (let r = 0; r < W; r++) cOff[r + 1]! += cOff[r]!;
  const cn = cOff[W]!;
  /** Key of (set, parts, part) inside one rank's bucket. */
  const key = (set: number, parts: number, part: number): number => {
    const ck = set * (maxParts + 1) + parts;
    let id = combos.get(ck);
    if (id === undefined) {
      id = combos.size;
      combos.set(ck, id);
    }
    return id * (maxParts + 1) + part;
  };
  const cKey = new Float64Array(cn);
  const cArr = new Int32Array(cn);
  const cRel = new Int32Array(cn);
  const cTok = new Float64Array(cn);
  if (ctr) {
    const at = cOff.slice(0, W);
    const kArr = new Int32Array(cn);
    const kTok = new Float64Array(cn);
    for (let j = 0; j < ctr.round.length; j++) {
      if (ctr.kind[j] !== Kind.kv) continue;
      const r = at[ctr.dst[j]!]!++;
      cKey[r] = key(ctr.set[j]!, ctr.parts[j]!, ctr.part[j]!);
      kArr[r] = g[ctr.round[j]!]!;
      kTok[r] = chunkTokens(ctr.set[j]!, ctr.parts[j]!, ctr.part[j]!);
    }
    // Sort each bucket by key (packed with the position in the low bits, a native numeric sort)
    // and permute the arrival groups and tokens alike. Order among equal keys does not matter.
    let widest = 1;
    for (let r = 0; r < W; r++) widest = Math.max(widest, cOff[r + 1]! - cOff[r]!);
    const S = 2 ** Math.ceil(Math.log2(widest + 1));
    const maxKey = Math.max(1, combos.size) * (maxParts + 1);
    for (let r = 0; r < W; r++) {
      const a = cOff[r]!;
      const b = cOff[r + 1]!;
      if (b - a === 1) {
        cArr[a] = kArr[a]!;
        cTok[a] = kTok[a]!;
      }
      if (b - a < 2) continue;
      const seg = cKey.subarray(a, b);
      let order: ArrayLike<number>;
      if (maxKey * S < 2 ** 53) {
        const packed = Float64Array.from(seg, (k, i) => k * S + i).sort();
        order = Int32Array.from(packed, (x) => x % S);
      } else order = Array.from({ length: b - a }, (_, i) => i).sort((x, y) => seg[x]! - seg[y]!);
      const keys = Float64Array.from(order, (i) => seg[i]!);
      seg.set(keys);
      for (let i = 0; i < b - a; i++) {
        cArr[a + i] = kArr[a + order[i]!]!;
        cTok[a + i] = kTok[a + order[i]!]!;
      }
    }
    cRel.set(cArr);
  }
  /** Extends rank's receptions of key k that arrived by `latest` to `time` (a max: order-free). */
  const useChunk = (rank: number, k: number, latest: number, time: number): void => {
    let lo = cOff[rank]!;
    let hi = cOff[rank + 1]!;
    const end = hi;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cKey[mid]! < k) lo = mid + 1;
      else hi = mid;
    }
    for (let r = lo; r < end && cKey[r] === k; r++) if (cArr[r]! <= latest && cRel[r]! < time) cRel[r] = time;
  };
  const ct = plan.chunkTasks;
  if (ct && c.chunkTaskOffsets && c.chunkTaskIds)
    for (let o = 0; o < c.rank.length; o++)
      for (let k = c.chunkTaskOffsets[o]!; k < c.chunkTaskOffsets[o + 1]!; k++) {
        const id = c.chunkTaskIds[k]!;
        useChunk(c.rank[o]!, key(ct.set[id]!, ct.parts[id]!, ct.kvPart[id]!), c.after[o]!, c.after[o]!);
      }
  if (ctr)
    for (let j = 0; j < ctr.round.length; j++)
      if (ctr.kind[j] === Kind.kv) {
        const grp = g[ctr.round[j]!]!;
        useChunk(ctr.src[j]!, key(ctr.set[j]!, ctr.parts[j]!, ctr.part[j]!), grp - 1, grp);
      }

  // Per rank, +tokens at arrival and -tokens after release. Within one group releases come before
  // arrivals (a range freed after group g is not held in g+1), so the held total peaks at the end
  // of some group: the peak is the largest prefix sum over groups, 0 if none is positive. Tokens are
  // integers, so the sums are exact in any order. Events are bucketed by rank, then by group
  // through one reused slot per group (no global sort: at 1024 ranks a sort of 4M events with a
  // comparator was too slow).
  const m = n + cn;
  const rankOff = new Int32Array(W + 1);
  for (let k = 0; k < n; k++) rankOff[rRank[k]! + 1]! += 2;
  for (let r = 0; r < W; r++) rankOff[r + 1]! += 2 * (cOff[r + 1]! - cOff[r]!);
  for (let r = 0; r < W; r++) rankOff[r + 1]! += rankOff[r]!;
  const fill = rankOff.slice(0, W);
  const evTime = new Int32Array(2 * m);
  const evTok = new Float64Array(2 * m);
  let maxTime = 0;
  const ev = (rank: number, arrive: number, release: number, tok: number): void => {
    const i = fill[rank]!;
    fill[rank] = i + 2;
    evTime[i] = arrive;
    evTok[i] = tok;
    evTime[i + 1] = release;
    evTok[i + 1] = -tok;
    if (release > maxTime) maxTime = release;
  };
  for (let k = 0; k < n; k++) ev(rRank[k]!, rArr[k]!, rRel[k]! + 1, rEnd[k]! - rStart[k]!);
  for (let rank = 0; rank < W; rank++)
    for (let r = cOff[rank]!; r < cOff[rank + 1]!; r++) ev(rank, cArr[r]!, cRel[r]! + 1, cTok[r]!);
  const delta = new Float64Array(maxTime + 1);
  const seen = new Uint8Array(maxTime + 1);
  const peak = new Float64Array(W);
  for (let rank = 0; rank < W; rank++) {
    const a = rankOff[rank]!;
    const b = rankOff[rank + 1]!;
    if (a === b) continue;
    const times: number[] = [];
    for (let i = a; i < b; i++) {
      const t = evTime[i]!;
      if (!seen[t]) {
        seen[t] = 1;
        times.push(t);
      }
      delta[t]! += evTok[i]!;
    }
    const sorted = Int32Array.from(times).sort();
    let cur = 0;
    let best = 0;
    for (const t of sorted) {
      cur += delta[t]!;
      if (cur > best) best = cur;
      delta[t] = 0;
      seen[t] = 0;
    }
    peak[rank] = best;
  }
  return peak;
}

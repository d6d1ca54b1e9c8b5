/**
 * Costing compact chunk rows without expanding them (DESIGN.md, "Compact chunk rows").
 *
 * A chunk row stands for the same row for every sequence of its set; part i of P of a sequence of
 * (padded) length L is tokens [i*c, min((i+1)*c, L)) with c = ceil(L/P). Where the set records
 * `padTo`, every sequence counts as padded to a multiple of it (TE computes and sends its padding:
 * charged as time, never as useful FLOPs).
 *
 * Per (set, P) an index groups the sequences by part size c. A sequence's parts are
 * [c, ..., c, last, 0, ...]: a chunk segment (query part a against key parts kvLo..kvHi) costs the
 * same for every sequence of a c-group whose parts up to max(a, kvHi) are all full ("regular"); the
 * few sequences whose last (short) part or end falls inside the segment are costed one by one.
 * Regular costs are summed per (keys in parts, diagonal) into suffix arrays over the threshold, so
 * a segment costs O(1) plus its irregular sequences.
 *
 * Sequences whose part size reaches the smallest dense block (512 on H200) could run on the dense
 * path; they are handed to the op as explicit tasks, exactly as their expansion would be. There are
 * few: a ring over N ranks holds 2N parts per sequence, so at most tokens / (512 * 2N) of them.
 */
import type { Plan } from '../plan/types.ts';
import type { Direction, KernelModel, SegmentShape } from './kernel.ts';
import { segmentShape } from './kernel.ts';
import type { OpCost } from './op-cost.ts';

/** Sequences of one (set, P), grouped for costing. */
interface PartIndex {
  parts: number;
  /** Distinct part sizes, ascending, and per group the sorted "full up to" indices of its sequences. */
  groupC: Int32Array;
  groupFull: Int32Array[];
  /** Sequences bucketed by their last non-empty part t = n-1: CSR over t, with L and c. */
  truncOff: Int32Array; // sequences whose last part is short (last < c)
  truncLen: Int32Array;
  fullOff: Int32Array; // sequences whose last part is full
  fullLen: Int32Array;
  /** Sequences with part size >= the smallest dense side: ids and padded lengths. */
  bigSeq: Int32Array;
  bigLen: Int32Array;
  /** Tokens of part i summed over the set (padded). */
  tokens: Float64Array;
  /** Regular-cost suffix arrays, by key (nEff, diag, dir). */
  suffix: Map<number, Float64Array>;
}

/** Chunk-row coster of one plan. */
export class ChunkCoster {
  private readonly index = new Map<number, PartIndex>();
  private readonly causal: boolean;
  private readonly shape: SegmentShape = { lq: 0, lk: 0, causal: false, pairs: 0 };
  private readonly denseMin: number;

  constructor(
    private readonly plan: Plan,
    private readonly kernel: KernelModel,
  ) {
    this.causal = plan.mask === 'causal';
    // Smallest side the dense path accepts in any direction or mask; Infinity when unavailable.
    let min = Number.POSITIVE_INFINITY;
    if (kernel.policy !== 'varlen')
      for (const dir of ['forward', 'backward'] as const)
        for (const c of [false, true])
          for (let l = 1; l <= 1 << 20; l *= 2)
            if (kernel.denseEfficiency(dir, l, c) > 0) {
              min = Math.min(min, refineMin(kernel, dir, c, l));
              break;
            }
    this.denseMin = min;
  }

  /** Tokens of part `part` of `parts` summed over the sequences of `set` (padding included). */
  partTokens(set: number, parts: number, part: number): number {
    const ix = this.partIndex(set, parts);
    return part >= 0 && part < ix.parts ? ix.tokens[part]! : 0;
  }

  /**
   * Adds the work of one query part to `op`: for every sequence of `set`, queries of part `a` of
   * `parts` against key parts `kv` (ascending, distinct), merged as the explicit tasks would be (see
   * {@link OpCost}): visible parts in one segment, the diagonal part appended, causal bottom-right.
   */
  addSegment(op: OpCost, dir: Direction, set: number, parts: number, a: number, kv: readonly number[]): void {
    const causal = this.causal;
    const ix = this.partIndex(set, parts);
    if (a >= ix.parts) return;
    // Dense-capable sequences: as explicit tasks, one per part pair.
    for (let i = 0; i < ix.bigSeq.length; i++) {
      const len = ix.bigLen[i]!;
      const c = Math.ceil(len / parts);
      const qs = a * c;
      const ql = Math.min(c, len - qs);
      if (ql <= 0) continue;
      for (const b of kv) {
        if (causal && b > a) break;
        const ks = b * c;
        const kl = Math.min(c, len - ks);
        if (kl > 0) op.addTask(ix.bigSeq[i]!, qs, ql, ks, kl);
      }
    }
    let nVis = 0;
    let diag = false;
    let m = a;
    for (const b of kv) {
      if (causal && b > a) break; // masked
      if (causal && b === a) diag = true;
      else {
        nVis++;
        if (b > m) m = b;
      }
    }
    if (nVis === 0 && !diag) return;
    if (m >= ix.parts) m = ix.parts - 1;
    // Regular sequences (every involved part full): suffix sums.
    op.addVarlenMs(this.suffix(ix, dir, nVis + (diag ? 1 : 0), diag)[m]!);
    // Irregular: sequences whose last non-empty part t lies in [a, m] and is not full at m.
    const sh = this.shape;
    let ms = 0;
    for (let t = a; t <= m; t++) {
      for (let i = ix.truncOff[t]!; i < ix.truncOff[t + 1]!; i++)
        ms += this.exact(dir, ix.truncLen[i]!, parts, a, kv, diag, sh);
      if (t < m)
        for (let i = ix.fullOff[t]!; i < ix.fullOff[t + 1]!; i++)
          ms += this.exact(dir, ix.fullLen[i]!, parts, a, kv, diag, sh);
    }
    op.addVarlenMs(ms);
  }

  /** Varlen time of one sequence of (padded) length len for the query part. */
  private exact(
    dir: Direction,
    len: number,
    parts: number,
    a: number,
    kv: readonly number[],
    diag: boolean,
    sh: SegmentShape,
  ): number {
    const c = Math.ceil(len / parts);
    const ql = Math.min(c, len - a * c);
    if (ql <= 0) return 0;
    let vis = 0;
    for (const b of kv) {
      if (this.causal && b >= a) break;
      vis += Math.max(0, Math.min(c, len - b * c));
    }
    if (diag) segmentShape(true, vis, ql, 0, vis + ql, sh);
    else if (vis > 0) segmentShape(false, 0, ql, 0, vis, sh);
    else return 0;
    return this.kernel.varlenMs(dir, sh.lq, sh.lk, sh.causal, sh.pairs);
  }

  private suffix(ix: PartIndex, dir: Direction, nEff: number, diag: boolean): Float64Array {
    const key = (nEff * 2 + (diag ? 1 : 0)) * 2 + (dir === 'forward' ? 0 : 1);
    let s = ix.suffix.get(key);
    if (s) return s;
    s = new Float64Array(ix.parts + 1);
    const k = this.kernel;
    for (let g = 0; g < ix.groupC.length; g++) {
      const c = ix.groupC[g]!;
      // Relative geometry: keys [0, nEff*c); queries the last part (diagonal) or after all keys.
      const sh = segmentShape(this.causal, diag ? (nEff - 1) * c : nEff * c, c, 0, nEff * c, this.shape);
      const cost = k.varlenMs(dir, sh.lq, sh.lk, sh.causal, sh.pairs);
      const full = ix.groupFull[g]!;
      for (let i = 0; i < full.length; i++) s[full[i]!]! += cost;
    }
    for (let i = ix.parts - 1; i >= 0; i--) s[i]! += s[i + 1]!;
    ix.suffix.set(key, s);
    return s;
  }

  private partIndex(set: number, parts: number): PartIndex {
    const key = set * 1048576 + parts;
    let ix = this.index.get(key);
    if (!ix) {
      ix = buildIndex(this.plan, set, parts, this.denseMin);
      this.index.set(key, ix);
    }
    return ix;
  }
}

/** The exact smallest dense side between l/2 and l (the dense table starts at its smallest measured L). */
function refineMin(kernel: KernelModel, dir: Direction, causal: boolean, l: number): number {
  let lo = Math.max(1, l >> 1);
  let hi = l;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (kernel.denseEfficiency(dir, mid, causal) > 0) hi = mid;
    else lo = mid;
  }
  return kernel.denseEfficiency(dir, lo, causal) > 0 ? lo : hi;
}

/** Padded length of a sequence in a set padded to a multiple of padTo (0: none). */
export function paddedLength(len: number, padTo: number): number {
  return padTo > 1 ? Math.ceil(len / padTo) * padTo : len;
}

function buildIndex(plan: Plan, set: number, parts: number, denseMin: number): PartIndex {
  const sets = plan.seqSets!;
  const padTo = sets.padTo?.[set] ?? 0;
  const from = sets.offsets[set]!;
  const to = sets.offsets[set + 1]!;
  const n = to - from;
  const lens = new Int32Array(n);
  const cs = new Int32Array(n);
  const fullUpTo = new Int32Array(n);
  const lastIdx = new Int32Array(n);
  const shortLast = new Uint8Array(n);
  const tokDiff = new Float64Array(parts + 1);
  const tokens = new Float64Array(parts);
  const big = new Uint8Array(n);
  const bigSeq: number[] = [];
  const bigLen: number[] = [];
  for (let i = 0; i < n; i++) {
    const seq = sets.seqs[from + i]!;
    const len = paddedLength(plan.sequences[seq]!, padTo);
    const c = Math.ceil(len / parts);
    const cnt = Math.ceil(len / c); // non-empty parts, <= parts
    const last = len - (cnt - 1) * c;
    lens[i] = len;
    cs[i] = c;
    lastIdx[i] = cnt - 1;
    shortLast[i] = last < c ? 1 : 0;
    fullUpTo[i] = last < c ? cnt - 2 : cnt - 1;
    // tokens: c on parts 0..cnt-2, last on cnt-1.
    tokDiff[cnt - 1]! += c;
    tokens[cnt - 1]! += last;
    if (c >= denseMin) {
      big[i] = 1;
      bigSeq.push(seq);
      bigLen.push(len);
    }
  }
  let run = 0;
  for (let i = parts - 1; i >= 0; i--) {
    run += tokDiff[i + 1]!;
    tokens[i]! += run;
  }
  // c-groups.
  const order = Array.from({ length: n }, (_, i) => i)
    .filter((i) => big[i] === 0)
    .sort((x, y) => cs[x]! - cs[y]! || fullUpTo[x]! - fullUpTo[y]!);
  const groupC: number[] = [];
  const groupFull: Int32Array[] = [];
  for (let i = 0; i < order.length; ) {
    let j = i;
    while (j < order.length && cs[order[j]!] === cs[order[i]!]) j++;
    groupC.push(cs[order[i]!]!);
    const f = new Int32Array(j - i);
    for (let k = i; k < j; k++) f[k - i] = fullUpTo[order[k]!]!;
    groupFull.push(f.filter((v) => v >= 0));
    i = j;
  }
  // Buckets by last part index.
  const bucket = (want: number): { off: Int32Array; len: Int32Array } => {
    const off = new Int32Array(parts + 1);
    for (let i = 0; i < n; i++) if (!big[i] && shortLast[i] === want) off[lastIdx[i]! + 1]!++;
    for (let t = 0; t < parts; t++) off[t + 1]! += off[t]!;
    const pos = off.slice(0, parts);
    const out = new Int32Array(off[parts]!);
    for (let i = 0; i < n; i++) if (!big[i] && shortLast[i] === want) out[pos[lastIdx[i]!]!++] = lens[i]!;
    return { off, len: out };
  };
  const tr = bucket(1);
  const fl = bucket(0);
  return {
    parts,
    groupC: Int32Array.from(groupC),
    groupFull,
    truncOff: tr.off,
    truncLen: tr.len,
    fullOff: fl.off,
    fullLen: fl.len,
    bigSeq: Int32Array.from(bigSeq),
    bigLen: Int32Array.from(bigLen),
    tokens,
    suffix: new Map(),
  };
}

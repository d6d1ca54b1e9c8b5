/**
 * Costing compact chunk rows without expanding them (docs/plan-format.md, "Compact chunk rows").
 *
 * A chunk row stands for the same row for every sequence of its set; part i of P of a sequence of
 * (padded) length L is tokens [i*c, min((i+1)*c, L)) with c = ceil(L/P). Where the set records
 * `padTo`, every sequence counts as padded to a multiple of it (TE computes and sends its padding:
 * charged as time, never as useful FLOPs).
 *
 * A sequence's parts are [c, ..., c, last, 0, ...]. A chunk task (query part a, key part b) is a
 * c x c piece (causal on the diagonal, full below it) for every sequence whose parts up to
 * max(a, b) are full ("regular"); the sequences whose short last part is part max(a, b) are cut
 * into pieces one by one, exactly as their expansion would be. Per (set, P) an index groups the
 * sequences by part size c: regular varlen costs are summed into suffix arrays over the threshold
 * max(a, b), so a chunk task costs O(1) plus its irregular sequences plus the few c-groups whose
 * pieces run dense (c >= 512 under the `auto` policy).
 */
import { nonEmptyParts, partSize } from '../plan/parts.ts';
import type { Plan } from '../plan/types.ts';
import type { Direction, KernelModel } from './kernel.ts';
import { type OpCost, tiles } from './op-cost.ts';
import { decompose } from './pieces.ts';

/** Sequences of one (set, P), grouped for costing. */
interface PartIndex {
  parts: number;
  /** Distinct part sizes, ascending, and per group the sorted "full up to" part indices. */
  groupC: Int32Array;
  groupFull: Int32Array[];
  /** Sequences whose last part is short (last < c), by that part's index t (CSR): padded lengths. */
  truncOff: Int32Array;
  truncLen: Int32Array;
  /** Tokens of part i summed over the set (padded). */
  tokens: Float64Array;
  /** First c-group whose piece runs dense, for [visible, diagonal] pieces. */
  firstDense: [number, number];
  /** Regular varlen suffix sums by key (diagonal, dir). */
  suffix: Map<number, Suffix>;
}

/**
 * Suffix sums over the threshold m of the regular sequences' varlen pieces, per mask kind
 * [full, causal]: milliseconds, segments, query and key tiles; and the largest part size present.
 */
interface Suffix {
  ms: [Float64Array, Float64Array];
  segments: [Float64Array, Float64Array];
  tiles: [Float64Array, Float64Array];
  /** Largest piece side present. */
  maxC: [Int32Array, Int32Array];
}

/** Chunk-row coster of one plan. */
export class ChunkCoster {
  private readonly index = new Map<number, PartIndex>();
  private readonly causal: boolean;

  /** `padding: false` ignores the sets' `padTo` (what a runtime that does not pad executes). */
  constructor(
    private readonly plan: Plan,
    private readonly kernel: KernelModel,
    private readonly padding = true,
  ) {
    this.causal = plan.mask === 'causal';
  }

  /** Tokens of part `part` of `parts` summed over the sequences of `set` (padding included). */
  partTokens(set: number, parts: number, part: number): number {
    const ix = this.partIndex(set, parts);
    return part >= 0 && part < ix.parts ? ix.tokens[part]! : 0;
  }

  /** Adds to `op`, for every sequence of `set`, the queries of part `a` against the keys of part `b`. */
  addTask(op: OpCost, dir: Direction, set: number, parts: number, a: number, b: number): void {
    if (this.causal && b > a) return; // entirely masked
    const ix = this.partIndex(set, parts);
    const m = Math.max(a, b);
    if (m >= ix.parts) return;
    const diag = this.causal && a === b;
    // Regular sequences: varlen c-groups through the suffix arrays, dense c-groups one by one.
    const sfx = this.suffix(ix, dir, diag);
    for (const kind of [0, 1] as const) {
      const n = sfx.segments[kind][m]!;
      // Regular pieces are c x c (a 1 x 1 diagonal piece is full): query and key tiles are equal.
      if (n > 0)
        op.addVarlen(
          sfx.ms[kind][m]!,
          kind === 1,
          n,
          sfx.tiles[kind][m]!,
          sfx.tiles[kind][m]!,
          sfx.maxC[kind][m]!,
          sfx.maxC[kind][m]!,
        );
    }
    for (let g = ix.firstDense[diag ? 1 : 0]; g < ix.groupC.length; g++) {
      const cnt = countAtLeast(ix.groupFull[g]!, m);
      if (cnt === 0) continue;
      const c = ix.groupC[g]!;
      this.regularPiece(c, diag, (lq, lk, causal) => op.addPiece(lq, lk, causal, cnt));
    }
    // Irregular: the sequences whose short last part is part m, cut one by one.
    for (let i = ix.truncOff[m]!; i < ix.truncOff[m + 1]!; i++) {
      const len = ix.truncLen[i]!;
      const c = partSize(len, parts);
      const qs = a * c;
      const ks = b * c;
      op.addTask(qs, Math.min(c, len - qs), ks, Math.min(c, len - ks));
    }
  }

  /** The piece(s) of a c x c part pair: a causal square on the diagonal, a full square below it. */
  private regularPiece(
    c: number,
    diag: boolean,
    emit: (lq: number, lk: number, causal: boolean) => void,
  ): void {
    if (diag) decompose(true, this.kernel.pieceMode, 0, c, 0, c, emit);
    else emit(c, c, false);
  }

  private suffix(ix: PartIndex, dir: Direction, diag: boolean): Suffix {
    const key = (diag ? 2 : 0) + (dir === 'forward' ? 0 : 1);
    let s = ix.suffix.get(key);
    if (s) return s;
    const len = ix.parts + 1;
    s = {
      ms: [new Float64Array(len), new Float64Array(len)],
      segments: [new Float64Array(len), new Float64Array(len)],
      tiles: [new Float64Array(len), new Float64Array(len)],
      maxC: [new Int32Array(len), new Int32Array(len)],
    };
    const k = this.kernel;
    const end = ix.firstDense[diag ? 1 : 0];
    const cost = [0, 0];
    const count = [0, 0];
    const tileCount = [0, 0];
    const side = [0, 0];
    for (let g = 0; g < end; g++) {
      const c = ix.groupC[g]!;
      cost[0] = cost[1] = count[0] = count[1] = tileCount[0] = tileCount[1] = side[0] = side[1] = 0;
      this.regularPiece(c, diag, (lq, lk, causal) => {
        const kind = causal ? 1 : 0;
        cost[kind]! += k.varlenMs(dir, lq, lk, causal);
        count[kind]!++;
        tileCount[kind]! += tiles(lq);
        side[kind] = Math.max(side[kind]!, lq, lk);
      });
      const full = ix.groupFull[g]!;
      for (const v of full)
        for (const kind of [0, 1] as const) {
          s.ms[kind][v]! += cost[kind]!;
          s.segments[kind][v]! += count[kind]!;
          s.tiles[kind][v]! += tileCount[kind]!;
        }
      if (full.length > 0) {
        const top = full[full.length - 1]!;
        for (const kind of [0, 1] as const)
          if (side[kind]! > s.maxC[kind][top]!) s.maxC[kind][top] = side[kind]!;
      }
    }
    for (let i = ix.parts - 1; i >= 0; i--) {
      for (const kind of [0, 1] as const) {
        s.ms[kind][i]! += s.ms[kind][i + 1]!;
        s.segments[kind][i]! += s.segments[kind][i + 1]!;
        s.tiles[kind][i]! += s.tiles[kind][i + 1]!;
      }
      for (const kind of [0, 1] as const)
        if (s.maxC[kind][i + 1]! > s.maxC[kind][i]!) s.maxC[kind][i] = s.maxC[kind][i + 1]!;
    }
    ix.suffix.set(key, s);
    return s;
  }

  private partIndex(set: number, parts: number): PartIndex {
    const key = set * 1048576 + parts;
    let ix = this.index.get(key);
    if (!ix) {
      ix = buildIndex(this.plan, set, parts, this.padding, (c, diag) => {
        let dense = true;
        this.regularPiece(c, diag, (lq, lk, causal) => {
          if (!this.kernel.isDense(lq, lk, causal)) dense = false;
        });
        return dense;
      });
      this.index.set(key, ix);
    }
    return ix;
  }
}

/** Number of values >= m in a sorted array. */
function countAtLeast(sorted: Int32Array, m: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! >= m) hi = mid;
    else lo = mid + 1;
  }
  return sorted.length - lo;
}

/** Padded length of a sequence in a set padded to a multiple of padTo (0: none). */
export function paddedLength(len: number, padTo: number): number {
  return padTo > 1 ? Math.ceil(len / padTo) * padTo : len;
}

function buildIndex(
  plan: Plan,
  set: number,
  parts: number,
  padding: boolean,
  isDense: (c: number, diag: boolean) => boolean,
): PartIndex {
  const sets = plan.seqSets!;
  const padTo = padding ? (sets.padTo?.[set] ?? 0) : 0;
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
  for (let i = 0; i < n; i++) {
    const len = paddedLength(plan.sequences[sets.seqs[from + i]!]!, padTo);
    const c = partSize(len, parts);
    const cnt = nonEmptyParts(len, parts); // <= parts
    const last = len - (cnt - 1) * c;
    lens[i] = len;
    cs[i] = c;
    lastIdx[i] = cnt - 1;
    shortLast[i] = last < c ? 1 : 0;
    fullUpTo[i] = last < c ? cnt - 2 : cnt - 1;
    // tokens: c on parts 0..cnt-2, last on cnt-1.
    tokDiff[cnt - 1]! += c;
    tokens[cnt - 1]! += last;
  }
  let run = 0;
  for (let i = parts - 1; i >= 0; i--) {
    run += tokDiff[i + 1]!;
    tokens[i]! += run;
  }
  // c-groups, ascending c; "full up to" sorted within each.
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (x, y) => cs[x]! - cs[y]! || fullUpTo[x]! - fullUpTo[y]!,
  );
  const groupC: number[] = [];
  const groupFull: Int32Array[] = [];
  for (let i = 0; i < order.length; ) {
    let j = i;
    while (j < order.length && cs[order[j]!] === cs[order[i]!]) j++;
    groupC.push(cs[order[i]!]!);
    const f: number[] = [];
    for (let k = i; k < j; k++) if (fullUpTo[order[k]!]! >= 0) f.push(fullUpTo[order[k]!]!);
    groupFull.push(Int32Array.from(f));
    i = j;
  }
  // Dense pieces form a suffix of the c-groups (the policy's threshold is on the side).
  const firstDense: [number, number] = [groupC.length, groupC.length];
  for (const d of [0, 1] as const)
    while (firstDense[d] > 0 && isDense(groupC[firstDense[d] - 1]!, d === 1)) firstDense[d]--;
  // Sequences with a short last part, by its index.
  const truncOff = new Int32Array(parts + 1);
  for (let i = 0; i < n; i++) if (shortLast[i]) truncOff[lastIdx[i]! + 1]!++;
  for (let t = 0; t < parts; t++) truncOff[t + 1]! += truncOff[t]!;
  const pos = truncOff.slice(0, parts);
  const truncLen = new Int32Array(truncOff[parts]!);
  for (let i = 0; i < n; i++) if (shortLast[i]) truncLen[pos[lastIdx[i]!]!++] = lens[i]!;
  return {
    parts,
    groupC: Int32Array.from(groupC),
    groupFull,
    truncOff,
    truncLen,
    tokens,
    firstDense,
    suffix: new Map(),
  };
}

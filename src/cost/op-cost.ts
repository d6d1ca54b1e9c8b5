/**
 * Time of one compute op (one launch group on one rank) from its tasks, following the kernel model:
 *
 * 1. Equal square blocks (lq = lk; a causal diagonal block or a fully visible block) are dense
 *    candidates, bucketed by (side, causal). A bucket runs as one dense batched launch when that is
 *    cheaper than running its blocks on the varlen path (policy `auto`).
 * 2. Everything else goes to one varlen launch. Tasks of the same query range merge into one segment
 *    with their keys laid out contiguously (DESIGN.md, component 3): fully visible keys in any
 *    order, then the diagonal piece, causal bottom-right aligned (see {@link OpCost.mergedPoolMs}).
 *
 * Chunk-row work arrives pre-costed (see chunks.ts) as varlen milliseconds plus dense candidates.
 */
import type { Direction, KernelModel, SegmentShape } from './kernel.ts';
import { segmentShape } from './kernel.ts';

/** Reusable accumulator: `reset`, add work, `finish` for the op's milliseconds. */
export class OpCost {
  private readonly causal: boolean;
  private dir: Direction = 'forward';
  // Varlen pool of explicit task geometry.
  private seq: Int32Array = new Int32Array(64);
  private qs: Int32Array = new Int32Array(64);
  private ql: Int32Array = new Int32Array(64);
  private ks: Int32Array = new Int32Array(64);
  private kl: Int32Array = new Int32Array(64);
  private n = 0;
  private order: number[] = [];
  private varlenMs = 0;
  private varlenUsed = false;
  /** Dense candidates: key side*2+causal -> count. */
  private readonly dense = new Map<number, number>();
  private readonly shape: SegmentShape = { lq: 0, lk: 0, causal: false, pairs: 0 };

  constructor(
    private readonly kernel: KernelModel,
    mask: 'causal' | 'full',
  ) {
    this.causal = mask === 'causal';
  }

  /** Starts a new op. */
  reset(dir: Direction): void {
    this.dir = dir;
    this.n = 0;
    this.varlenMs = 0;
    this.varlenUsed = false;
    this.dense.clear();
  }

  /** Adds an explicit task (queries [qs, qs+ql) against keys [ks, ks+kl) of sequence `seq`). */
  addTask(seq: number, qs: number, ql: number, ks: number, kl: number): void {
    if (ql <= 0 || kl <= 0) return;
    if (ql === kl && this.kernel.policy !== 'varlen') {
      const diag = this.causal && qs === ks;
      const visible = !this.causal || ks + kl - 1 <= qs;
      if ((diag || visible) && this.kernel.denseEfficiency(this.dir, ql, diag) > 0) {
        this.addDense(ql, diag, 1);
        return;
      }
    }
    if (this.n === this.seq.length) this.grow();
    const i = this.n++;
    this.seq[i] = seq;
    this.qs[i] = qs;
    this.ql[i] = ql;
    this.ks[i] = ks;
    this.kl[i] = kl;
  }

  /** Adds varlen work already costed (ms without launch overhead). */
  addVarlenMs(ms: number): void {
    if (ms > 0) {
      this.varlenMs += ms;
      this.varlenUsed = true;
    }
  }

  /** Adds `count` dense-candidate squares of side `l`. */
  addDense(l: number, causal: boolean, count: number): void {
    const key = l * 2 + (causal ? 1 : 0);
    this.dense.set(key, (this.dense.get(key) ?? 0) + count);
  }

  /** The op's time in ms (launch overheads included). */
  finish(): number {
    const k = this.kernel;
    const dir = this.dir;
    let total = 0;
    for (const [key, count] of this.dense) {
      const l = Math.floor(key / 2);
      const causal = key % 2 === 1;
      const pairs = causal ? (l * (l + 1)) / 2 : l * l;
      const asVarlen = count * k.varlenMs(dir, l, l, causal, pairs);
      const asDense = k.denseMs(dir, l, causal, count) + k.launchMs(dir);
      if (asDense < asVarlen) total += asDense;
      else {
        this.varlenMs += asVarlen;
        this.varlenUsed = true;
      }
    }
    if (this.n > 0) {
      this.varlenMs += this.mergedPoolMs();
      this.varlenUsed = true;
    }
    if (this.varlenUsed) total += this.varlenMs + k.launchMs(dir);
    return total;
  }

  /**
   * Varlen time of the explicit pool. Per query range: every fully visible key piece (all keys at or
   * before the first query) joins one segment whatever its position, since full attention does not
   * depend on key order; other pieces merge while contiguous; a merged piece that ends at the last
   * query and starts at or before the first (the diagonal) is appended after the visible keys, so
   * the whole is one bottom-right aligned causal segment.
   */
  private mergedPoolMs(): number {
    const { seq, qs, ql, ks, kl } = this;
    const causal = this.causal;
    const order = this.order;
    order.length = this.n;
    for (let i = 0; i < this.n; i++) order[i] = i;
    order.sort((a, b) => seq[a]! - seq[b]! || qs[a]! - qs[b]! || ql[a]! - ql[b]! || ks[a]! - ks[b]!);
    let ms = 0;
    const sh = this.shape;
    const k = this.kernel;
    const dir = this.dir;
    for (let i = 0; i < order.length; ) {
      const first = order[i]!;
      const q0 = qs[first]!;
      const qn = ql[first]!;
      const qe = q0 + qn;
      let j = i;
      while (j < order.length) {
        const b = order[j]!;
        if (seq[b] !== seq[first] || qs[b] !== q0 || ql[b] !== qn) break;
        j++;
      }
      // Tasks i..j-1 share the query range; sorted by key start.
      let visible = 0;
      for (let x = i; x < j; x++) {
        const t = order[x]!;
        if (!causal || ks[t]! + kl[t]! - 1 <= q0) visible += kl[t]!;
      }
      let joined = visible === 0;
      for (let x = i; x < j; ) {
        const t = order[x]!;
        if (!causal || ks[t]! + kl[t]! - 1 <= q0) {
          x++;
          continue;
        }
        const k0 = ks[t]!;
        let k1 = k0 + kl[t]!;
        let y = x + 1;
        while (y < j && ks[order[y]!] === k1) {
          k1 += kl[order[y]!]!;
          y++;
        }
        segmentShape(true, q0, qn, k0, k1 - k0, sh);
        if (!joined && k0 <= q0 && k1 >= qe && sh.pairs > 0) {
          // The diagonal run after all visible keys: one bottom-right causal segment.
          ms += k.varlenMs(dir, qn, visible + sh.lk, true, qn * visible + sh.pairs);
          joined = true;
        } else ms += k.varlenMs(dir, sh.lq, sh.lk, sh.causal, sh.pairs);
        x = y;
      }
      if (!joined) ms += k.varlenMs(dir, qn, visible, false, qn * visible);
      i = j;
    }
    return ms;
  }

  private grow(): void {
    const g = (a: Int32Array): Int32Array => {
      const b = new Int32Array(a.length * 2);
      b.set(a);
      return b;
    };
    this.seq = g(this.seq);
    this.qs = g(this.qs);
    this.ql = g(this.ql);
    this.ks = g(this.ks);
    this.kl = g(this.kl);
  }
}

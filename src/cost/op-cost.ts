/**
 * Time of one compute op (one launch group on one rank) from its tasks, following the kernel model:
 *
 * 1. Equal square blocks (lq = lk; a causal diagonal block or a fully visible block) are dense
 *    candidates, bucketed by (side, causal). A bucket runs as one dense batched launch when that is
 *    cheaper than running its blocks on the varlen path (policy `auto`).
 * 2. Everything else goes to one varlen launch: tasks with the same query range and contiguous key
 *    ranges merge into one segment (keys laid out contiguously, causal bottom-right aligned).
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
    if (ql === kl && this.kernel.policy === 'auto') {
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

  /** Varlen time of the explicit pool, tasks merged per query range over contiguous keys. */
  private mergedPoolMs(): number {
    const { seq, qs, ql, ks, kl } = this;
    const order = this.order;
    order.length = this.n;
    for (let i = 0; i < this.n; i++) order[i] = i;
    order.sort((a, b) => seq[a]! - seq[b]! || qs[a]! - qs[b]! || ql[a]! - ql[b]! || ks[a]! - ks[b]!);
    let ms = 0;
    let i = 0;
    const sh = this.shape;
    while (i < order.length) {
      const a = order[i]!;
      const k0 = ks[a]!;
      let k1 = k0 + kl[a]!;
      let j = i + 1;
      while (j < order.length) {
        const b = order[j]!;
        if (seq[b] !== seq[a] || qs[b] !== qs[a] || ql[b] !== ql[a] || ks[b] !== k1) break;
        k1 += kl[b]!;
        j++;
      }
      segmentShape(this.causal, qs[a]!, ql[a]!, k0, k1 - k0, sh);
      ms += this.kernel.varlenMs(this.dir, sh.lq, sh.lk, sh.causal, sh.pairs);
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

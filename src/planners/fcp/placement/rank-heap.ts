/**
 * An indexed binary min-heap of ranks keyed by a caller-owned Float64Array, for the distributor's
 * O(log N) "least loaded rank" queries. After the caller changes key[r], `increased(r)` (keys that
 * only grew, one sift-down) or `update(r)` (either way) restores the order. A rank can be retired for good by
 * setting its key to +Infinity: it sinks and searches stop when they reach it.
 */
export class RankHeap {
  private readonly heap: Int32Array;
  private readonly pos: Int32Array;
  private readonly frontier: number[] = [];

  constructor(
    private readonly key: Float64Array,
    n: number,
  ) {
    this.heap = new Int32Array(n);
    this.pos = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      this.heap[i] = i;
      this.pos[i] = i;
    }
    for (let i = (n >> 1) - 1; i >= 0; i--) this.increased(this.heap[i]!);
  }

  /** Heap order: smaller key first, then lower rank (deterministic ties). */
  private less(a: number, b: number): boolean {
    const ka = this.key[a]!;
    const kb = this.key[b]!;
    return ka < kb || (ka === kb && a < b);
  }

  /** Restores the heap after key[r] increased (sift down). */
  increased(r: number): void {
    const h = this.heap;
    const n = h.length;
    let i = this.pos[r]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let c = l;
      if (l + 1 < n && this.less(h[l + 1]!, h[l]!)) c = l + 1;
      if (!this.less(h[c]!, r)) break;
      h[i] = h[c]!;
      this.pos[h[i]!] = i;
      i = c;
    }
    h[i] = r;
    this.pos[r] = i;
  }

  /** Restores the heap after key[r] changed either way. */
  update(r: number): void {
    const h = this.heap;
    let i = this.pos[r]!;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.less(r, h[up]!)) break;
      h[i] = h[up]!;
      this.pos[h[i]!] = i;
      i = up;
    }
    h[i] = r;
    this.pos[r] = i;
    this.increased(r);
  }

  /** The rank with the smallest key. */
  top(): number {
    return this.heap[0]!;
  }

  /**
   * Appends to `out` up to `k` ranks for which `ok` holds, in key order, skipping retired ranks.
   * Best-first search over heap positions with a small second heap (a node's key is never below
   * its parent's), so it costs O(visited · log visited).
   */
  smallest(k: number, ok: (r: number) => boolean, out: number[]): void {
    const h = this.heap;
    if (h.length === 0 || k <= 0) return;
    const f = this.frontier;
    f.length = 0;
    f.push(0);
    let found = 0;
    while (f.length > 0 && found < k) {
      const p = this.popFrontier();
      const r = h[p]!;
      if (this.key[r] === Number.POSITIVE_INFINITY) break; // only retired ranks remain
      if (ok(r)) {
        out.push(r);
        found++;
      }
      if (2 * p + 1 < h.length) this.pushFrontier(2 * p + 1);
      if (2 * p + 2 < h.length) this.pushFrontier(2 * p + 2);
    }
  }

  private lessPos(a: number, b: number): boolean {
    return this.less(this.heap[a]!, this.heap[b]!);
  }

  private pushFrontier(p: number): void {
    const f = this.frontier;
    let i = f.length;
    f.push(p);
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.lessPos(f[i]!, f[up]!)) break;
      const t = f[i]!;
      f[i] = f[up]!;
      f[up] = t;
      i = up;
    }
  }

  private popFrontier(): number {
    const f = this.frontier;
    const top = f[0]!;
    const last = f.pop()!;
    if (f.length > 0) {
      f[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= f.length) break;
        let c = l;
        if (l + 1 < f.length && this.lessPos(f[l + 1]!, f[l]!)) c = l + 1;
        if (!this.lessPos(f[c]!, f[i]!)) break;
        const t = f[i]!;
        f[i] = f[c]!;
        f[c] = t;
        i = c;
      }
    }
    return top;
  }
}

/**
 * A binary min-heap of (key, id) pairs on typed arrays, ordered by key then id, so that ties
 * always break towards the lower id (deterministic greedy placement: least-loaded rank first).
 */
export class MinHeap {
  private readonly keys: Float64Array;
  private readonly ids: Int32Array;
  private n = 0;

  constructor(capacity: number) {
    this.keys = new Float64Array(Math.max(1, capacity));
    this.ids = new Int32Array(Math.max(1, capacity));
  }

  get size(): number {
    return this.n;
  }

  /** Adds `id` with `key`. */
  push(key: number, id: number): void {
    let i = this.n++;
    this.keys[i] = key;
    this.ids[i] = id;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** Key of the top entry. */
  peekKey(): number {
    return this.keys[0]!;
  }

  /** Removes and returns the id with the least (key, id). */
  pop(): number {
    const top = this.ids[0]!;
    this.n--;
    if (this.n > 0) {
      this.keys[0] = this.keys[this.n]!;
      this.ids[0] = this.ids[this.n]!;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.n && this.less(l, m)) m = l;
        if (r < this.n && this.less(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }

  private less(a: number, b: number): boolean {
    const ka = this.keys[a]!;
    const kb = this.keys[b]!;
    return ka < kb || (ka === kb && this.ids[a]! < this.ids[b]!);
  }

  private swap(a: number, b: number): void {
    const k = this.keys[a]!;
    this.keys[a] = this.keys[b]!;
    this.keys[b] = k;
    const d = this.ids[a]!;
    this.ids[a] = this.ids[b]!;
    this.ids[b] = d;
  }
}

/**
 * Max-heap of ranks by load with lazy deletion, shared by the greedy balancers of `kv` senders
 * (forward-tree.ts, same-slot.ts): each pops the busiest rank, moves some of its load, and pushes
 * it back with its new load; entries whose load has moved since are skipped.
 */
/** A max-heap of ranks by load with lazy deletion (an entry is stale when the load moved). */
export class LoadHeap {
  private readonly key: number[] = [];
  private readonly rank: number[] = [];
  private readonly top = new Float64Array(1);

  /** A heap of the ranks whose load is above `target`. */
  static above(load: Float64Array, target: number): LoadHeap {
    const h = new LoadHeap();
    for (let r = 0; r < load.length; r++) if (load[r]! > target) h.push(load[r]!, r);
    return h;
  }

  /**
   * The busiest rank by its current `load` (stale entries skipped; ties: the lowest id), or -1 when
   * none is left or the busiest is at or below `target` (the greedy loops' stop).
   */
  popAbove(load: Float64Array, target: number): number {
    for (;;) {
      const s = this.pop(this.top);
      if (s < 0) return -1;
      if (this.top[0] !== load[s]) continue; // stale
      return load[s]! > target ? s : -1;
    }
  }

  push(load: number, r: number): void {
    const k = this.key;
    const v = this.rank;
    let i = k.length;
    k.push(load);
    v.push(r);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (k[p]! > load || (k[p] === load && v[p]! < r)) break;
      k[i] = k[p]!;
      v[i] = v[p]!;
      i = p;
    }
    k[i] = load;
    v[i] = r;
  }

  /** Pops the top entry (-1 when empty); `out[0]` gets its load. */
  pop(out: Float64Array): number {
    const k = this.key;
    const v = this.rank;
    if (k.length === 0) return -1;
    const top = v[0]!;
    out[0] = k[0]!;
    const lk = k.pop()!;
    const lv = v.pop()!;
    const n = k.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const a = 2 * i + 1;
        if (a >= n) break;
        const b = a + 1;
        const c = b < n && (k[b]! > k[a]! || (k[b] === k[a] && v[b]! < v[a]!)) ? b : a;
        if (k[c]! < lk || (k[c] === lk && v[c]! > lv)) break;
        k[i] = k[c]!;
        v[i] = v[c]!;
        i = c;
      }
      k[i] = lk;
      v[i] = lv;
    }
    return top;
  }
}

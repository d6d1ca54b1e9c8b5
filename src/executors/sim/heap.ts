/**
 * Binary min-heap of simulator events on parallel typed arrays. Order: time, then key (an integer
 * encoding event type and id), so that simultaneous events always pop in the same order.
 */
export class EventHeap {
  private time: Float64Array;
  private key: Float64Array;
  private ver: Int32Array;
  private n = 0;

  constructor(capacity = 1024) {
    this.time = new Float64Array(capacity);
    this.key = new Float64Array(capacity);
    this.ver = new Int32Array(capacity);
  }

  get size(): number {
    return this.n;
  }

  /** Time of the earliest event (Infinity when empty). */
  peekTime(): number {
    return this.n > 0 ? this.time[0]! : Number.POSITIVE_INFINITY;
  }

  push(t: number, key: number, version: number): void {
    if (this.n === this.time.length) this.grow();
    let i = this.n++;
    const time = this.time;
    const keys = this.key;
    const ver = this.ver;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pt = time[p]!;
      if (pt < t || (pt === t && keys[p]! <= key)) break;
      time[i] = pt;
      keys[i] = keys[p]!;
      ver[i] = ver[p]!;
      i = p;
    }
    time[i] = t;
    keys[i] = key;
    ver[i] = version;
  }

  /** Removes the earliest event; its fields are then in {@link popped}. */
  pop(): void {
    const time = this.time;
    const keys = this.key;
    const ver = this.ver;
    this.popped.time = time[0]!;
    this.popped.key = keys[0]!;
    this.popped.version = ver[0]!;
    const n = --this.n;
    if (n === 0) return;
    const t = time[n]!;
    const k = keys[n]!;
    const v = ver[n]!;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let c = l;
      const r = l + 1;
      if (r < n && (time[r]! < time[l]! || (time[r] === time[l] && keys[r]! < keys[l]!))) c = r;
      if (time[c]! > t || (time[c] === t && keys[c]! >= k)) break;
      time[i] = time[c]!;
      keys[i] = keys[c]!;
      ver[i] = ver[c]!;
      i = c;
    }
    time[i] = t;
    keys[i] = k;
    ver[i] = v;
  }

  /** Fields of the last popped event. */
  readonly popped = { time: 0, key: 0, version: 0 };

  private grow(): void {
    const cap = this.time.length * 2;
    const t = new Float64Array(cap);
    t.set(this.time);
    const k = new Float64Array(cap);
    k.set(this.key);
    const v = new Int32Array(cap);
    v.set(this.ver);
    this.time = t;
    this.key = k;
    this.ver = v;
  }
}

/**
 * Indexed min-heap of at most one pending time per item (flow ends): setting an item's time again
 * moves it, so a rate change never leaves a stale entry behind. Ties by item id.
 */
export class IndexedHeap {
  private readonly items: Int32Array;
  private readonly pos: Int32Array;
  private readonly time: Float64Array;
  private n = 0;

  constructor(capacity: number) {
    this.items = new Int32Array(capacity);
    this.pos = new Int32Array(capacity).fill(-1);
    this.time = new Float64Array(capacity);
  }

  get size(): number {
    return this.n;
  }

  /** Earliest time (Infinity when empty). */
  peekTime(): number {
    return this.n > 0 ? this.time[this.items[0]!]! : Number.POSITIVE_INFINITY;
  }

  /** Item with the earliest time (-1 when empty). */
  peekItem(): number {
    return this.n > 0 ? this.items[0]! : -1;
  }

  /** Sets (inserts or moves) the pending time of `item`. */
  set(item: number, t: number): void {
    let i = this.pos[item]!;
    if (i < 0) {
      i = this.n++;
      this.items[i] = item;
      this.pos[item] = i;
      this.time[item] = t;
      this.up(i);
      return;
    }
    const old = this.time[item]!;
    this.time[item] = t;
    if (t < old) this.up(i);
    else if (t > old) this.down(i);
  }

  /** Removes `item` if pending. */
  remove(item: number): void {
    const i = this.pos[item]!;
    if (i < 0) return;
    this.pos[item] = -1;
    const last = this.items[--this.n]!;
    if (i === this.n) return;
    this.items[i] = last;
    this.pos[last] = i;
    this.up(i);
    this.down(this.pos[last]!);
  }

  private less(a: number, b: number): boolean {
    const ta = this.time[a]!;
    const tb = this.time[b]!;
    return ta < tb || (ta === tb && a < b);
  }

  private up(i: number): void {
    const items = this.items;
    const item = items[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pi = items[p]!;
      if (!this.less(item, pi)) break;
      items[i] = pi;
      this.pos[pi] = i;
      i = p;
    }
    items[i] = item;
    this.pos[item] = i;
  }

  private down(i: number): void {
    const items = this.items;
    const n = this.n;
    const item = items[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let c = l;
      if (l + 1 < n && this.less(items[l + 1]!, items[l]!)) c = l + 1;
      const ci = items[c]!;
      if (!this.less(ci, item)) break;
      items[i] = ci;
      this.pos[ci] = i;
      i = c;
    }
    items[i] = item;
    this.pos[item] = i;
  }
}

/**
 * Dense ids of integer triples (a, b, c), numbered by first use: open addressing over typed arrays,
 * doubled when half full. The planners' hot paths key small tables by two or three int32s (a range
 * by sequence and start, a relay group by sequence, start and node, a kernel piece by its sides and
 * flags); a Map keyed by a combined number above 2^31 or by a template string hashes heap values
 * and was a tenth to a half of those functions' time at 256 ranks. Ids do not depend on the hash
 * or the table's size, so what callers derive from them is the same as with a Map.
 */
export class TripleIds {
  private ka: Int32Array;
  private kb: Int32Array;
  private kc: Int32Array;
  private id: Int32Array;
  private n = 0;

  /** `expected`: about how many triples will be entered (the table starts at twice that, at least 16). */
  constructor(expected = 128) {
    let cap = 16;
    while (cap < 2 * expected) cap *= 2;
    this.ka = new Int32Array(cap);
    this.kb = new Int32Array(cap);
    this.kc = new Int32Array(cap);
    this.id = new Int32Array(cap).fill(-1);
  }

  /** Number of triples entered (the next id). */
  get size(): number {
    return this.n;
  }

  /** Slot of (a, b, c): where it is, or the empty slot where it would go. */
  private slot(a: number, b: number, c: number): number {
    const mask = this.id.length - 1;
    const h0 = (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca77) ^ Math.imul(c + 1, 0xc2b2ae3d)) >>> 0;
    let h = (h0 ^ (h0 >>> 15)) & mask;
    while (this.id[h] !== -1 && (this.ka[h] !== a || this.kb[h] !== b || this.kc[h] !== c))
      h = (h + 1) & mask;
    return h;
  }

  /** Id of (a, b, c), or -1 when it was never entered. */
  get(a: number, b: number, c = 0): number {
    return this.id[this.slot(a, b, c)]!;
  }

  /** Id of (a, b, c): its id, or the next one when it is new. */
  intern(a: number, b: number, c = 0): number {
    const h = this.slot(a, b, c);
    if (this.id[h] !== -1) return this.id[h]!;
    this.ka[h] = a;
    this.kb[h] = b;
    this.kc[h] = c;
    this.id[h] = this.n;
    if (2 * ++this.n > this.id.length) this.grow();
    return this.n - 1;
  }

  /** Forgets every triple (ids start again at 0). */
  clear(): void {
    this.id.fill(-1);
    this.n = 0;
  }

  private grow(): void {
    const [ka, kb, kc, id] = [this.ka, this.kb, this.kc, this.id];
    const cap = 2 * id.length;
    this.ka = new Int32Array(cap);
    this.kb = new Int32Array(cap);
    this.kc = new Int32Array(cap);
    this.id = new Int32Array(cap).fill(-1);
    for (let k = 0; k < id.length; k++) {
      if (id[k] === -1) continue;
      const h = this.slot(ka[k]!, kb[k]!, kc[k]!);
      this.ka[h] = ka[k]!;
      this.kb[h] = kb[k]!;
      this.kc[h] = kc[k]!;
      this.id[h] = id[k]!;
    }
  }
}

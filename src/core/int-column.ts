/**
 * A growable Int32Array: planners append rows without knowing the final count, then freeze the
 * column into an exactly sized Int32Array for the plan.
 */
export class IntColumn {
  private data: Int32Array;
  private n = 0;

  constructor(capacity = 64) {
    this.data = new Int32Array(Math.max(4, capacity));
  }

  get length(): number {
    return this.n;
  }

  push(value: number): void {
    if (this.n === this.data.length) {
      const grown = new Int32Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.n++] = value;
  }

  get(i: number): number {
    return this.data[i]!;
  }

  set(i: number, value: number): void {
    this.data[i] = value;
  }

  /** An exactly sized copy. */
  toArray(): Int32Array {
    return this.data.slice(0, this.n);
  }
}

/** Makes an object of {@link IntColumn}s with the given column names. */
export function intColumns<K extends string>(names: readonly K[]): Record<K, IntColumn> {
  const out = {} as Record<K, IntColumn>;
  for (const name of names) out[name] = new IntColumn();
  return out;
}

/** Freezes an object of {@link IntColumn}s into an object of Int32Arrays. */
export function freezeColumns<K extends string>(cols: Record<K, IntColumn>): Record<K, Int32Array> {
  const out = {} as Record<K, Int32Array>;
  for (const name of Object.keys(cols) as K[]) out[name] = cols[name].toArray();
  return out;
}

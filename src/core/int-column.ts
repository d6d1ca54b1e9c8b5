/** Elements per chunk of an {@link IntColumn} past its first (2^16). */
const CHUNK_BITS = 16;
const CHUNK = 1 << CHUNK_BITS;

/**
 * A growable Int32Array: planners append rows without knowing the final count, then freeze the
 * column into an exactly sized Int32Array for the plan.
 *
 * Storage is chunked: the first chunk doubles up to 2^16 elements, later chunks are 2^16 each, so
 * a column of n elements never copies more than 2^16 of them while growing and allocates about n
 * in all. (Doubling one buffer allocated and copied about 2n: at 4096 ranks the FCP planner's task
 * columns spent 150 ms per plan in those copies and page faults on fresh memory; bench/planner.ts.)
 */
export class IntColumn {
  private readonly chunks: Int32Array[];
  private n = 0;

  constructor(capacity = 64) {
    this.chunks = [new Int32Array(Math.min(CHUNK, Math.max(4, capacity)))];
  }

  get length(): number {
    return this.n;
  }

  push(value: number): void {
    const n = this.n;
    const c = n >>> CHUNK_BITS;
    let chunk = this.chunks[c];
    const at = n & (CHUNK - 1);
    if (chunk === undefined) {
      chunk = new Int32Array(CHUNK);
      this.chunks.push(chunk);
    } else if (at === chunk.length) {
      // Only the first chunk is ever shorter than CHUNK: double it.
      const grown = new Int32Array(Math.min(CHUNK, chunk.length * 2));
      grown.set(chunk);
      this.chunks[0] = chunk = grown;
    }
    chunk[at] = value;
    this.n = n + 1;
  }

  get(i: number): number {
    return this.chunks[i >>> CHUNK_BITS]![i & (CHUNK - 1)]!;
  }

  set(i: number, value: number): void {
    this.chunks[i >>> CHUNK_BITS]![i & (CHUNK - 1)] = value;
  }

  /** An exactly sized copy. */
  toArray(): Int32Array {
    const out = new Int32Array(this.n);
    for (let c = 0, at = 0; at < this.n; c++) {
      const chunk = this.chunks[c]!;
      const take = Math.min(chunk.length, this.n - at);
      out.set(take === chunk.length ? chunk : chunk.subarray(0, take), at);
      at += take;
    }
    return out;
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

/**
 * The transfers of one phase as the planner places them (by placer slot, transfers/groups.ts),
 * before `finishPhase` numbers their rows: fixed chunks of rows of 7 ints, and the direct sender of
 * every transfer that same-slot forwarding handed over (same-slot.ts, `kvOrigin`).
 */
import type { KindCode } from '../../../plan/types.ts';

const ROW_BITS = 16;
/** Rows per chunk of a {@link TransferList} (2^16 rows of 7 ints: 1.75 MiB). */
export const ROWS = 1 << ROW_BITS;

/**
 * Transfers of one phase as they are planned (by placer slot); rows are numbered by `finishPhase`.
 * Rows live in fixed chunks rather than one doubling buffer: at 4096 ranks a phase holds over a
 * million transfers, and regrowing one buffer cost ~120 ms per phase in copies and page faults on
 * fresh memory (bench/planner.ts profile); a chunk keeps a row's 7 fields in one cache line or two.
 */
export class TransferList {
  /** Chunks of rows of 7 ints: slot, src, dst, kind, seq, start, length. */
  private readonly chunks: Int32Array[] = [new Int32Array(7 * 1024)];
  private n = 0;
  /** Direct sender of every transfer handed over (id -> sender before the first {@link setSrc}). */
  private readonly origin = new Map<number, number>();

  /** Adds a transfer; returns its provisional id. */
  add(
    slot: number,
    src: number,
    dst: number,
    kind: KindCode,
    seq: number,
    start: number,
    length: number,
  ): number {
    const n = this.n;
    const c = n >>> ROW_BITS;
    let d = this.chunks[c];
    const o = 7 * (n & (ROWS - 1));
    if (d === undefined) {
      d = new Int32Array(7 * ROWS);
      this.chunks.push(d);
    } else if (o === d.length) {
      // Only the first chunk starts short: double it (up to ROWS rows).
      const grown = new Int32Array(Math.min(7 * ROWS, d.length * 2));
      grown.set(d);
      this.chunks[0] = d = grown;
    }
    d[o] = slot;
    d[o + 1] = src;
    d[o + 2] = dst;
    d[o + 3] = kind;
    d[o + 4] = seq;
    d[o + 5] = start;
    d[o + 6] = length;
    this.n = n + 1;
    return n;
  }

  /** Sets the sender of transfer `i` (same-slot forwarding, same-slot.ts); its first sender is kept as its origin. */
  setSrc(i: number, src: number): void {
    const d = this.chunks[i >>> ROW_BITS]!;
    const o = 7 * (i & (ROWS - 1)) + 1;
    if (!this.origin.has(i)) this.origin.set(i, d[o]!);
    d[o] = src;
  }

  /** Transfers whose sender {@link setSrc} changed, with their first senders (`kvOrigin`). */
  origins(): ReadonlyMap<number, number> {
    return this.origin;
  }

  /** Number of transfers. */
  get size(): number {
    return this.n;
  }

  /**
   * Chunk `c` itself (read it, never write it): sequential passes over every row (the timeline
   * estimate) read it directly rather than through {@link field}. Its first
   * min(size - c * 2^16, 2^16) rows are set.
   */
  chunk(c: number): Int32Array {
    return this.chunks[c]!;
  }

  /** Field `f` (0 slot .. 6 length) of transfer `i`. */
  field(i: number, f: number): number {
    return this.chunks[i >>> ROW_BITS]![7 * (i & (ROWS - 1)) + f]!;
  }

  /**
   * Writes every transfer i to row `rowOf[i]` of the columns (src .. length; `round` from
   * `roundOf[i]`), reading the list in order, chunk by chunk.
   */
  scatter(
    rowOf: Int32Array,
    round: Int32Array,
    roundOf: Int32Array,
    src: Int32Array,
    dst: Int32Array,
    kind: Uint8Array,
    seq: Int32Array,
    start: Int32Array,
    length: Int32Array,
  ): void {
    for (let c = 0, i = 0; i < this.n; c++) {
      const d = this.chunks[c]!;
      const end = Math.min(this.n, i + d.length / 7);
      for (let o = 0; i < end; i++, o += 7) {
        const r = rowOf[i]!;
        round[r] = roundOf[i]!;
        src[r] = d[o + 1]!;
        dst[r] = d[o + 2]!;
        kind[r] = d[o + 3]!;
        seq[r] = d[o + 4]!;
        start[r] = d[o + 5]!;
        length[r] = d[o + 6]!;
      }
    }
  }
}

/**
 * MagiAttention's default dispatch (SandAI-org/MagiAttention v1.1.x, `_make_dispatch_meta.py` and
 * `MinHeapDispatchAlg`; docs/baselines.md):
 * - the packed batch is cut along Q into equal chunks, by default ceil(total / (8N)) tokens
 *   (`MAGI_ATTENTION_MIN_CHUNKS_PER_RANK` = 8); the total is padded so that every rank gets the
 *   same number of chunks (Magi's `pad_size`);
 * - each chunk's workload is its mask area (attended query-key pairs);
 * - chunks are sorted by area, largest first, and each goes to the least-loaded rank that still has
 *   a free slot (equal chunks per rank is a hard constraint: it keeps the non-attention layers
 *   balanced by token count). The objective is compute only.
 */
import { iota } from '../../core/gather.ts';
import { attendedPairs } from '../../model/attention.ts';
import type { Mask } from '../../plan/types.ts';
import { MinHeap } from '../shared/min-heap.ts';

/** Result of {@link magiDispatch}. */
export interface MagiDispatch {
  readonly chunkSize: number;
  /** Number of chunks including padding chunks (a multiple of the world size). */
  readonly chunks: number;
  readonly chunksPerRank: number;
  /** Owner rank of each chunk. */
  readonly owner: Int32Array;
  /** Mask area (attended pairs) of each chunk. */
  readonly area: Float64Array;
  /** Padding tokens Magi adds so that chunks * chunkSize covers the batch. */
  readonly paddingTokens: number;
}

/** Default chunk size: ceil(total / (8N)). */
export const defaultChunkSize = (total: number, world: number): number =>
  Math.max(1, Math.ceil(total / (8 * world)));

/** Cuts the packed batch into chunks and assigns them to ranks (largest area first, equal counts). */
export function magiDispatch(
  sequences: ArrayLike<number>,
  world: number,
  mask: Mask,
  chunkSize?: number,
): MagiDispatch {
  let total = 0;
  for (let i = 0; i < sequences.length; i++) total += sequences[i]!;
  const cs = chunkSize ?? defaultChunkSize(total, world);
  const real = Math.ceil(total / cs);
  const chunks = Math.ceil(real / world) * world;
  const causal = mask === 'causal';
  // Mask area per chunk: walk the packed batch once.
  const area = new Float64Array(chunks);
  let s = 0;
  let seqStart = 0; // packed offset of sequence s
  for (let c = 0; c < real; c++) {
    const lo = c * cs;
    const hi = Math.min(total, lo + cs);
    let a = 0;
    while (s < sequences.length && seqStart + sequences[s]! <= lo) seqStart += sequences[s++]!;
    for (let t = s, off = seqStart; t < sequences.length && off < hi; off += sequences[t++]!) {
      const len = sequences[t]!;
      const qs = Math.max(lo, off) - off;
      const qe = Math.min(hi, off + len) - off;
      a += attendedPairs(causal, qs, qe - qs, 0, len);
    }
    area[c] = a;
  }
  // Largest area first (ties: lower chunk), onto the least-loaded rank with a free slot.
  const order = iota(chunks).sort((x, y) => area[y]! - area[x]! || x - y);
  const perRank = chunks / world;
  const owner = new Int32Array(chunks);
  const count = new Int32Array(world);
  const load = new Float64Array(world);
  const heap = new MinHeap(world);
  for (let r = 0; r < world; r++) heap.push(0, r);
  for (const c of order) {
    const r = heap.pop();
    owner[c] = r;
    load[r]! += area[c]!;
    if (++count[r]! < perRank) heap.push(load[r]!, r);
  }
  return { chunkSize: cs, chunks, chunksPerRank: perRank, owner, area, paddingTokens: chunks * cs - total };
}

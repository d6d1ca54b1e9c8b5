/**
 * Shapes and scratch space shared by the CPU attention kernels.
 *
 * Tensors are row-major [tokens, heads, headDim]: the row of token t, head h starts at
 * (t * heads + h) * headDim. Kernels index sequence-wide buffers by absolute token position, so a
 * task's ranges need no copying. All arithmetic happens in float64 (JavaScript numbers); float32
 * is only a storage format.
 */

/** The attention shape a kernel needs. */
export interface AttentionShape {
  readonly qHeads: number;
  readonly kvHeads: number;
  readonly headDim: number;
}

/** Reusable per-thread scratch buffers; grown outside the kernels' loops, never inside. */
export interface KernelScratch {
  /** One score (or probability) per key of a task; length >= the longest key range. */
  scores: Float64Array;
  /** A query row scaled by 1/sqrt(headDim). */
  qRow: Float64Array;
  /** A dO row. */
  doRow: Float64Array;
  /** An output (O or dQ) accumulator row. */
  acc: Float64Array;
}

/** Scratch for keys ranges up to `maxKeys` and the given head dimension. */
export function createScratch(maxKeys: number, headDim: number): KernelScratch {
  return {
    scores: new Float64Array(Math.max(16, maxKeys)),
    qRow: new Float64Array(headDim),
    doRow: new Float64Array(headDim),
    acc: new Float64Array(headDim),
  };
}

/** Returns `s` if it fits `maxKeys` keys and `headDim`, otherwise a larger scratch. */
export function ensureScratch(s: KernelScratch | undefined, maxKeys: number, headDim: number): KernelScratch {
  if (s && s.scores.length >= maxKeys && s.qRow.length === headDim) return s;
  return createScratch(Math.max(maxKeys, 2 * (s?.scores.length ?? 0)), headDim);
}

/** KV head read by query head `h` (GQA): floor(h * kvHeads / qHeads). */
export function kvHeadOf(shape: AttentionShape, h: number): number {
  return Math.floor((h * shape.kvHeads) / shape.qHeads);
}

/**
 * Keys attended by the query at sequence position `pos` inside [kvStart, kvEnd): causal keeps keys
 * at positions <= pos. Returns the exclusive end (== kvStart when none).
 */
export function keyEnd(causal: boolean, pos: number, kvStart: number, kvEnd: number): number {
  if (!causal) return kvEnd;
  return Math.max(kvStart, Math.min(kvEnd, pos + 1));
}

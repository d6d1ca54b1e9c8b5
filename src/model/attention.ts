/**
 * Attention shapes and the arithmetic every component shares: bytes per token and FLOPs.
 * FLOPs follow docs/plan-format.md: forward 4 * pairs * qHeads * headDim, backward 2.5x forward.
 */
import type { ModelShape } from './shape.ts';

/** Llama-3-70B attention: 64 query heads, 8 KV heads, head dim 128, bf16 (the paper's workload). */
export const LLAMA3_70B: ModelShape = { qHeads: 64, kvHeads: 8, headDim: 128, bytesPerElement: 2 };

/** The small shape the CPU runtime uses by default (GQA exercised: 2 query heads per KV head). */
export const SMALL_MODEL: ModelShape = { qHeads: 4, kvHeads: 2, headDim: 32, bytesPerElement: 4 };

/** Bytes of Q (or O, dQ, dO) for one token. */
export const qBytesPerToken = (m: ModelShape): number => m.qHeads * m.headDim * m.bytesPerElement;
/** Bytes of K plus V (or dK plus dV) for one token. */
export const kvBytesPerToken = (m: ModelShape): number => 2 * m.kvHeads * m.headDim * m.bytesPerElement;
/** Bytes of the log-sum-exp for one token (float32 per query head). */
export const lseBytesPerToken = (m: ModelShape): number => 4 * m.qHeads;

/** Forward FLOPs of `pairs` attended (query, key) pairs. */
export const forwardFlops = (m: ModelShape, pairs: number): number => 4 * pairs * m.qHeads * m.headDim;
/** Backward FLOPs of `pairs` attended pairs (2.5x forward). */
export const backwardFlops = (m: ModelShape, pairs: number): number => 2.5 * forwardFlops(m, pairs);

/**
 * Attended pairs of queries [qs, qs+ql) against keys [ks, ks+kl) of one sequence.
 * Causal: key position <= query position.
 */
export function attendedPairs(causal: boolean, qs: number, ql: number, ks: number, kl: number): number {
  if (ql <= 0 || kl <= 0) return 0;
  if (!causal) return ql * kl;
  // For query q the attended keys are [ks, min(ks+kl, q+1)): count = clamp(q - ks + 1, 0, kl).
  const qe = qs + ql; // exclusive
  const ke = ks + kl;
  let total = 0;
  // Queries below ks attend nothing; from ks to ke-1 the count grows by one; from ke-1 on it is kl.
  const a = Math.max(qs, ks);
  const b = Math.min(qe, ke - 1); // queries in [a, b) attend (q - ks + 1) keys
  if (b > a) total += ((b - a) * (a - ks + 1 + (b - 1 - ks + 1))) / 2;
  const c = Math.max(qs, ke - 1);
  if (qe > c) total += (qe - c) * kl;
  return total;
}

/** Attended pairs of a whole sequence of length `len`. */
export const sequencePairs = (causal: boolean, len: number): number =>
  causal ? (len * (len + 1)) / 2 : len * len;

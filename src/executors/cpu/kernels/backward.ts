/**
 * Backward attention of one task in the FlashAttention style (Dao et al., 2022; FlashAttention-2,
 * Dao, 2023): the probabilities are recomputed from Q, K and the forward log-sum-exp instead of
 * being stored, and D = rowsum(dO ∘ O) replaces the softmax Jacobian's row sums:
 *
 *   P = exp(Q·Kᵀ·scale - LSE),  dP = dO·Vᵀ,  dS = P ∘ (dP - D),
 *   dQ += scale·dS·K,  dK += scale·dSᵀ·Q,  dV += Pᵀ·dO.
 *
 * dQ is accumulated in place for the task's query rows, dK and dV in place for its key rows (the
 * caller owns the partial buffers and moves them with `dkv` transfers). Keys are processed four
 * at a time so that the query, dO and dQ rows feed four keys per load.
 */
import { type AttentionShape, type KernelScratch, keyEnd, kvHeadOf } from './shape.ts';

/**
 * Accumulates the gradients of one task. `q`, `dO`, `o`, `dq` are [tokens, qHeads, headDim],
 * `lse` is [tokens, qHeads], `k`, `v`, `dk`, `dv` are [tokens, kvHeads, headDim], all indexed by
 * absolute token position of the sequence. `o` and `lse` are the final forward results.
 */
export function attentionBackward(
  shape: AttentionShape,
  causal: boolean,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  o: Float64Array,
  lse: Float64Array,
  dO: Float32Array,
  qStart: number,
  qLen: number,
  kvStart: number,
  kvLen: number,
  dq: Float64Array,
  dk: Float64Array,
  dv: Float64Array,
  scratch: KernelScratch,
): void {
  const H = shape.qHeads;
  const G = shape.kvHeads;
  const D = shape.headDim;
  const scale = 1 / Math.sqrt(D);
  const stride = G * D;
  const qr = scratch.qRow;
  const dr = scratch.doRow;
  const acc = scratch.acc;
  const kvEnd = kvStart + kvLen;
  for (let i = 0; i < qLen; i++) {
    const pos = qStart + i;
    const n = keyEnd(causal, pos, kvStart, kvEnd) - kvStart;
    if (n <= 0) continue;
    for (let h = 0; h < H; h++) {
      const g = kvHeadOf(shape, h);
      const qBase = (pos * H + h) * D;
      const rowLse = lse[pos * H + h]!;
      let di = 0; // D_i = rowsum(dO ∘ O)
      for (let d = 0; d < D; d++) {
        qr[d] = q[qBase + d]! * scale;
        const x = dO[qBase + d]!;
        dr[d] = x;
        di += x * o[qBase + d]!;
        acc[d] = 0;
      }
      const kv0 = (kvStart * G + g) * D;
      let j = 0;
      for (; j + 4 <= n; j += 4) {
        const b0 = kv0 + j * stride;
        const b1 = b0 + stride;
        const b2 = b1 + stride;
        const b3 = b2 + stride;
        let s0 = 0;
        let s1 = 0;
        let s2 = 0;
        let s3 = 0;
        let t0 = 0;
        let t1 = 0;
        let t2 = 0;
        let t3 = 0;
        for (let d = 0; d < D; d++) {
          const a = qr[d]!;
          const e = dr[d]!;
          s0 += a * k[b0 + d]!;
          s1 += a * k[b1 + d]!;
          s2 += a * k[b2 + d]!;
          s3 += a * k[b3 + d]!;
          t0 += e * v[b0 + d]!;
          t1 += e * v[b1 + d]!;
          t2 += e * v[b2 + d]!;
          t3 += e * v[b3 + d]!;
        }
        const p0 = Math.exp(s0 - rowLse);
        const p1 = Math.exp(s1 - rowLse);
        const p2 = Math.exp(s2 - rowLse);
        const p3 = Math.exp(s3 - rowLse);
        const g0 = p0 * (t0 - di);
        const g1 = p1 * (t1 - di);
        const g2 = p2 * (t2 - di);
        const g3 = p3 * (t3 - di);
        for (let d = 0; d < D; d++) {
          const a = qr[d]!;
          const e = dr[d]!;
          acc[d]! += g0 * k[b0 + d]! + g1 * k[b1 + d]! + g2 * k[b2 + d]! + g3 * k[b3 + d]!;
          dk[b0 + d]! += g0 * a;
          dk[b1 + d]! += g1 * a;
          dk[b2 + d]! += g2 * a;
          dk[b3 + d]! += g3 * a;
          dv[b0 + d]! += p0 * e;
          dv[b1 + d]! += p1 * e;
          dv[b2 + d]! += p2 * e;
          dv[b3 + d]! += p3 * e;
        }
      }
      for (; j < n; j++) {
        const b = kv0 + j * stride;
        let s = 0;
        let t = 0;
        for (let d = 0; d < D; d++) {
          s += qr[d]! * k[b + d]!;
          t += dr[d]! * v[b + d]!;
        }
        const p = Math.exp(s - rowLse);
        const gs = p * (t - di);
        for (let d = 0; d < D; d++) {
          acc[d]! += gs * k[b + d]!;
          dk[b + d]! += gs * qr[d]!;
          dv[b + d]! += p * dr[d]!;
        }
      }
      // dQ = scale·dS·K; dK already carries the scale through the scaled query row.
      for (let d = 0; d < D; d++) dq[qBase + d]! += acc[d]! * scale;
    }
  }
}

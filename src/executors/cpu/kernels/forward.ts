/**
 * Forward attention of one task: O and log-sum-exp of query rows [qStart, qStart+qLen) against key
 * rows [kvStart, kvStart+kvLen) of one sequence, softmax(Q·Kᵀ·scale + mask)·V per query head.
 *
 * Per (query, head): one pass computes the scores and their maximum, a second pass the
 * exponentials and the weighted sum of V rows (the classic two-pass softmax; the tile fits in
 * cache). Keys are processed four at a time so that every loaded query element feeds four dot
 * products and the loop overhead is amortised; that roughly doubles throughput under V8.
 */
import { type AttentionShape, type KernelScratch, keyEnd, kvHeadOf } from './shape.ts';

/**
 * Writes the task's normalised O rows into `outO` ([qLen, qHeads, headDim], row 0 = query qStart)
 * and its log-sum-exp into `outLse` ([qLen, qHeads]). A row that attends no key (possible only
 * under the causal mask) gets O = 0 and LSE = -Infinity, so that merging ignores it.
 *
 * `q` is [tokens, qHeads, headDim], `k` and `v` are [tokens, kvHeads, headDim], all indexed by the
 * absolute token position of the sequence. `scratch.scores` must hold >= kvLen entries.
 */
export function attentionForward(
  shape: AttentionShape,
  causal: boolean,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  qStart: number,
  qLen: number,
  kvStart: number,
  kvLen: number,
  outO: Float64Array,
  outLse: Float64Array,
  scratch: KernelScratch,
): void {
  const H = shape.qHeads;
  const G = shape.kvHeads;
  const D = shape.headDim;
  const scale = 1 / Math.sqrt(D);
  const stride = G * D; // distance between the rows of consecutive tokens of one KV head
  const s = scratch.scores;
  const qr = scratch.qRow;
  const acc = scratch.acc;
  const kvEnd = kvStart + kvLen;
  for (let i = 0; i < qLen; i++) {
    const pos = qStart + i;
    const end = keyEnd(causal, pos, kvStart, kvEnd);
    const n = end - kvStart;
    for (let h = 0; h < H; h++) {
      const oBase = (i * H + h) * D;
      if (n <= 0) {
        for (let d = 0; d < D; d++) outO[oBase + d] = 0;
        outLse[i * H + h] = Number.NEGATIVE_INFINITY;
        continue;
      }
      const g = kvHeadOf(shape, h);
      const qBase = (pos * H + h) * D;
      for (let d = 0; d < D; d++) qr[d] = q[qBase + d]! * scale;
      const kv0 = (kvStart * G + g) * D;
      // Pass 1: scores and their maximum.
      let m = Number.NEGATIVE_INFINITY;
      let j = 0;
      for (; j + 4 <= n; j += 4) {
        const b = kv0 + j * stride;
        let x0 = 0;
        let x1 = 0;
        let x2 = 0;
        let x3 = 0;
        for (let d = 0; d < D; d++) {
          const a = qr[d]!;
          x0 += a * k[b + d]!;
          x1 += a * k[b + stride + d]!;
          x2 += a * k[b + 2 * stride + d]!;
          x3 += a * k[b + 3 * stride + d]!;
        }
        s[j] = x0;
        s[j + 1] = x1;
        s[j + 2] = x2;
        s[j + 3] = x3;
        if (x0 > m) m = x0;
        if (x1 > m) m = x1;
        if (x2 > m) m = x2;
        if (x3 > m) m = x3;
      }
      for (; j < n; j++) {
        const b = kv0 + j * stride;
        let x = 0;
        for (let d = 0; d < D; d++) x += qr[d]! * k[b + d]!;
        s[j] = x;
        if (x > m) m = x;
      }
      // Pass 2: exponentials, their sum, and the weighted sum of V rows.
      for (let d = 0; d < D; d++) acc[d] = 0;
      let l = 0;
      j = 0;
      for (; j + 4 <= n; j += 4) {
        const p0 = Math.exp(s[j]! - m);
        const p1 = Math.exp(s[j + 1]! - m);
        const p2 = Math.exp(s[j + 2]! - m);
        const p3 = Math.exp(s[j + 3]! - m);
        l += p0 + p1 + p2 + p3;
        const b = kv0 + j * stride;
        for (let d = 0; d < D; d++)
          acc[d]! +=
            p0 * v[b + d]! +
            p1 * v[b + stride + d]! +
            p2 * v[b + 2 * stride + d]! +
            p3 * v[b + 3 * stride + d]!;
      }
      for (; j < n; j++) {
        const p = Math.exp(s[j]! - m);
        l += p;
        const b = kv0 + j * stride;
        for (let d = 0; d < D; d++) acc[d]! += p * v[b + d]!;
      }
      const inv = 1 / l;
      for (let d = 0; d < D; d++) outO[oBase + d] = acc[d]! * inv;
      outLse[i * H + h] = m + Math.log(l);
    }
  }
}

/**
 * Merges a task's (O, LSE) rows into a running result by log-sum-exp: with L = log(e^La + e^Lb),
 * O = O_a·e^(La-L) + O_b·e^(Lb-L). `accO`/`accLse` are sequence-wide ([tokens, qHeads, headDim] and
 * [tokens, qHeads]), indexed from token `qStart`; `taskO`/`taskLse` are the task-local rows written
 * by {@link attentionForward}. A running LSE of -Infinity means "nothing yet".
 */
export function mergeByLse(
  shape: AttentionShape,
  accO: Float64Array,
  accLse: Float64Array,
  qStart: number,
  qLen: number,
  taskO: Float64Array,
  taskLse: Float64Array,
): void {
  const H = shape.qHeads;
  const D = shape.headDim;
  for (let i = 0; i < qLen; i++)
    for (let h = 0; h < H; h++) {
      const lb = taskLse[i * H + h]!;
      if (lb === Number.NEGATIVE_INFINITY) continue;
      const row = (qStart + i) * H + h;
      const la = accLse[row]!;
      const a = row * D;
      const b = (i * H + h) * D;
      if (la === Number.NEGATIVE_INFINITY) {
        for (let d = 0; d < D; d++) accO[a + d] = taskO[b + d]!;
        accLse[row] = lb;
        continue;
      }
      const m = Math.max(la, lb);
      const wa = Math.exp(la - m);
      const wb = Math.exp(lb - m);
      const inv = 1 / (wa + wb);
      for (let d = 0; d < D; d++) accO[a + d] = (accO[a + d]! * wa + taskO[b + d]! * wb) * inv;
      accLse[row] = m + Math.log(wa + wb);
    }
}

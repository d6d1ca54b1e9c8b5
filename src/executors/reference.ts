/**
 * The independent reference: dense attention of every sequence on the main thread, in float64,
 * forward and backward, straight from the definitions. It is deliberately written apart from the
 * CPU runtime's kernels (no shared code, a different loop structure: one query row at a time over
 * per-head float64 copies, probabilities normalised explicitly, D_i = sum_j P_ij dP_ij rather than
 * rowsum(dO ∘ O)) so that a bug in one does not hide in the other.
 *
 *   S = Q·Kᵀ / sqrt(d) (+ causal mask),  P = softmax(S),  O = P·V
 *   dP = dO·Vᵀ,  dS = P ∘ (dP - rowsum(P ∘ dP)),  dQ = dS·K / sqrt(d),  dK = dSᵀ·Q / sqrt(d),  dV = Pᵀ·dO
 *
 * Query head h reads KV head floor(h·kvHeads/qHeads); dK and dV of a KV head sum over its query heads.
 */
import type { Mask } from '../plan/types.ts';
import type { SequenceInputs, SequenceOutputs } from './types.ts';

/** The shape the reference needs. */
export interface ReferenceShape {
  readonly qHeads: number;
  readonly kvHeads: number;
  readonly headDim: number;
}

/** Float64 results of one sequence, [tokens, heads, headDim] (lse: [tokens, qHeads]). */
export interface ReferenceSequence {
  o: Float64Array;
  lse: Float64Array;
  dq: Float64Array;
  dk: Float64Array;
  dv: Float64Array;
}

/** Float64 results per sequence. */
export interface ReferenceOutputs {
  o: Float64Array[];
  lse: Float64Array[];
  dq: Float64Array[];
  dk: Float64Array[];
  dv: Float64Array[];
}

/** Copies head `h` of a [tokens, heads, dim] array into a dense float64 [tokens, dim] matrix. */
function headMatrix(src: Float32Array, tokens: number, heads: number, dim: number, h: number): Float64Array {
  const m = new Float64Array(tokens * dim);
  for (let t = 0; t < tokens; t++) {
    const from = (t * heads + h) * dim;
    for (let c = 0; c < dim; c++) m[t * dim + c] = src[from + c]!;
  }
  return m;
}

/** Adds a dense [tokens, dim] matrix into head `h` of a [tokens, heads, dim] array. */
function scatterHead(
  dst: Float64Array,
  m: Float64Array,
  tokens: number,
  heads: number,
  dim: number,
  h: number,
): void {
  for (let t = 0; t < tokens; t++) {
    const to = (t * heads + h) * dim;
    for (let c = 0; c < dim; c++) dst[to + c]! += m[t * dim + c]!;
  }
}

/** Forward and backward attention of one sequence in float64 (`onRow`: after each query row, its pairs). */
export function referenceSequence(
  shape: ReferenceShape,
  mask: Mask,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  dO: Float32Array,
  onRow?: (pairs: number) => void,
): ReferenceSequence {
  const nq = shape.qHeads;
  const nkv = shape.kvHeads;
  const dim = shape.headDim;
  const L = q.length / (nq * dim);
  const inv = 1 / Math.sqrt(dim);
  const res: ReferenceSequence = {
    o: new Float64Array(L * nq * dim),
    lse: new Float64Array(L * nq),
    dq: new Float64Array(L * nq * dim),
    dk: new Float64Array(L * nkv * dim),
    dv: new Float64Array(L * nkv * dim),
  };
  const P = new Float64Array(L);
  const dP = new Float64Array(L);
  const qi = new Float64Array(dim); // the current query row
  const gi = new Float64Array(dim); // the current dO row
  const oi = new Float64Array(dim);
  const dqi = new Float64Array(dim);
  for (let c = 0; c < nkv; c++) {
    const K = headMatrix(k, L, nkv, dim, c);
    const V = headMatrix(v, L, nkv, dim, c);
    const dK = new Float64Array(L * dim);
    const dV = new Float64Array(L * dim);
    for (let h = 0; h < nq; h++) {
      if (Math.floor((h * nkv) / nq) !== c) continue;
      const Q = headMatrix(q, L, nq, dim, h);
      const G = headMatrix(dO, L, nq, dim, h);
      for (let i = 0; i < L; i++) {
        const n = mask === 'causal' ? i + 1 : L; // keys 0..n-1 are visible to query i
        for (let x = 0; x < dim; x++) {
          qi[x] = Q[i * dim + x]!;
          gi[x] = G[i * dim + x]!;
          oi[x] = 0;
          dqi[x] = 0;
        }
        // Scores, then an explicitly normalised softmax row.
        let best = Number.NEGATIVE_INFINITY;
        for (let j = 0; j < n; j++) {
          const row = j * dim;
          let dot = 0;
          for (let x = 0; x < dim; x++) dot += qi[x]! * K[row + x]!;
          const sc = dot * inv;
          P[j] = sc;
          if (sc > best) best = sc;
        }
        let total = 0;
        for (let j = 0; j < n; j++) {
          const e = Math.exp(P[j]! - best);
          P[j] = e;
          total += e;
        }
        for (let j = 0; j < n; j++) P[j] = P[j]! / total;
        res.lse[i * nq + h] = best + Math.log(total);
        // O = P·V and dP = dO·Vᵀ in one sweep over V; D_i = sum_j P_ij dP_ij.
        let rowD = 0;
        for (let j = 0; j < n; j++) {
          const row = j * dim;
          const pj = P[j]!;
          let g = 0;
          for (let x = 0; x < dim; x++) {
            const vx = V[row + x]!;
            oi[x]! += pj * vx;
            g += gi[x]! * vx;
          }
          dP[j] = g;
          rowD += pj * g;
        }
        // dS = P ∘ (dP - D); dQ, dK, dV.
        for (let j = 0; j < n; j++) {
          const row = j * dim;
          const pj = P[j]!;
          const ds = pj * (dP[j]! - rowD) * inv;
          for (let x = 0; x < dim; x++) {
            dqi[x]! += ds * K[row + x]!;
            dK[row + x]! += ds * qi[x]!;
            dV[row + x]! += pj * gi[x]!;
          }
        }
        const to = (i * nq + h) * dim;
        for (let x = 0; x < dim; x++) {
          res.o[to + x] = oi[x]!;
          res.dq[to + x] = dqi[x]!;
        }
        onRow?.(n);
      }
    }
    scatterHead(res.dk, dK, L, nkv, dim, c);
    scatterHead(res.dv, dV, L, nkv, dim, c);
  }
  return res;
}

/** The reference for every sequence of `inputs`; `onProgress` gets the fraction of pairs done. */
export function referenceAttention(
  shape: ReferenceShape,
  mask: Mask,
  inputs: SequenceInputs,
  onProgress?: (fraction: number) => void,
): ReferenceOutputs {
  const out: ReferenceOutputs = { o: [], lse: [], dq: [], dk: [], dv: [] };
  // Progress by attended (query, key) pairs, the work of every row; the run is synchronous and
  // can take a minute, so the caller learns how far it is from here (verify's progress lines).
  let total = 0;
  for (const q of inputs.q) {
    const L = q.length / (shape.qHeads * shape.headDim);
    total += (mask === 'causal' ? (L * (L + 1)) / 2 : L * L) * shape.qHeads;
  }
  let done = 0;
  const onRow = onProgress
    ? (pairs: number): void => {
        done += pairs;
        onProgress(total > 0 ? done / total : 1);
      }
    : undefined;
  for (let s = 0; s < inputs.q.length; s++) {
    const r = referenceSequence(shape, mask, inputs.q[s]!, inputs.k[s]!, inputs.v[s]!, inputs.dO[s]!, onRow);
    out.o.push(r.o);
    out.lse.push(r.lse);
    out.dq.push(r.dq);
    out.dk.push(r.dk);
    out.dv.push(r.dv);
  }
  return out;
}

/**
 * Relative error ||a - b|| / ||b|| (Euclidean norms over all arrays together). Infinity when `a`
 * holds a NaN or infinity, or when b is zero and a is not; 0 when both are zero.
 */
export function relativeError(a: readonly ArrayLike<number>[], b: readonly ArrayLike<number>[]): number {
  if (a.length !== b.length) return Number.POSITIVE_INFINITY;
  let diff = 0;
  let norm = 0;
  for (let s = 0; s < a.length; s++) {
    const x = a[s]!;
    const y = b[s]!;
    if (x.length !== y.length) return Number.POSITIVE_INFINITY;
    for (let i = 0; i < x.length; i++) {
      const d = x[i]! - y[i]!;
      diff += d * d;
      norm += y[i]! * y[i]!;
    }
  }
  if (!Number.isFinite(diff)) return Number.POSITIVE_INFINITY;
  if (norm === 0) return diff === 0 ? 0 : Number.POSITIVE_INFINITY;
  return Math.sqrt(diff / norm);
}

/** Relative errors of an executor's outputs against the reference, per output. */
export interface OutputErrors {
  o: number;
  dq: number;
  dk: number;
  dv: number;
}

/** Compares every output of `outputs` with `ref`. */
export function compareOutputs(outputs: SequenceOutputs, ref: ReferenceOutputs): OutputErrors {
  return {
    o: relativeError(outputs.o, ref.o),
    dq: relativeError(outputs.dq, ref.dq),
    dk: relativeError(outputs.dk, ref.dk),
    dv: relativeError(outputs.dv, ref.dv),
  };
}

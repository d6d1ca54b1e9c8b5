/**
 * Kernel pieces of a task, exactly as the GPU runtime cuts them (python/fcp_torch/kernels.py,
 * `decompose`): kernels know two masks, full and causal aligned at the bottom right (query i of a
 * piece sees keys j <= i + lk - lq).
 *
 * Under a causal mask, queries before the first key attend nothing and keys after the last query
 * are never attended; a task whose (clipped) keys are all visible to every live query is one full
 * piece. Otherwise, mode `br` (varlen flash): a causal piece [q0, kEnd) x [ks, kEnd) plus, for the
 * queries past the keys, a full piece [kEnd, qe) x [ks, kEnd). Mode `square` (dense cuDNN knows only
 * top-left causal, which equals bottom-right for squares): the causal piece's earlier keys become a
 * full rectangle [q0, kEnd) x [ks, q0) and the rest a causal square [q0, kEnd) x [q0, kEnd).
 */

/** `br`: bottom-right causal pieces (varlen); `square`: causal pieces are squares (dense). */
export type PieceMode = 'br' | 'square';

/** Receives one piece: lq queries against lk keys, causal (bottom-right) or full. */
export type PieceSink = (lq: number, lk: number, causal: boolean) => void;

/** Cuts queries [qs, qs+ql) against keys [ks, ks+kl) of one sequence into pieces (module comment). */
export function decompose(
  causal: boolean,
  mode: PieceMode,
  qs: number,
  ql: number,
  ks: number,
  kl: number,
  emit: PieceSink,
): void {
  if (ql <= 0 || kl <= 0) return;
  if (!causal) {
    emit(ql, kl, false);
    return;
  }
  const qe = qs + ql;
  const kEnd = Math.min(ks + kl, qe);
  const q0 = Math.max(qs, ks);
  if (kEnd <= ks || q0 >= qe) return; // fully masked
  if (kEnd - 1 <= q0) {
    emit(qe - q0, kEnd - ks, false);
    return;
  }
  if (mode === 'br') emit(kEnd - q0, kEnd - ks, true);
  else {
    if (ks < q0) emit(kEnd - q0, q0 - ks, false);
    emit(kEnd - q0, kEnd - q0, true);
  }
  if (qe > kEnd) emit(qe - kEnd, kEnd - ks, false);
}

/** Attended pairs of one piece. */
export function piecePairs(lq: number, lk: number, causal: boolean): number {
  return causal ? lq * (lk - lq) + (lq * (lq + 1)) / 2 : lq * lk;
}

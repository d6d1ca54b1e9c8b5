/**
 * What one rank holds of one sequence: per-token presence flags and sequence-wide buffers,
 * allocated on first use (a rank touches few sequences, and a sequence-wide buffer lets kernels
 * index by absolute token position without copies).
 *
 * Presence flags make the runtime strict: a task or a send that needs data the rank does not hold
 * at that point of the plan fails with an error naming the tokens, instead of computing with stale
 * or zero values.
 */
import type { AttentionShape } from './kernels/shape.ts';

/** Presence bits of a token on one rank. */
export const Has = {
  /** The token is in this rank's user layout. */
  user: 1,
  /** The token is in this rank's home layout (O, LSE, dQ and final dK/dV live here). */
  home: 2,
  /** Q of the token is present. */
  q: 4,
  /** K and V of the token are present. */
  kv: 8,
  /** dO of the token is present (backward). */
  dO: 16,
  /** The forward output O arrived here by an `out` transfer. */
  outO: 32,
  /** The gradients dQ, dK, dV arrived here by an `out` transfer. */
  outGrad: 64,
} as const;

/** Names of the presence bits, for messages. */
export function describeBits(bits: number): string {
  const names: string[] = [];
  if (bits & Has.q) names.push('Q');
  if (bits & Has.kv) names.push('K/V');
  if (bits & Has.dO) names.push('dO');
  if (bits & Has.home) names.push('home (O, LSE)');
  if (bits & Has.outO) names.push('O (received by out)');
  if (bits & Has.outGrad) names.push('dQ/dK/dV (received by out)');
  return names.join(', ');
}

/** One rank's data of one sequence. */
export class SeqStore {
  readonly length: number;
  readonly flags: Uint8Array;
  private readonly qw: number;
  private readonly kw: number;
  private readonly heads: number;
  private _q: Float32Array | undefined;
  private _k: Float32Array | undefined;
  private _v: Float32Array | undefined;
  private _dO: Float32Array | undefined;
  private _o: Float64Array | undefined;
  private _lse: Float64Array | undefined;
  private _dq: Float64Array | undefined;
  private _dk: Float64Array | undefined;
  private _dv: Float64Array | undefined;
  private _outO: Float32Array | undefined;
  private _outDq: Float32Array | undefined;
  private _outDk: Float32Array | undefined;
  private _outDv: Float32Array | undefined;

  constructor(length: number, shape: AttentionShape) {
    this.length = length;
    this.flags = new Uint8Array(length);
    this.qw = shape.qHeads * shape.headDim;
    this.kw = shape.kvHeads * shape.headDim;
    this.heads = shape.qHeads;
  }

  /** Floats per token of Q, O, dO, dQ. */
  get qWidth(): number {
    return this.qw;
  }
  /** Floats per token of K, V, dK, dV. */
  get kvWidth(): number {
    return this.kw;
  }

  get q(): Float32Array {
    this._q ??= new Float32Array(this.length * this.qw);
    return this._q;
  }
  get k(): Float32Array {
    this._k ??= new Float32Array(this.length * this.kw);
    return this._k;
  }
  get v(): Float32Array {
    this._v ??= new Float32Array(this.length * this.kw);
    return this._v;
  }
  get dO(): Float32Array {
    this._dO ??= new Float32Array(this.length * this.qw);
    return this._dO;
  }
  /** Running forward output (normalised), merged across tasks by LSE. */
  get o(): Float64Array {
    this._o ??= new Float64Array(this.length * this.qw);
    return this._o;
  }
  /** Running log-sum-exp, [tokens, qHeads]; -Infinity until a task contributes. */
  get lse(): Float64Array {
    if (!this._lse) {
      this._lse = new Float64Array(this.length * this.heads);
      this._lse.fill(Number.NEGATIVE_INFINITY);
    }
    return this._lse;
  }
  get dq(): Float64Array {
    this._dq ??= new Float64Array(this.length * this.qw);
    return this._dq;
  }
  /** This rank's partial dK of the sequence (moved away by `dkv`). */
  get dk(): Float64Array {
    this._dk ??= new Float64Array(this.length * this.kw);
    return this._dk;
  }
  get dv(): Float64Array {
    this._dv ??= new Float64Array(this.length * this.kw);
    return this._dv;
  }
  get outO(): Float32Array {
    this._outO ??= new Float32Array(this.length * this.qw);
    return this._outO;
  }
  get outDq(): Float32Array {
    this._outDq ??= new Float32Array(this.length * this.qw);
    return this._outDq;
  }
  get outDk(): Float32Array {
    this._outDk ??= new Float32Array(this.length * this.kw);
    return this._outDk;
  }
  get outDv(): Float32Array {
    this._outDv ??= new Float32Array(this.length * this.kw);
    return this._outDv;
  }

  /** First token in [start, start+length) lacking any of `bits`, or -1. */
  missing(start: number, length: number, bits: number): number {
    const f = this.flags;
    for (let t = start; t < start + length; t++) if ((f[t]! & bits) !== bits) return t;
    return -1;
  }

  /** Sets `bits` on [start, start+length). */
  mark(start: number, length: number, bits: number): void {
    const f = this.flags;
    for (let t = start; t < start + length; t++) f[t]! |= bits;
  }

  /**
   * Backward start state: K/V (and Q) fetched by `kv` in the forward are dropped; user tokens hold
   * Q, K, V, dO; home tokens keep what arrived by `in` (Q, K, V) plus O and LSE; forward outputs
   * delivered by `out` stay. Gradient buffers start at zero.
   */
  resetForBackward(): void {
    const f = this.flags;
    for (let t = 0; t < f.length; t++) {
      const old = f[t]!;
      let n = old & (Has.user | Has.home | Has.outO);
      if (old & Has.user) n |= Has.q | Has.kv | Has.dO;
      if (old & Has.home && old & Has.q) n |= Has.q | Has.kv;
      f[t] = n;
    }
    this._dq?.fill(0);
    this._dk?.fill(0);
    this._dv?.fill(0);
  }

  /**
   * Final outputs of user tokens [start, start+len): what arrived by `out`, else (user = home) the
   * local results, else NaN (nothing delivered them, so a comparison fails loudly).
   */
  userOutputs(
    start: number,
    len: number,
  ): { o: Float32Array; dq: Float32Array; dk: Float32Array; dv: Float32Array } {
    const qW = this.qw;
    const kW = this.kw;
    const o = new Float32Array(len * qW);
    const dq = new Float32Array(len * qW);
    const dk = new Float32Array(len * kW);
    const dv = new Float32Array(len * kW);
    for (let i = 0; i < len; i++) {
      const t = start + i;
      const f = this.flags[t]!;
      const qs = t * qW;
      const ks = t * kW;
      if (f & Has.outO) o.set(this.outO.subarray(qs, qs + qW), i * qW);
      else if (f & Has.home) o.set(this.o.subarray(qs, qs + qW), i * qW);
      else o.fill(Number.NaN, i * qW, (i + 1) * qW);
      if (f & Has.outGrad) {
        dq.set(this.outDq.subarray(qs, qs + qW), i * qW);
        dk.set(this.outDk.subarray(ks, ks + kW), i * kW);
        dv.set(this.outDv.subarray(ks, ks + kW), i * kW);
      } else if (f & Has.home) {
        dq.set(this.dq.subarray(qs, qs + qW), i * qW);
        dk.set(this.dk.subarray(ks, ks + kW), i * kW);
        dv.set(this.dv.subarray(ks, ks + kW), i * kW);
      } else {
        dq.fill(Number.NaN, i * qW, (i + 1) * qW);
        dk.fill(Number.NaN, i * kW, (i + 1) * kW);
        dv.fill(Number.NaN, i * kW, (i + 1) * kW);
      }
    }
    return { o, dq, dk, dv };
  }
}

/**
 * Message payloads of the CPU runtime, by transfer kind and phase: what a sender packs from its
 * store and what a receiver does with it. Payloads are float32 (the wire format; accumulators stay
 * float64 on the ranks), laid out as consecutive [tokens, heads, headDim] blocks:
 *
 *   forward  in: Q | K | V    kv: K | V    out: O
 *   backward in: dO           kv: K | V    dkv: dK | dV (partials, added)    out: dQ | dK | dV
 */
import { Kind } from '../../plan/types.ts';
import { Has, type SeqStore } from './store.ts';

/** Floats of a payload of `kind` in `phase` for `len` tokens (qW, kW: floats per token of Q and K). */
export function payloadSize(phase: 0 | 1, kind: number, len: number, qW: number, kW: number): number {
  if (kind === Kind.kv || kind === Kind.dkv) return len * 2 * kW;
  if (kind === Kind.in) return len * (phase === 0 ? qW + 2 * kW : qW);
  return len * (phase === 0 ? qW : qW + 2 * kW); // out
}

/** True when `kind` may appear in `phase`. */
export function kindAllowed(phase: 0 | 1, kind: number): boolean {
  return phase === 0 ? kind === Kind.in || kind === Kind.kv || kind === Kind.out : kind <= Kind.dkv;
}

/** Presence bits the sender must hold for the tokens it sends, and what they are (for messages). */
export function senderNeeds(phase: 0 | 1, kind: number): { bits: number; what: string } {
  if (kind === Kind.kv) return { bits: Has.kv, what: 'the K/V it sends' };
  if (kind === Kind.dkv) return { bits: 0, what: 'its dK/dV partial' };
  if (kind === Kind.in)
    return phase === 0
      ? { bits: Has.q | Has.kv, what: 'the Q/K/V it sends' }
      : { bits: Has.dO, what: 'the dO it sends' };
  return { bits: Has.home, what: phase === 0 ? 'the O it sends' : 'the dQ/dK/dV it sends' };
}

/**
 * What a relay of an `out` (FCP's two-hop `out` across nodes: a rank that is not the home sends on
 * outputs it received as `out`) must hold.
 */
export function relayNeeds(phase: 0 | 1): { bits: number; what: string } {
  return phase === 0
    ? { bits: Has.outO, what: 'the O it relays' }
    : { bits: Has.outGrad, what: 'the dQ/dK/dV it relays' };
}

/**
 * Copies the payload of tokens [start, start+len) out of `st` (a dkv's partial is not zeroed here).
 * `relayed`: an `out` sent on by a relay, from the outputs it received.
 */
export function packPayload(
  phase: 0 | 1,
  kind: number,
  st: SeqStore,
  start: number,
  len: number,
  relayed = false,
): Float32Array {
  const qW = st.qWidth;
  const kW = st.kvWidth;
  const data = new Float32Array(payloadSize(phase, kind, len, qW, kW));
  const qa = start * qW;
  const qb = (start + len) * qW;
  const ka = start * kW;
  const kb = (start + len) * kW;
  if (kind === Kind.kv) {
    data.set(st.k.subarray(ka, kb), 0);
    data.set(st.v.subarray(ka, kb), len * kW);
  } else if (kind === Kind.dkv) {
    data.set(st.dk.subarray(ka, kb), 0);
    data.set(st.dv.subarray(ka, kb), len * kW);
  } else if (kind === Kind.in && phase === 0) {
    data.set(st.q.subarray(qa, qb), 0);
    data.set(st.k.subarray(ka, kb), len * qW);
    data.set(st.v.subarray(ka, kb), len * (qW + kW));
  } else if (kind === Kind.in) {
    data.set(st.dO.subarray(qa, qb), 0);
  } else if (phase === 0) {
    data.set((relayed ? st.outO : st.o).subarray(qa, qb), 0);
  } else if (relayed) {
    data.set(st.outDq.subarray(qa, qb), 0);
    data.set(st.outDk.subarray(ka, kb), len * qW);
    data.set(st.outDv.subarray(ka, kb), len * (qW + kW));
  } else {
    data.set(st.dq.subarray(qa, qb), 0);
    data.set(st.dk.subarray(ka, kb), len * qW);
    data.set(st.dv.subarray(ka, kb), len * (qW + kW));
  }
  return data;
}

/** The sender's partial dK/dV of a range moves with a `dkv`: zero it after packing. */
export function clearPartial(st: SeqStore, start: number, len: number): void {
  const kW = st.kvWidth;
  st.dk.fill(0, start * kW, (start + len) * kW);
  st.dv.fill(0, start * kW, (start + len) * kW);
}

/** Applies a received payload to `st`: stores data and marks presence, or adds dK/dV partials. */
export function applyPayload(
  phase: 0 | 1,
  kind: number,
  st: SeqStore,
  start: number,
  len: number,
  data: Float32Array,
): void {
  const qW = st.qWidth;
  const kW = st.kvWidth;
  const qa = start * qW;
  const ka = start * kW;
  if (kind === Kind.kv) {
    st.k.set(data.subarray(0, len * kW), ka);
    st.v.set(data.subarray(len * kW), ka);
    st.mark(start, len, Has.kv);
  } else if (kind === Kind.dkv) {
    const dk = st.dk;
    const dv = st.dv;
    const m = len * kW;
    for (let i = 0; i < m; i++) {
      dk[ka + i]! += data[i]!;
      dv[ka + i]! += data[m + i]!;
    }
  } else if (kind === Kind.in && phase === 0) {
    st.q.set(data.subarray(0, len * qW), qa);
    st.k.set(data.subarray(len * qW, len * (qW + kW)), ka);
    st.v.set(data.subarray(len * (qW + kW)), ka);
    st.mark(start, len, Has.q | Has.kv);
  } else if (kind === Kind.in) {
    st.dO.set(data, qa);
    st.mark(start, len, Has.dO);
  } else if (phase === 0) {
    st.outO.set(data, qa);
    st.mark(start, len, Has.outO);
  } else {
    st.outDq.set(data.subarray(0, len * qW), qa);
    st.outDk.set(data.subarray(len * qW, len * (qW + kW)), ka);
    st.outDv.set(data.subarray(len * (qW + kW)), ka);
    st.mark(start, len, Has.outGrad);
  }
}

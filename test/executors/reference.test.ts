import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng } from '../../src/core/rng.ts';
import { referenceAttention, referenceSequence, relativeError } from '../../src/executors/reference.ts';
import type { Mask } from '../../src/plan/types.ts';

/** Inputs on a 1/256 grid, so that +-2^-10 steps are exact in float32 (finite differences). */
function gridInputs(rng: Rng, len: number, qh: number, kvh: number, d: number) {
  const grid = (n: number) => Float32Array.from({ length: n }, () => rng.int(-256, 256) / 256);
  return { q: grid(len * qh * d), k: grid(len * kvh * d), v: grid(len * kvh * d), dO: grid(len * qh * d) };
}

/** loss = sum(O ∘ dO) computed by the reference forward. */
function loss(
  shape: { qHeads: number; kvHeads: number; headDim: number },
  mask: Mask,
  x: ReturnType<typeof gridInputs>,
): number {
  const r = referenceSequence(shape, mask, x.q, x.k, x.v, x.dO);
  let s = 0;
  for (let i = 0; i < r.o.length; i++) s += r.o[i]! * x.dO[i]!;
  return s;
}

describe('reference attention', () => {
  for (const mask of ['causal', 'full'] as const)
    it(`gradients match finite differences of sum(O * dO) (${mask}, GQA)`, () => {
      const shape = { qHeads: 4, kvHeads: 2, headDim: 4 };
      const x = gridInputs(new Rng(7), 6, 4, 2, 4);
      const r = referenceSequence(shape, mask, x.q, x.k, x.v, x.dO);
      const h = 2 ** -10;
      const rng = new Rng(3);
      for (const [name, grad] of [
        ['q', r.dq],
        ['k', r.dk],
        ['v', r.dv],
      ] as const) {
        for (let trial = 0; trial < 12; trial++) {
          const arr = x[name];
          const idx = rng.int(0, arr.length - 1);
          const keep = arr[idx]!;
          arr[idx] = keep + h;
          const up = loss(shape, mask, x);
          arr[idx] = keep - h;
          const down = loss(shape, mask, x);
          arr[idx] = keep;
          const numeric = (up - down) / (2 * h);
          assert.ok(
            Math.abs(numeric - grad[idx]!) < 1e-5,
            `${name}[${idx}]: numeric ${numeric} vs analytic ${grad[idx]}`,
          );
        }
      }
    });

  it('a one-token sequence returns V, zero dQ/dK and the summed dO as dV', () => {
    const x = gridInputs(new Rng(1), 1, 4, 2, 3);
    const r = referenceSequence({ qHeads: 4, kvHeads: 2, headDim: 3 }, 'causal', x.q, x.k, x.v, x.dO);
    for (let h = 0; h < 4; h++)
      for (let d = 0; d < 3; d++) assert.equal(r.o[h * 3 + d], x.v[Math.floor(h / 2) * 3 + d]);
    assert.ok(r.dq.every((z) => Math.abs(z) < 1e-15));
    assert.ok(r.dk.every((z) => Math.abs(z) < 1e-15));
    for (let c = 0; c < 2; c++)
      for (let d = 0; d < 3; d++)
        assert.ok(Math.abs(r.dv[c * 3 + d]! - (x.dO[2 * c * 3 + d]! + x.dO[(2 * c + 1) * 3 + d]!)) < 1e-15);
  });

  it('GQA equals multi-head attention with K/V repeated per query head (dK/dV summed over the group)', () => {
    const rng = new Rng(11);
    const L = 9;
    const d = 5;
    const x = gridInputs(rng, L, 4, 2, d);
    const gqa = referenceSequence({ qHeads: 4, kvHeads: 2, headDim: d }, 'causal', x.q, x.k, x.v, x.dO);
    const rep = (a: Float32Array) => {
      const out = new Float32Array(L * 4 * d);
      for (let t = 0; t < L; t++)
        for (let h = 0; h < 4; h++)
          for (let e = 0; e < d; e++) out[(t * 4 + h) * d + e] = a[(t * 2 + Math.floor(h / 2)) * d + e]!;
      return out;
    };
    const mha = referenceSequence(
      { qHeads: 4, kvHeads: 4, headDim: d },
      'causal',
      x.q,
      rep(x.k),
      rep(x.v),
      x.dO,
    );
    assert.ok(relativeError([gqa.o], [mha.o]) < 1e-14);
    assert.ok(relativeError([gqa.dq], [mha.dq]) < 1e-14);
    const fold = (a: Float64Array) => {
      const out = new Float64Array(L * 2 * d);
      for (let t = 0; t < L; t++)
        for (let h = 0; h < 4; h++)
          for (let e = 0; e < d; e++) out[(t * 2 + Math.floor(h / 2)) * d + e]! += a[(t * 4 + h) * d + e]!;
      return out;
    };
    assert.ok(relativeError([gqa.dk], [fold(mha.dk)]) < 1e-14);
    assert.ok(relativeError([gqa.dv], [fold(mha.dv)]) < 1e-14);
  });

  it('causal rows ignore later keys; outputs are convex combinations of V', () => {
    const rng = new Rng(5);
    const x = gridInputs(rng, 7, 2, 1, 4);
    const a = referenceSequence({ qHeads: 2, kvHeads: 1, headDim: 4 }, 'causal', x.q, x.k, x.v, x.dO);
    // Change the last token's K/V: rows 0..5 of O must not move.
    x.k.fill(0.5, 6 * 4);
    x.v.fill(-0.75, 6 * 4);
    const b = referenceSequence({ qHeads: 2, kvHeads: 1, headDim: 4 }, 'causal', x.q, x.k, x.v, x.dO);
    for (let i = 0; i < 6 * 2 * 4; i++) assert.equal(a.o[i], b.o[i]);
    for (let i = 0; i < a.o.length; i++) assert.ok(Math.abs(b.o[i]!) <= 1 + 1e-12);
  });

  it('relativeError: zero for equal arrays, infinite for NaN, scale invariant', () => {
    const a = [Float64Array.of(1, 2, 3)];
    assert.equal(relativeError(a, a), 0);
    assert.equal(relativeError([Float64Array.of(1, Number.NaN, 3)], a), Number.POSITIVE_INFINITY);
    const e1 = relativeError([Float64Array.of(1.1, 2, 3)], a);
    const e2 = relativeError([Float64Array.of(11, 20, 30)], [Float64Array.of(10, 20, 30)]);
    assert.ok(Math.abs(e1 - e2) < 1e-12 && e1 > 0);
    assert.equal(relativeError([Float64Array.of(0)], [Float64Array.of(0)]), 0);
  });

  it('referenceAttention runs every sequence', () => {
    const rng = new Rng(2);
    const xs = [gridInputs(rng, 3, 2, 2, 2), gridInputs(rng, 4, 2, 2, 2)];
    const out = referenceAttention({ qHeads: 2, kvHeads: 2, headDim: 2 }, 'full', {
      q: xs.map((x) => x.q),
      k: xs.map((x) => x.k),
      v: xs.map((x) => x.v),
      dO: xs.map((x) => x.dO),
    });
    assert.equal(out.o.length, 2);
    assert.equal(out.dk[1]!.length, 4 * 2 * 2);
  });
});

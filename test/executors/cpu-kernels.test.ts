import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Rng } from '../../src/core/rng.ts';
import { attentionBackward } from '../../src/executors/cpu/kernels/backward.ts';
import { attentionForward, mergeByLse } from '../../src/executors/cpu/kernels/forward.ts';
import { createScratch } from '../../src/executors/cpu/kernels/shape.ts';
import { referenceSequence, relativeError } from '../../src/executors/reference.ts';

interface Case {
  len: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  causal: boolean;
  /** Cut points of the query and key ranges: tasks are every (query piece, key piece). */
  qCuts: number[];
  kCuts: number[];
  seed: number;
}

/** Runs the kernels over every (query piece, key piece) of a sequence, skipping fully masked ones. */
function runTiled(c: Case) {
  const shape = { qHeads: c.qHeads, kvHeads: c.kvHeads, headDim: c.headDim };
  const rng = new Rng(c.seed);
  const qw = c.qHeads * c.headDim;
  const kw = c.kvHeads * c.headDim;
  const q = rng.fillUniform(new Float32Array(c.len * qw));
  const k = rng.fillUniform(new Float32Array(c.len * kw));
  const v = rng.fillUniform(new Float32Array(c.len * kw));
  const dO = rng.fillUniform(new Float32Array(c.len * qw));
  const pieces = (cuts: number[]) => {
    const pts = [0, ...[...new Set(cuts.filter((x) => x > 0 && x < c.len))].sort((a, b) => a - b), c.len];
    return pts.slice(1).map((e, i) => [pts[i]!, e - pts[i]!] as const);
  };
  const o = new Float64Array(c.len * qw);
  const lse = new Float64Array(c.len * c.qHeads).fill(Number.NEGATIVE_INFINITY);
  const taskO = new Float64Array(c.len * qw);
  const taskLse = new Float64Array(c.len * c.qHeads);
  const scratch = createScratch(c.len, c.headDim);
  const tasks: [number, number, number, number][] = [];
  for (const [qs, ql] of pieces(c.qCuts))
    for (const [ks, kl] of pieces(c.kCuts)) if (!c.causal || ks <= qs + ql - 1) tasks.push([qs, ql, ks, kl]);
  for (const [qs, ql, ks, kl] of tasks) {
    attentionForward(shape, c.causal, q, k, v, qs, ql, ks, kl, taskO, taskLse, scratch);
    mergeByLse(shape, o, lse, qs, ql, taskO, taskLse);
  }
  const dq = new Float64Array(c.len * qw);
  const dk = new Float64Array(c.len * kw);
  const dv = new Float64Array(c.len * kw);
  for (const [qs, ql, ks, kl] of tasks)
    attentionBackward(shape, c.causal, q, k, v, o, lse, dO, qs, ql, ks, kl, dq, dk, dv, scratch);
  const ref = referenceSequence(shape, c.causal ? 'causal' : 'full', q, k, v, dO);
  return {
    o: relativeError([o], [ref.o]),
    lse: relativeError([lse], [ref.lse]),
    dq: relativeError([dq], [ref.dq]),
    dk: relativeError([dk], [ref.dk]),
    dv: relativeError([dv], [ref.dv]),
  };
}

describe('cpu kernels', () => {
  it('one task over a whole sequence matches the float64 reference (causal, GQA, tails of 4)', () => {
    const e = runTiled({
      len: 37,
      qHeads: 4,
      kvHeads: 2,
      headDim: 32,
      causal: true,
      qCuts: [],
      kCuts: [],
      seed: 1,
    });
    for (const [name, err] of Object.entries(e)) assert.ok(err < 1e-12, `${name}: ${err}`);
  });

  it('tiled tasks merged by LSE and accumulated gradients match the reference (property)', () => {
    const arb = fc.record({
      len: fc.integer({ min: 1, max: 48 }),
      heads: fc.constantFrom([4, 2], [4, 1], [2, 2], [6, 3], [1, 1]),
      headDim: fc.constantFrom(1, 3, 8, 32),
      causal: fc.boolean(),
      qCuts: fc.array(fc.integer({ min: 1, max: 47 }), { maxLength: 4 }),
      kCuts: fc.array(fc.integer({ min: 1, max: 47 }), { maxLength: 4 }),
      seed: fc.integer({ min: 0, max: 1000 }),
    });
    fc.assert(
      fc.property(arb, (a) => {
        const e = runTiled({ ...a, qHeads: a.heads[0]!, kvHeads: a.heads[1]! });
        for (const err of Object.values(e)) if (!(err < 1e-11)) return false;
        return true;
      }),
      { seed: 42, numRuns: 150 },
    );
  });

  it('a query row that attends no key of a task leaves the merged result untouched', () => {
    const shape = { qHeads: 1, kvHeads: 1, headDim: 2 };
    const q = Float32Array.of(1, 0, 0, 1);
    const k = Float32Array.of(1, 1, 1, 1);
    const v = Float32Array.of(3, 4, 5, 6);
    const taskO = new Float64Array(4);
    const taskLse = new Float64Array(2);
    // Causal: query 0 against key 1 is masked; query 1 against key 1 is attended.
    attentionForward(shape, true, q, k, v, 0, 2, 1, 1, taskO, taskLse, createScratch(4, 2));
    assert.equal(taskLse[0], Number.NEGATIVE_INFINITY);
    assert.deepEqual(Array.from(taskO.subarray(0, 2)), [0, 0]);
    assert.deepEqual(Array.from(taskO.subarray(2, 4)), [5, 6]);
    const o = Float64Array.of(7, 8, 0, 0);
    const lse = Float64Array.of(0.5, Number.NEGATIVE_INFINITY);
    mergeByLse(shape, o, lse, 0, 2, taskO, taskLse);
    assert.deepEqual(Array.from(o), [7, 8, 5, 6]);
    assert.equal(lse[0], 0.5);
  });
});

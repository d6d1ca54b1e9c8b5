import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs, sequencePairs } from '../../src/model/attention.ts';
import { resolveCluster, torusDimsFor, torusShapeNote } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { codeOf } from '../helpers/errors.ts';

test('resolveProblem fills defaults: Llama-3-70B attention, causal, 1.5x memory', () => {
  const p = resolveProblem({ world: 4, tokensPerRank: 4096 });
  assert.deepEqual(p.model, { qHeads: 64, kvHeads: 8, headDim: 128, bytesPerElement: 2 });
  assert.equal(p.mask, 'causal');
  assert.equal(p.memoryTokens, 6144);
  assert.equal(
    p.sequences.reduce((s, x) => s + x, 0),
    4 * 4096,
  );
});

test('resolveProblem rejects bad options with codes', () => {
  assert.equal(
    codeOf(() => resolveProblem({ world: 0 })),
    'option.world',
  );
  assert.equal(
    codeOf(() => resolveProblem({ world: 2.5 })),
    'option.world',
  );
  assert.equal(
    codeOf(() => resolveProblem({ tokensPerRank: -1 })),
    'option.tokensPerRank',
  );
  assert.equal(
    codeOf(() => resolveProblem({ mask: 'sliding' })),
    'option.mask',
  );
  assert.equal(
    codeOf(() => resolveProblem({ qHeads: 6, kvHeads: 4 })),
    'option.heads',
  );
  assert.equal(
    codeOf(() => resolveProblem({ batch: 'nonesuch' })),
    'batch.unknown',
  );
  assert.equal(
    codeOf(() => resolveProblem({ batch: [] })),
    'batch.empty',
  );
  assert.equal(
    codeOf(() => resolveProblem({ batch: [5, 0] })),
    'batch.length.nonPositive',
  );
  assert.equal(
    codeOf(() => resolveProblem({ batch: [1000, 1000], world: 1, memoryTokens: 1500 })),
    'capacity.exceeded',
  );
});

test('user layout: the packed batch split evenly, every token once (property)', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 30 }),
      fc.integer({ min: 1, max: 16 }),
      (lens, world) => {
        const p = resolveProblem({ batch: lens, world });
        const { rank, seq, start, length } = p.userLayout;
        const total = lens.reduce((s, x) => s + x, 0);
        const perRank = new Array<number>(world).fill(0);
        const next = new Array<number>(lens.length).fill(0);
        for (let i = 0; i < rank.length; i++) {
          perRank[rank[i]!]! += length[i]!;
          assert.equal(start[i], next[seq[i]!]); // rows of a sequence are contiguous and in order
          next[seq[i]!] = start[i]! + length[i]!;
        }
        assert.deepEqual(next, lens);
        for (let r = 0; r < world; r++) assert.ok(Math.abs(perRank[r]! - total / world) <= 1);
      },
    ),
    { seed: 7, numRuns: 200 },
  );
});

test('attendedPairs matches brute force counting (property)', () => {
  fc.assert(
    fc.property(
      fc.boolean(),
      fc.integer({ min: 0, max: 40 }),
      fc.integer({ min: 0, max: 40 }),
      fc.integer({ min: 0, max: 40 }),
      fc.integer({ min: 0, max: 40 }),
      (causal, qs, ql, ks, kl) => {
        let brute = 0;
        for (let q = qs; q < qs + ql; q++) for (let k = ks; k < ks + kl; k++) if (!causal || k <= q) brute++;
        assert.equal(attendedPairs(causal, qs, ql, ks, kl), brute);
      },
    ),
    { seed: 11, numRuns: 500 },
  );
  assert.equal(sequencePairs(true, 4), 10);
});

test('torusShapeNote speaks for long thin tori only (a prime world, or given dims), never for switches', () => {
  const torus = resolveCluster('torus');
  assert.equal(torusShapeNote(torus, 64), null); // 8 x 8
  assert.equal(torusShapeNote(torus, 232), null); // 8 x 29
  assert.match(torusShapeNote(torus, 233) ?? '', /1 x 233/); // prime: a ring
  assert.notEqual(torusShapeNote(resolveCluster('torus', { torusDims: [2, 64] }), 128), null);
  assert.equal(torusShapeNote(resolveCluster('hopper-ib'), 233), null);
  // Property: a note exactly when the long side is at least 16 times the short one.
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 5000 }), (world) => {
      const dims = torusDimsFor(torus, world);
      const thin = Math.max(...dims) >= 16 * Math.min(...dims);
      return (torusShapeNote(torus, world) !== null) === thin;
    }),
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ChunkCoster, paddedLength } from '../../src/cost/chunks.ts';
import { KernelModel, type KernelPolicy } from '../../src/cost/kernel.ts';
import { Network } from '../../src/cost/network.ts';
import { OpCost } from '../../src/cost/op-cost.ts';
import { preparePhase } from '../../src/executors/sim/prepare.ts';
import { expandChunks } from '../../src/plan/expand.ts';
import type { Plan } from '../../src/plan/types.ts';
import { planByteScale } from '../../src/planners/bytescale/index.ts';
import { planRing } from '../../src/planners/ring/index.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** The plan with every sequence at its padded length and no padding left: what TE computes. */
function padded(plan: Plan): Plan {
  const sets = plan.seqSets!;
  const seqs = Int32Array.from(plan.sequences);
  for (let s = 0; s + 1 < sets.offsets.length; s++)
    for (let i = sets.offsets[s]!; i < sets.offsets[s + 1]!; i++)
      seqs[sets.seqs[i]!] = paddedLength(plan.sequences[sets.seqs[i]!]!, sets.padTo?.[s] ?? 0);
  return {
    ...plan,
    sequences: seqs,
    seqSets: { offsets: sets.offsets, seqs: sets.seqs, padTo: new Int32Array(sets.padTo?.length ?? 0) },
  };
}

function prepare(plan: Plan, policy: KernelPolicy) {
  const kernel = new KernelModel(plan.model, { policy });
  const ctx = {
    plan,
    network: new Network(resolveCluster('hopper-ib'), plan.world),
    op: new OpCost(kernel, plan.mask),
    chunks: new ChunkCoster(plan, kernel),
  };
  return {
    fwd: preparePhase(ctx, plan.forward, 'forward'),
    bwd: preparePhase(ctx, plan.backward, 'backward'),
  };
}

const close = (a: number, b: number): boolean =>
  Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));

test('chunk rows cost exactly what their expansion (at padded lengths) costs', () => {
  const lengths = fc.array(
    fc.oneof(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 20000, max: 70000 })),
    { minLength: 1, maxLength: 12 },
  );
  fc.assert(
    fc.property(
      lengths,
      fc.integer({ min: 1, max: 8 }),
      fc.constantFrom('causal', 'full'),
      fc.constantFrom<KernelPolicy>('auto', 'varlen', 'cudnn'),
      fc.constantFrom('ring', 'bytescale'),
      (lens, world, mask, policy, strategy) => {
        const problem = resolveProblem({ batch: lens, world, mask, tokensPerRank: 1, memoryTokens: 1 << 30 });
        const plan = strategy === 'ring' ? planRing(problem) : planByteScale(problem);
        if (!plan.seqSets) return;
        const chunked = prepare(plan, policy);
        const explicit = prepare(expandChunks(padded(plan)), policy);
        for (const [a, b] of [
          [chunked.fwd, explicit.fwd],
          [chunked.bwd, explicit.bwd],
        ] as const) {
          assert.equal(a.opCount, b.opCount);
          for (let i = 0; i < a.opCount; i++)
            assert.ok(close(a.opDur[i]!, b.opDur[i]!), `op ${i}: ${a.opDur[i]} vs ${b.opDur[i]}`);
          assert.equal(a.flowCount, b.flowCount);
          for (let f = 0; f < a.flowCount; f++) {
            assert.deepEqual(
              [a.flowSrc[f], a.flowDst[f], a.flowGroup[f], a.flowKind[f]],
              [b.flowSrc[f], b.flowDst[f], b.flowGroup[f], b.flowKind[f]],
            );
            assert.ok(close(a.flowBytes[f]!, b.flowBytes[f]!));
          }
        }
      },
    ),
    { seed: 42, numRuns: 150 },
  );
});

test('padding is charged: a padded ring computes and sends more than its unpadded expansion', () => {
  const problem = resolveProblem({ batch: [1000, 3001, 777], world: 4 });
  const plan = planRing(problem);
  assert.equal(plan.seqSets?.padTo?.[0], 8);
  const withPad = prepare(plan, 'varlen');
  const noPad = prepare(expandChunks(plan), 'varlen');
  const sum = (a: Float64Array): number => a.reduce((s, v) => s + v, 0);
  assert.ok(sum(withPad.fwd.opDur) > sum(noPad.fwd.opDur));
  assert.ok(sum(withPad.fwd.flowBytes) > sum(noPad.fwd.flowBytes));
  // Tokens per part: each sequence padded to a multiple of 8, cut into 8 equal parts.
  const coster = new ChunkCoster(plan, new KernelModel(plan.model));
  const per = (1000 + 3008 + 784) / 8;
  for (let part = 0; part < 8; part++) assert.equal(coster.partTokens(0, 8, part), per);
});

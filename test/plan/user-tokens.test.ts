/**
 * Tokens per rank of the layout the rest of the model runs on, and its imbalance: user rows and
 * chunk rows (ring's DualChunkSwap) count the real tokens they hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { userTokenImbalance, userTokensPerRank } from '../../src/plan/layout.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const problem = resolveProblem({
  batch: [300, 17, 90, 41, 5, 128],
  world: 4,
  model: { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 4 },
});
const total = 300 + 17 + 90 + 41 + 5 + 128;

describe('user tokens per rank', () => {
  it('the even split holds every token once and is balanced to a token', () => {
    const plan = getPlanner('fcp').plan(problem, { blockSize: 16 });
    const t = userTokensPerRank(plan);
    assert.equal(
      t.reduce((a, b) => a + b, 0),
      total,
    );
    assert.ok(Math.max(...t) - Math.min(...t) <= 1);
    assert.ok(userTokenImbalance(plan) < 0.01);
  });

  it('chunk rows count their parts: ring holds every token once', () => {
    const plan = getPlanner('ring').plan(problem);
    assert.ok(plan.userChunks && plan.userChunks.rank.length > 0, 'ring shards by chunk rows');
    const t = userTokensPerRank(plan);
    assert.equal(
      t.reduce((a, b) => a + b, 0),
      total,
    );
  });

  it('a skewed layout is reported: all tokens on rank 0 of 4 is imbalance 3', () => {
    const plan = getPlanner('fcp').plan(problem, { blockSize: 16 });
    const skewed = { ...plan, userLayout: { ...plan.userLayout, rank: plan.userLayout.rank.map(() => 0) } };
    assert.ok(Math.abs(userTokenImbalance(skewed) - 3) < 1e-12);
  });
});

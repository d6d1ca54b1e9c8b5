/**
 * FCP's plan balance report (balance.ts): bytes sent plus received per rank, the NIC part of them,
 * and home-layout tokens, each as max / mean - 1; checked on a hand-built phase.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kvBytesPerToken } from '../../src/model/attention.ts';
import { emptyPhase, Kind, type Layout } from '../../src/plan/types.ts';
import { planBalance } from '../../src/planners/fcp/balance.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const model = { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 2 };

test('balance of a hand-built phase', () => {
  const ph = emptyPhase();
  // 4 ranks, 2 per node: 0 -> 1 (NVLink, 100 tokens), 0 -> 2 (NIC, 100 tokens).
  ph.transfers = {
    round: Int32Array.from([0, 1]),
    src: Int32Array.from([0, 0]),
    dst: Int32Array.from([1, 2]),
    kind: Uint8Array.from([Kind.kv, Kind.kv]),
    seq: Int32Array.from([0, 0]),
    start: Int32Array.from([0, 0]),
    length: Int32Array.from([100, 100]),
  };
  const home: Layout = {
    rank: Int32Array.from([0, 1, 2, 3]),
    seq: Int32Array.from([0, 0, 0, 0]),
    start: Int32Array.from([0, 300, 400, 500]),
    length: Int32Array.from([300, 100, 100, 100]),
  };
  const b = planBalance([{ phase: ph, forward: true }], home, 4, model, 2);
  const kv = 100 * kvBytesPerToken(model);
  // Bytes per rank: 2kv, kv, kv, 0 -> mean kv, max 2kv.
  assert.equal(b.commImbalance, 1);
  // NIC bytes: kv, 0, kv, 0 -> mean kv/2, max kv.
  assert.equal(b.nicImbalance, 1);
  assert.equal(b.maxNicBytes, kv);
  // Tokens 300, 100, 100, 100 -> mean 150.
  assert.equal(b.tokenImbalance, 1);
});

test('every FCP plan reports its balance; mode (b) has equal tokens', () => {
  const p = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 2 });
  for (const loaderLayout of [false, true]) {
    const plan = fcpPlanner.plan(p, { loaderLayout });
    const stats = plan.meta?.stats as { planBalance: ReturnType<typeof planBalance> } | undefined;
    assert.ok(stats, 'the plan reports its statistics');
    const b = stats.planBalance;
    for (const v of Object.values(b)) assert.ok(Number.isFinite(v) && v >= 0);
    if (loaderLayout) assert.ok(b.tokenImbalance <= 0.01, `tokens ${b.tokenImbalance}`);
  }
});

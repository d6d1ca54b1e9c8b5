/**
 * `fcp plan`'s re-plan without the locality tie-break on a worker thread (src/cli/locality.ts):
 * the same bytes as on the main thread, the planner's coded errors passed on, no worker left behind.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startLocalityReplan, WORKER_FROM } from '../../src/cli/locality.ts';
import { FcpError } from '../../src/core/issues.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { reshuffleBytes } from '../../src/plan/report.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

test('the worker re-plans to the bytes the main thread gets, direct and PXN, while the caller plans', async () => {
  for (const routing of ['direct', 'pxn'] as const) {
    const problem = resolveProblem({
      batch: 'longtail',
      world: 16,
      tokensPerRank: 4096,
      seed: 3,
      cluster: resolveCluster('hopper-ib', { routing }),
    });
    const options = { blockSize: 2048 };
    const onWorker = startLocalityReplan('fcp', problem, options, true);
    const plan = getPlanner('fcp').plan(problem, options); // this thread busy meanwhile
    const direct = reshuffleBytes(getPlanner('fcp').plan(problem, { ...options, noLocality: true }));
    assert.equal(await onWorker.result(), direct, routing);
    assert.equal(await startLocalityReplan('fcp', problem, options, false).result(), direct);
    // The locality tie-break saves bytes on this batch: the comparison says something.
    assert.ok(reshuffleBytes(plan) < direct, `${reshuffleBytes(plan)} vs ${direct}`);
  }
  assert.ok(WORKER_FROM > 16, 'small worlds plan on the main thread by default');
});

test("the planner's coded error comes back from the worker as from the main thread", async () => {
  const problem = resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 2048, seed: 1 });
  for (const worker of [true, false]) {
    await assert.rejects(
      startLocalityReplan('no-such-planner', problem, {}, worker).result(),
      (e: unknown) => e instanceof FcpError && e.code === 'strategy.unknown',
      `worker ${worker}`,
    );
  }
});

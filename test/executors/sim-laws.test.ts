/**
 * The simulator's laws (src/executors/sim/laws.ts): they hold on plans of every strategy, and the
 * checker names the law an engine breaks (engines that hide compute, slow down with bandwidth, or
 * slow down when transfers carry nothing).
 * bench/fuzz-sim.ts runs the same check on many more random plans.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng } from '../../src/core/rng.ts';
import { runPhase } from '../../src/executors/sim/engine.ts';
import type { PhaseEngine, SimOptions } from '../../src/executors/sim/index.ts';
import { checkSimLaws } from '../../src/executors/sim/laws.ts';
import { RATE_DEFAULTS } from '../../src/executors/sim/rates.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** A problem and its plan by `strategy`, drawn from `seed`: 8-24 ranks across nodes of 4. */
function randomCase(strategy: string, seed: number) {
  const r = new Rng(seed);
  const network = r.next() < 0.5 ? ('contention' as const) : ('fluid' as const);
  const routing = r.next() < 0.5 ? ('pxn' as const) : ('direct' as const);
  const cluster = resolveCluster(r.next() < 0.5 ? 'hopper-ib' : 'ratio-5920', { network, routing });
  const problem = resolveProblem({
    batch: ['longtail', 'magi', 'bimodal'][r.int(0, 2)]!,
    world: r.int(8, 24),
    tokensPerRank: 2048,
    seed,
    cluster,
    gpusPerNode: 4,
  });
  return { cluster, plan: getPlanner(strategy).plan(problem, {}) };
}

/** The built-in engine with its results bent by `bend` (a broken engine, for the checker). */
function bentEngine(bend: (run: ReturnType<typeof runPhase>, capacity: Float64Array) => void): PhaseEngine {
  return {
    name: 'bent',
    network: 'bent',
    run(phases, network) {
      const runs = phases.map((p) => {
        const run = runPhase(p, network.capacity, RATE_DEFAULTS);
        bend(run, network.capacity);
        return run;
      });
      return { runs, info: {} };
    },
  };
}

describe('simulator laws', () => {
  for (const strategy of ['fcp', 'ring', 'bytescale', 'wlb', 'magi'])
    it(`hold on random plans of ${strategy}`, () => {
      for (const seed of [1, 2]) {
        const { plan, cluster } = randomCase(strategy, seed + strategy.length * 10);
        assert.deepEqual(checkSimLaws(plan, cluster), [], `${strategy} seed ${seed}`);
      }
    });

  it('the checker names the law an engine breaks', () => {
    const { plan, cluster } = randomCase('fcp', 3);
    const laws = (o: SimOptions): string[] => [...new Set(checkSimLaws(plan, cluster, o).map((b) => b.law))];
    // Compute hidden: the makespan cut below the busiest rank's compute.
    const hidden = bentEngine((run) => {
      run.makespanMs = Math.max(...run.computeMs) / 2;
    });
    assert.ok(laws({ engine: hidden }).includes('makespan >= busiest compute'));
    // Slower with more bandwidth: the makespan grows with the links' total capacity.
    let total = 0;
    const greedy = bentEngine((run, capacity) => {
      total = capacity.reduce((a, b) => a + b, 0);
      run.makespanMs *= 1 + total * 1e-9;
    });
    assert.ok(laws({ engine: greedy }).includes('twice the bandwidth is not slower'));
    assert.ok(total > 0);
    // Slower once transfers carry no bytes: the makespan grows with the bytes' absence.
    let bytes = 0;
    const lazy = bentEngine((run) => {
      bytes = run.bytesSent.reduce((a, b) => a + b, 0);
      if (bytes === 0) run.makespanMs *= 2;
    });
    assert.ok(laws({ engine: lazy }).includes('free transfers are not slower'));
  });
});

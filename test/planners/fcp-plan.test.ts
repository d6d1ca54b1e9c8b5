/**
 * Whole FCP plans, checked by the validator (src/plan/validate.ts): random batches from every
 * generator at world sizes 1, 2, 3, 8, 16, 24, 64 and 256, causal and full, small token budgets
 * and block sizes so that the suite stays fast. Every plan must obey rules 1-5, have congestion 1
 * in every round, and exactly Δ `kv` rounds in both phases; ablation variants must stay valid;
 * the same problem and options must give a byte-identical plan file.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { GENERATOR_NAMES } from '../../src/batch/generators.ts';
import { formatIssue } from '../../src/core/issues.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { planToJson } from '../../src/plan/io.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner, planFcp } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const WORLDS = [1, 2, 3, 8, 16, 24, 64, 256];

/** Tokens per rank kept small at large worlds (the suite must stay fast). */
const tokensFor = (world: number, k: number): number =>
  world >= 256 ? 1024 : world >= 64 ? 1024 + 512 * (k % 4) : 1024 * (1 + (k % 8));

const caseArb = fc.record({
  world: fc.constantFrom(...WORLDS),
  k: fc.integer({ min: 0, max: 7 }),
  seed: fc.integer({ min: 0, max: 1_000_000 }),
  mask: fc.constantFrom('causal', 'full'),
  blockSize: fc.constantFrom(64, 128, 256, 512, 1024),
});

/** Whether the self-tuner kept a candidate with two-hop relays (tuner.ts: mode (a)'s one candidate across nodes). */
function relayed(plan: Plan): boolean {
  const t = plan.meta?.tuning as { candidates: { fanOut: boolean }[]; chosen: number } | undefined;
  return t?.candidates[t.chosen]?.fanOut === true;
}

/**
 * Validates and checks the congestion-free and Δ promises (`matching`: the default rounds). A plan
 * with relays keeps congestion 1 per link class, but its forward's `kv` rounds are the direct
 * edges' colouring plus the relays' (phase.ts), not Δ of one graph: the Δ claim is for direct plans.
 */
function checkPlan(plan: Plan, label: string, matching = true): void {
  const { issues, report } = validatePlan(plan);
  assert.deepEqual(issues.slice(0, 3).map(formatIssue), [], `${label}: plan breaks a rule`);
  assert.equal(report.attendedPairs, report.expectedPairs);
  if (!matching) return;
  for (const ph of ['forward', 'backward'] as const) {
    const r = report[ph];
    assert.ok(r.congestion <= 1, `${label}: ${ph} congestion ${r.congestion}`);
    if (ph === 'forward' && relayed(plan)) continue;
    assert.equal(
      r.kvRounds,
      r.kvDirectDelta,
      `${label}: ${ph} has ${r.kvRounds} kv rounds for Δ ${r.kvDirectDelta}`,
    );
    type KvStats = Record<'forward' | 'backward', { rounds: { kv: number }; delta: { kv: number } }>;
    const st = (plan.meta?.stats as KvStats | undefined)?.[ph];
    if (st) assert.equal(st.rounds.kv, st.delta.kv);
  }
}

for (const generator of GENERATOR_NAMES) {
  test(`every FCP plan is valid and congestion-free: ${generator} batches`, () => {
    fc.assert(
      fc.property(caseArb, ({ world, k, seed, mask, blockSize }) => {
        const problem = resolveProblem({
          batch: generator,
          world,
          tokensPerRank: tokensFor(world, k),
          seed,
          mask,
        });
        const plan = fcpPlanner.plan(problem, { blockSize });
        checkPlan(plan, `${generator} world ${world} seed ${seed} ${mask} block ${blockSize}`);
      }),
      { seed: 42, numRuns: 100 },
    );
  });
}

test('ablation variants stay valid', () => {
  const ablation = fc.record(
    {
      noPipeline: fc.boolean(),
      noReshuffleOverlap: fc.boolean(),
      coalesce: fc.constantFrom(1, 2, 16),
      commCoalesce: fc.constantFrom(1, 2, 4, 16),
      pushCoalesce: fc.constantFrom(1, 16),
      rounds: fc.constantFrom('matching' as const, 'naive' as const),
      noLocality: fc.boolean(),
      noAffinity: fc.boolean(),
      nodePacking: fc.boolean(),
      fixedBlocks: fc.boolean(),
      tolerance: fc.constantFrom(0, 0.01, 0.5),
      tile: fc.constantFrom(0, 128, 512, 4096),
      minTile: fc.constantFrom(32, 128, 1024),
    },
    { requiredKeys: [] },
  );
  fc.assert(
    fc.property(
      caseArb,
      fc.constantFrom(...GENERATOR_NAMES),
      ablation,
      ({ world, k, seed, mask, blockSize }, generator, a) => {
        const problem = resolveProblem({
          batch: generator,
          world: Math.min(world, 64),
          tokensPerRank: tokensFor(world, k),
          seed,
          mask,
        });
        const o: FcpPlannerOptions = { blockSize, ...a };
        const plan = planFcp(problem, o).plan;
        checkPlan(plan, `${generator} world ${problem.world} ${JSON.stringify(o)}`, o.rounds !== 'naive');
        if (o.noPipeline)
          for (const ph of [plan.forward, plan.backward]) {
            // Every op waits for the same group: all fetches before any compute.
            assert.ok(new Set(ph.compute.after).size <= 1);
          }
        // One round per group, the backward's push groups too unless they may hold more.
        if (o.coalesce === 1 && (o.pushCoalesce === 1 || o.commCoalesce === 1))
          for (const ph of [plan.forward, plan.backward])
            assert.deepEqual([...ph.groupOfRound], [...ph.groupOfRound.keys()]);
      },
    ),
    { seed: 9, numRuns: 60 },
  );
});

test('same problem and options give a byte-identical plan; another seed another plan', () => {
  const make = (seed: number): string =>
    planToJson(
      getPlanner('fcp').plan(resolveProblem({ batch: 'longtail', world: 24, tokensPerRank: 4096, seed }), {
        blockSize: 256,
      }),
    );
  const a = make(5);
  assert.equal(make(5), a);
  assert.notEqual(make(6), a);
  // Stage timings live on meta but never reach the file.
  const { plan, timings } = planFcp(resolveProblem({ world: 8, tokensPerRank: 2048 }));
  assert.ok(timings.total >= 0);
  assert.ok(!planToJson(plan).includes('"timings"'));
  assert.equal((plan.meta as { timings: unknown }).timings, timings);
});

test('a 512K-token sequence stays at a modest number of tasks and transfers', () => {
  // One 512K sequence among short ones, 64 ranks.
  const lengths = [524288, ...Array.from({ length: 400 }, (_, i) => 1000 + ((i * 7919) % 3000))];
  const problem = resolveProblem({ batch: lengths, world: 64 });
  const plan = planFcp(problem).plan;
  checkPlan(plan, 'one 512K sequence');
  // Grid tiles: one task per square of the block grid the rank computes.
  assert.ok(plan.tasks.rank.length < 100000, `${plan.tasks.rank.length} tasks`);
  assert.ok(
    plan.forward.transfers.round.length < 20000,
    `${plan.forward.transfers.round.length} forward transfers`,
  );
  // Cut finer (units of 1/16 of a rank's share), the sequence gets many small blocks and the
  // tasks stay bounded; untiled, about one task per key range that arrives separately.
  const fine = planFcp(problem, { maxUnitShare: 1 / 16 }).plan;
  const st = fine.meta?.stats as { tasks: number; blocks: number };
  assert.ok(st.blocks > 1000, `${st.blocks} blocks: the long sequence is cut fine`);
  assert.ok(fine.tasks.rank.length < 200000, `${fine.tasks.rank.length} tasks`);
  const untiled = planFcp(problem, { tile: 0 }).plan;
  assert.ok(untiled.tasks.rank.length < 20000, `${untiled.tasks.rank.length} tasks without tiling`);
});

test('memory never makes a valid problem fail: blocks shrink, and at worst the user layout stays', () => {
  const cases: [Parameters<typeof resolveProblem>[0], FcpPlannerOptions][] = [
    [{ world: 4, tokensPerRank: 128 }, {}],
    [{ world: 2, tokensPerRank: 64 }, {}],
    [{ world: 4, tokensPerRank: 140, memoryTokens: 140 }, { blockSize: 100 }],
    [{ world: 3, tokensPerRank: 140, memoryTokens: 140 }, { blockSize: 100 }],
    // No slack at all: the batch fills both ranks exactly.
    [{ batch: [3000, 3000, 3000], world: 2, memoryTokens: 4500 }, {}],
    [{ batch: [5, 7, 9000], world: 8, memoryTokens: 1127 }, {}],
    [{ world: 16, tokensPerRank: 100, memoryTokens: 100 }, { blockSize: 4096 }],
    [{ world: 8, tokensPerRank: 1000, memoryTokens: 1000, seed: 3 }, {}],
  ];
  for (const [p, o] of cases) {
    const problem = resolveProblem({ seed: 1, ...p });
    const plan = planFcp(problem, o).plan;
    checkPlan(plan, JSON.stringify(p));
    const home = new Float64Array(problem.world);
    for (let i = 0; i < plan.homeLayout.rank.length; i++)
      home[plan.homeLayout.rank[i]!]! += plan.homeLayout.length[i]!;
    assert.ok(Math.max(...home) <= problem.memoryTokens, `${JSON.stringify(p)}: a rank over its memory`);
  }
  // The user layout fallback reshuffles nothing (only K/V of a sequence split across ranks moves).
  const exact = planFcp(resolveProblem({ batch: [3000, 3000, 3000], world: 2, memoryTokens: 4500 })).plan;
  assert.equal((exact.meta?.stats as { memoryAttempts: number } | undefined)?.memoryAttempts, 0);
  assert.ok(exact.forward.transfers.kind.every((k) => k === Kind.kv));
});

/**
 * FCP's self-tuner on by default (src/planners/fcp/tuner.ts, tunedPipeline): the size model that
 * decides the candidate count (never the clock), the choice recorded in `meta.tuning`, the chosen
 * plan equal to planning its candidate alone (the candidates share one placement, which must not
 * change any of them), the law suite's promise (`kv` rounds = Δ without fanOut) on the chosen plan,
 * and byte-identical plans for the same input.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planToJson } from '../../src/plan/io.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner, planFcp, tuneCandidates } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions, LoaderSwaps } from '../../src/planners/fcp/options.ts';
import { BLOCK_SIZE_CANDIDATES, blockSizeCandidates } from '../../src/planners/fcp/tune-candidates.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

interface Tuning {
  candidates: {
    blockSize?: number;
    coalesce: number;
    fanOut: boolean;
    nicSwaps?: boolean;
    estimateMs: number;
  }[];
  chosen: number;
  budgetMs: number;
}

const tuningOf = (plan: Plan): Tuning => {
  const t = plan.meta?.tuning as Tuning | undefined;
  assert.ok(t !== undefined, 'the plan records its tuning');
  return t;
};

/** The plan file without `meta.tuning`: what planning the chosen candidate alone must give. */
const withoutTuning = (plan: Plan): string => {
  const { tuning: _, ...meta } = plan.meta ?? {};
  return planToJson({ ...plan, meta });
};

test('size model: at least one candidate, more budget never fewer, more ranks never more', () => {
  for (const available of [1, 3, 4])
    for (let world = 1; world <= 8192; world *= 2) {
      let last = 0;
      for (const budget of [0, 1, 50, 100, 200, 400, 1000, 1e6]) {
        const n = tuneCandidates(world, budget, available);
        assert.ok(n >= 1 && n <= available, `${world} ranks, ${budget} ms: ${n}`);
        assert.ok(n >= last, 'monotone in the budget');
        last = n;
        assert.ok(tuneCandidates(world * 2, budget, available) <= n, 'non-increasing in ranks');
      }
    }
  // The default budget keeps 256 ranks to one candidate (bench/planner.ts: one is 173 ms there).
  assert.equal(tuneCandidates(256, 200, 3), 1);
  assert.equal(tuneCandidates(16, 200, 2), 2);
});

test('block sizes by budget: at least one, more budget never fewer, more ranks never more', () => {
  for (const pairs of [undefined, 1, 2, 4])
    for (let world = 1; world <= 8192; world *= 2) {
      let last = 0;
      for (const budget of [0, 1, 50, 100, 200, 400, 1000, 1e6]) {
        const n = blockSizeCandidates(world, budget, pairs);
        assert.ok(n >= 1 && n <= BLOCK_SIZE_CANDIDATES.length, `${world} ranks, ${budget} ms: ${n}`);
        assert.ok(n >= last, 'monotone in the budget');
        last = n;
        assert.ok(blockSizeCandidates(world * 2, budget, pairs) <= n, 'non-increasing in ranks');
        if (pairs !== undefined && pairs > 1)
          assert.ok(blockSizeCandidates(world, budget, pairs) <= blockSizeCandidates(world, budget, 1));
      }
    }
  // The default budget: all four block sizes up to 64 ranks, two at 128, one from 256 on.
  assert.deepEqual(
    [16, 32, 64, 128, 256, 1024].map((w) => blockSizeCandidates(w, 200)),
    [4, 4, 4, 2, 1, 1],
  );
  assert.equal(BLOCK_SIZE_CANDIDATES[0], 4096, 'the default block size first');
});

test('a given block size pins it, the default one too; unset, mode (a) tunes it', () => {
  const p = resolveProblem({ batch: 'bimodal', world: 16, tokensPerRank: 8192, seed: 4 });
  for (const blockSize of [2048, 4096]) {
    const pinned = tuningOf(fcpPlanner.plan(p, { blockSize }));
    // Two group sizes, then the chosen one with relays and with NIC swaps (16 ranks on two
    // nodes, tuner.ts).
    assert.deepEqual(
      pinned.candidates.map((c) => c.blockSize),
      [blockSize, blockSize, blockSize, blockSize],
    );
    assert.deepEqual(
      pinned.candidates.map((c) => c.nicSwaps === true),
      [false, false, false, true],
    );
  }
  const tuned = tuningOf(fcpPlanner.plan(p, {}));
  assert.deepEqual([...new Set(tuned.candidates.map((c) => c.blockSize))], [4096, 6144, 8192, 2048]);
});

test('tuning on by default: choice recorded, least estimate, equal to its candidate alone, kv rounds = Δ', () => {
  for (const seed of [1, 2])
    for (const loaderLayout of [false, true]) {
      const p = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 8192, seed });
      const label = `seed ${seed} ${loaderLayout ? '(b)' : '(a)'}`;
      const plan = fcpPlanner.plan(p, { loaderLayout });
      const t = tuningOf(plan);
      // On two nodes both modes add the relay candidate (fcp-relay.test.ts), last in mode (b);
      // mode (a) then adds the chosen candidate with NIC swaps, last (tuner.ts).
      const nic = t.candidates.filter((c) => c.nicSwaps === true).length;
      assert.equal(nic, loaderLayout ? 0 : 1, label);
      if (!loaderLayout) assert.ok(t.candidates.at(-1)!.nicSwaps, label);
      const relay = t.candidates.filter((c) => c.fanOut && c.nicSwaps !== true).length;
      assert.equal(relay, 1, label);
      assert.ok(t.candidates.at(-1 - nic)!.fanOut, label);
      // Mode (b) also tries groups of 8 rounds (index.ts, LOADER_CANDIDATES); mode (a) tries them
      // for each block size the budget buys (BLOCK_SIZE_CANDIDATES), in that order.
      const pairs = tuneCandidates(16, 200, loaderLayout ? 3 : 2);
      const sizes = loaderLayout ? 1 : blockSizeCandidates(16, 200);
      assert.equal(t.candidates.length - relay - nic, pairs * sizes, label);
      // The NIC-swap variant is the best of the candidates before it, again with the swaps.
      if (nic === 1) {
        const before = t.candidates.slice(0, -1).reduce((x, c) => (c.estimateMs < x.estimateMs ? c : x));
        const last = t.candidates.at(-1)!;
        assert.deepEqual(
          [last.blockSize, last.coalesce, last.fanOut],
          [before.blockSize, before.coalesce, before.fanOut],
          label,
        );
      }
      assert.deepEqual(
        t.candidates.map((c) => c.blockSize),
        loaderLayout
          ? t.candidates.map(() => undefined)
          : [
              ...BLOCK_SIZE_CANDIDATES.slice(0, sizes).flatMap((b) => Array<number>(pairs).fill(b)),
              t.candidates.filter((c) => !c.fanOut).reduce((x, c) => (c.estimateMs < x.estimateMs ? c : x))
                .blockSize,
              t.candidates.at(-1)!.blockSize,
            ],
        `${label}: block sizes recorded in mode (a) only`,
      );
      if (loaderLayout)
        assert.deepEqual(
          t.candidates.filter((c) => !c.fanOut).map((c) => c.coalesce),
          [16, 8, 4],
        );
      assert.equal(t.budgetMs, 200);
      // The least direct estimate wins unless the relay plan's is less: by 1% in mode (b), by
      // any amount in mode (a) (tuner.ts, RELAY_MARGIN).
      // The NIC-swap variant (mode (a)) wins on any lead too.
      const least = Math.min(
        ...t.candidates.filter((c) => !c.fanOut && c.nicSwaps !== true).map((c) => c.estimateMs),
      );
      const r = t.candidates.find((c) => c.fanOut && c.nicSwaps !== true);
      const lead = loaderLayout ? 0.01 : 0;
      const beforeNic = r !== undefined && r.estimateMs < least * (1 - lead) ? r.estimateMs : least;
      const n = t.candidates.find((c) => c.nicSwaps === true);
      const want = n !== undefined && n.estimateMs < beforeNic ? n.estimateMs : beforeNic;
      assert.equal(t.candidates[t.chosen]!.estimateMs, want, `${label}: the least estimate wins`);
      // Sharing one placement between candidates changes none of them.
      const c = t.candidates[t.chosen]!;
      const loaderSwaps = (plan.meta?.loaderLayout as { swaps?: LoaderSwaps } | undefined)?.swaps;
      const opts: FcpPlannerOptions = {
        loaderLayout,
        tune: false,
        ...(c.blockSize !== undefined ? { blockSize: c.blockSize } : {}),
        coalesce: c.coalesce,
        fanOut: c.fanOut,
        ...(c.nicSwaps === true ? { nicSwaps: true } : {}),
        ...(loaderSwaps ? { loaderSwaps } : {}),
      };
      const alone = fcpPlanner.plan(p, opts);
      assert.equal(withoutTuning(plan), planToJson(alone), `${label}: chosen plan = its candidate alone`);
      const { issues, report } = validatePlan(plan);
      assert.deepEqual(issues, [], label);
      for (const dir of ['forward', 'backward'] as const)
        if (!c.fanOut || dir === 'backward')
          assert.equal(report[dir].kvRounds, report[dir].kvDirectDelta, `${label} ${dir}: kv rounds = Δ`);
      assert.equal(
        planToJson(fcpPlanner.plan(p, { loaderLayout })),
        planToJson(plan),
        `${label}: same bytes`,
      );
    }
});

test('mode (b) plans at least two group sizes without a budget; a budget sizes its search', () => {
  const p = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 2 });
  // 16 ranks: the full search fits 200 ms (loader-search.ts), 0 buys the least one.
  for (const budget of [undefined, 0, 200]) {
    const opts: FcpPlannerOptions = {
      loaderLayout: true,
      ...(budget !== undefined ? { planBudgetMs: budget } : {}),
    };
    const t = tuningOf(fcpPlanner.plan(p, opts));
    const direct = t.candidates.filter((c) => !c.fanOut).map((c) => c.coalesce);
    assert.deepEqual(direct, budget === 0 ? [16] : [16, 8, 4], `budget ${budget}`);
  }
  const wide = resolveProblem({ batch: 'longtail', world: 256, tokensPerRank: 512, seed: 2 });
  const t = tuningOf(fcpPlanner.plan(wide, { loaderLayout: true } as FcpPlannerOptions));
  assert.deepEqual(
    t.candidates.filter((c) => !c.fanOut).map((c) => c.coalesce),
    [16, 8],
    'at least two without a budget, where the default budget would allow one',
  );
});

test('a zero budget plans the default candidate only (across nodes in mode (a), with relays); tune: false records no tuning', () => {
  // One node: the default candidate as planned alone. Two nodes (16 ranks): mode (a)'s one
  // candidate fetches with relays (tuner.ts), as planning it alone with `fanOut` does.
  for (const [world, fanOut] of [
    [8, false],
    [16, true],
  ] as const) {
    const p = resolveProblem({ batch: 'magi', world, tokensPerRank: 8192, seed: 3 });
    const one = planFcp(p, { planBudgetMs: 0 }).plan;
    assert.equal(tuningOf(one).candidates.length, 1);
    assert.equal(tuningOf(one).candidates[0]!.coalesce, 16);
    assert.equal(tuningOf(one).candidates[0]!.fanOut, fanOut);
    const untuned = planFcp(p, { tune: false, ...(fanOut ? { fanOut } : {}) }).plan;
    assert.equal(untuned.meta?.tuning, undefined);
    assert.equal(withoutTuning(one), planToJson(untuned), `${world} ranks`);
  }
});

test('progress: fractions non-decreasing in [0, 1], ending at 1, and the plan unchanged by the hook', () => {
  for (const loaderLayout of [false, true])
    for (const tune of [true, false]) {
      const problem = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 2048, seed: 3 });
      const base: FcpPlannerOptions = {
        ...(loaderLayout ? { loaderLayout: true } : {}),
        ...(tune ? {} : { tune: false }),
      };
      const seen: number[] = [];
      const withHook = fcpPlanner.plan(problem, { ...base, onProgress: (f: number) => seen.push(f) });
      const without = fcpPlanner.plan(problem, base);
      assert.equal(
        planToJson(withHook),
        planToJson(without),
        `mode ${loaderLayout ? 'b' : 'a'}, tune ${tune}`,
      );
      assert.ok(seen.length >= 1);
      for (let i = 0; i < seen.length; i++) {
        assert.ok(seen[i]! >= 0 && seen[i]! <= 1, `fraction ${seen[i]}`);
        if (i > 0) assert.ok(seen[i]! >= seen[i - 1]!, `fractions ${seen.join(', ')}`);
      }
      assert.equal(seen[seen.length - 1], 1, `fractions ${seen.join(', ')}`);
    }
});

test('fanOut with a one-candidate budget also plans the relay variant of the direct plan, kept by its lead', () => {
  // 3 nodes of 8: a budget of 10 ms buys one block size and one candidate (the direct plan).
  const p = resolveProblem({ batch: 'longtail', world: 24, tokensPerRank: 4096, seed: 3 });
  assert.equal(tuneCandidates(24, 10, 4), 1);
  for (const loaderLayout of [false, true]) {
    const o: FcpPlannerOptions = {
      fanOut: true,
      planBudgetMs: 10,
      blockSize: 512,
      ...(loaderLayout ? { loaderLayout } : {}),
    };
    const plan = fcpPlanner.plan(p, o);
    const t = tuningOf(plan);
    assert.equal(t.candidates.length, 2, 'the direct plan and its relay variant');
    const [direct, relay] = t.candidates as [Tuning['candidates'][0], Tuning['candidates'][0]];
    assert.equal(direct.fanOut, false);
    assert.equal(relay.fanOut, true);
    assert.equal(relay.coalesce, direct.coalesce);
    assert.equal(relay.blockSize, direct.blockSize);
    // The relay plan is kept only when its estimate leads by the margin (1%).
    assert.equal(t.chosen, relay.estimateMs < direct.estimateMs * 0.99 ? 1 : 0);
    assert.deepEqual(validatePlan(plan).issues, []);
    // Without fanOut the same budget plans the direct plan alone in mode (a).
    const direct1: FcpPlannerOptions = { planBudgetMs: 10, blockSize: 512 };
    if (!loaderLayout) assert.equal(tuningOf(fcpPlanner.plan(p, direct1)).candidates.length, 1);
  }
  // One node: nothing to relay across, one candidate.
  const one = resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 4096, seed: 3 });
  const single: FcpPlannerOptions = { fanOut: true, planBudgetMs: 0, blockSize: 512 };
  assert.equal(tuningOf(fcpPlanner.plan(one, single)).candidates.length, 1);
});

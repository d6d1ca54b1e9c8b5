/**
 * `loaderLayout`, deployment mode (b): the loader delivers a home layout with equal tokens per rank
 * (within 1% of the mean; the rest of the model runs per token in it), so attention needs no
 * reshuffle. The levelled layout covers every token exactly once; plans from it are valid,
 * congestion-free, and move no `in`/`out` bytes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { evenUserLayout } from '../../src/plan/layout.ts';
import type { Layout } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner, type TuningRecord } from '../../src/planners/fcp/index.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { layoutAtCap } from '../../src/planners/fcp/loader-caps.ts';
import {
  type FcpPlannerOptions,
  LOADER_SWAPS,
  type LoaderSwaps,
  resolveFcpOptions,
} from '../../src/planners/fcp/options.ts';
import { levelTokens, TOKEN_BAND, tokenImbalance } from '../../src/planners/fcp/placement/loader-layout.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** Per-rank tokens of a layout. */
function perRank(l: Layout, world: number): number[] {
  const t = new Array<number>(world).fill(0);
  for (let i = 0; i < l.rank.length; i++) t[l.rank[i]!]! += l.length[i]!;
  return t;
}

/** Asserts that `l` covers every token of every sequence exactly once. */
function assertCovers(l: Layout, sequences: Int32Array): void {
  const rows = Array.from({ length: sequences.length }, () => [] as [number, number][]);
  for (let i = 0; i < l.rank.length; i++) {
    assert.ok(l.length[i]! > 0, 'no empty rows');
    rows[l.seq[i]!]!.push([l.start[i]!, l.length[i]!]);
  }
  rows.forEach((r, s) => {
    r.sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [a, n] of r) {
      assert.equal(a, at, `sequence ${s}: gap or overlap at ${at}`);
      at += n;
    }
    assert.equal(at, sequences[s], `sequence ${s} covered to its end`);
  });
}

test('levelTokens: every rank within the band, every token once, deterministic', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 1, max: 12 }),
      fc.constantFrom('causal' as const, 'full' as const),
      fc.integer({ min: 0, max: 1000 }),
      (lengths, world, mask, seed) => {
        const sequences = Int32Array.from(lengths);
        // A skewed start: rank r holds sequences with (s * 7 + seed) mod world = r, whole.
        const rows = lengths.map((len, s) => ({ rank: (s * 7 + seed) % world, s, len }));
        const skewed: Layout = {
          rank: Int32Array.from(rows, (r) => r.rank),
          seq: Int32Array.from(rows, (r) => r.s),
          start: new Int32Array(rows.length),
          length: Int32Array.from(rows, (r) => r.len),
        };
        const out = levelTokens(skewed, sequences, world, mask);
        assertCovers(out, sequences);
        const total = lengths.reduce((a, b) => a + b, 0);
        const slack = Math.floor((TOKEN_BAND * total) / world);
        perRank(out, world).forEach((t, r) => {
          const share = Math.floor(((r + 1) * total) / world) - Math.floor((r * total) / world);
          assert.ok(Math.abs(t - share) <= slack, `rank ${r}: ${t} tokens, share ${share} +- ${slack}`);
        });
        assert.deepEqual(levelTokens(skewed, sequences, world, mask), out);
      },
    ),
    { seed: 11, numRuns: 200 },
  );
});

test('levelTokens leaves a balanced layout alone and moves the cheapest tokens first', () => {
  const sequences = Int32Array.from([1000, 1000, 30000, 2000]);
  const even = evenUserLayout(sequences, 4);
  assert.deepEqual(levelTokens(even, sequences, 4, 'causal'), even);
  // Rank 0 holds both short sequences and the head of the long one; rank 1 the rest of the long one.
  const l: Layout = {
    rank: Int32Array.from([0, 0, 0, 1, 2]),
    seq: Int32Array.from([0, 1, 2, 2, 3]),
    start: Int32Array.from([0, 0, 0, 20000, 0]),
    length: Int32Array.from([1000, 1000, 20000, 10000, 2000]),
  };
  const out = levelTokens(l, sequences, 4, 'causal');
  assertCovers(out, sequences);
  // Rank 0 (22000 tokens) gives its short sequences whole before the head of the long one.
  for (let i = 0; i < out.rank.length; i++) if (out.seq[i]! < 2) assert.notEqual(out.rank[i], 0);
  // Rank 1 (10000) gives the first tokens of its row (they see the fewest keys) and keeps the tail.
  const r1 = [...out.rank.keys()].filter((i) => out.rank[i] === 1 && out.seq[i] === 2);
  assert.ok(r1.some((i) => out.start[i]! + out.length[i]! === 30000));
  assert.ok(tokenImbalance(out, 4) <= 0.01);
});

test('loaderLayout plans: valid, congestion-free, equal tokens per rank, no in/out bytes (property)', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(2, 3, 8, 16),
      fc.integer({ min: 0, max: 1000 }),
      fc.constantFrom('causal', 'full'),
      fc.constantFrom(128, 512, 1024),
      fc.constantFrom('longtail', 'magi', 'bimodal'),
      (world, seed, mask, blockSize, batch) => {
        const problem = resolveProblem({ batch, world, tokensPerRank: 4096, seed, mask });
        const plan = fcpPlanner.plan(problem, { blockSize, loaderLayout: true });
        const loaded = validatePlan(plan);
        assert.deepEqual(loaded.issues.slice(0, 3).map(formatIssue), []);
        // Relays (a tuning candidate in mode (b) across nodes, fcp-relay.test.ts) add forward
        // `kv` rounds beyond Δ; without them the rounds are exactly Δ.
        const t = plan.meta?.tuning as { candidates: { fanOut: boolean }[]; chosen: number } | undefined;
        const relayed = t?.candidates[t.chosen]?.fanOut === true;
        for (const ph of ['forward', 'backward'] as const) {
          assert.ok(loaded.report[ph].congestion <= 1);
          if (!relayed || ph === 'backward')
            assert.equal(loaded.report[ph].kvRounds, loaded.report[ph].kvDirectDelta);
          assert.equal(loaded.report[ph].bytes.in + loaded.report[ph].bytes.out, 0, 'nothing reshuffled');
        }
        assert.deepEqual(plan.homeLayout, plan.userLayout);
        const imb = tokenImbalance(plan.homeLayout, world);
        assert.ok(imb <= 0.01, `token imbalance ${imb}`);
        const meta = plan.meta?.loaderLayout as
          | {
              tokenImbalance: number;
              swapSteps: number;
              levelledImbalance: { forward: number; backward: number };
              swappedImbalance: { forward: number; backward: number };
            }
          | undefined;
        assert.equal(meta?.tokenImbalance, imb);
        // The token swaps (token-swap.ts) are recorded: how many, and the modelled per-phase
        // compute imbalance before and after them.
        assert.ok(Number.isInteger(meta?.swapSteps) && meta!.swapSteps >= 0);
        for (const k of ['levelledImbalance', 'swappedImbalance'] as const)
          for (const ph of ['forward', 'backward'] as const) assert.ok(meta![k][ph] >= 0, `${k}.${ph}`);
        if (meta!.swapSteps === 0) assert.deepEqual(meta!.swappedImbalance, meta!.levelledImbalance);
      },
    ),
    { seed: 5, numRuns: 30 },
  );
});

test('an unscored cap (one cap searched) gives the same layout as a scored one, without the score', () => {
  const problem = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 3 });
  const o = resolveFcpOptions({});
  const kernel = new KernelTime(problem.model, o.calibration);
  const scored = layoutAtCap(problem, o, kernel, 1.1);
  const unscored = layoutAtCap(problem, o, kernel, 1.1, false);
  assert.deepEqual(unscored.layout, scored.layout);
  assert.deepEqual(unscored.blockSize, scored.blockSize);
  assert.ok(Number.isFinite(scored.cost) && scored.cost > 0);
  assert.ok(Number.isNaN(unscored.cost) && Number.isNaN(unscored.kvMs));
});

/** The loader layout's recorded swaps and exchanges of a mode (b) plan. */
function swapsOf(plan: ReturnType<typeof fcpPlanner.plan>): { swaps: string; swapSteps: number } {
  return plan.meta?.loaderLayout as { swaps: string; swapSteps: number };
}

test('long swap variants go on where the short refinement used all 32 exchanges, and only there', () => {
  const plan = (p: ReturnType<typeof resolveProblem>, loaderSwaps: LoaderSwaps) => {
    const o: FcpPlannerOptions = { loaderLayout: true, tune: false, loaderSwaps };
    return fcpPlanner.plan(p, o);
  };
  // longtail, 32 ranks, 8K tokens a rank, seed 2: the swaps anywhere use all 32 exchanges, and
  // carried on they find more.
  const p = resolveProblem({ batch: 'longtail', world: 32, tokensPerRank: 8192, seed: 2 });
  const short = plan(p, 'any');
  const long = plan(p, 'any-long');
  assert.equal(swapsOf(short).swapSteps, 32);
  assert.equal(swapsOf(long).swaps, 'any-long');
  assert.ok(swapsOf(long).swapSteps > 32 && swapsOf(long).swapSteps <= 128, `${swapsOf(long).swapSteps}`);
  assert.deepEqual(validatePlan(long).issues.map(formatIssue), []);
  assert.ok(tokenImbalance(long.homeLayout, 32) <= TOKEN_BAND + 1e-9);
  // The same levelled layout before the exchanges.
  const levelled = (x: typeof long): unknown =>
    (x.meta!.loaderLayout as { levelledImbalance: unknown }).levelledImbalance;
  assert.deepEqual(levelled(long), levelled(short));
  // No long variant, so pinning one plans the short one: bimodal, 16 ranks, 16K tokens a rank,
  // seed 1 uses all 32 exchanges but finds no 33rd; longtail, 16 ranks, 4K tokens, seed 3 stops
  // after 12.
  for (const q of [
    resolveProblem({ batch: 'bimodal', world: 16, tokensPerRank: 16384, seed: 1 }),
    resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 4096, seed: 3 }),
  ]) {
    const a = plan(q, 'any');
    assert.equal(swapsOf(a).swaps, 'any');
    assert.equal(JSON.stringify(plan(q, 'any-long')), JSON.stringify(a));
  }
});

test('a tuned mode (b) plan is its recorded swap variant and candidate planned alone', () => {
  // The tuned plans keep `node-long`, `any-long` and `node` (8K tokens a rank at 32 ranks, 4K at 64).
  for (const [batch, world, seed, want] of [
    ['magi', 32, 2, 'node-long'],
    ['magi', 64, 5, 'any-long'],
    ['longtail', 32, 2, 'node'],
  ] as const) {
    const label = `${batch} ${world} seed ${seed}`;
    const p = resolveProblem({ batch, world, tokensPerRank: 262144 / world, seed });
    const tuned = fcpPlanner.plan(p, { loaderLayout: true });
    const swaps = swapsOf(tuned).swaps as LoaderSwaps;
    assert.ok(LOADER_SWAPS.includes(swaps), swaps);
    assert.equal(swaps, want, label);
    const t = tuned.meta?.tuning as TuningRecord;
    const c = t.candidates[t.chosen]!;
    // A long variant is planned with the winning candidate only and recorded last.
    if (swaps.endsWith('-long')) assert.equal(t.chosen, t.candidates.length - 1, label);
    const o: FcpPlannerOptions = {
      loaderLayout: true,
      tune: false,
      loaderSwaps: swaps,
      coalesce: c.coalesce,
      fanOut: c.fanOut,
    };
    const { tuning: _t, ...meta } = tuned.meta!;
    const alone = fcpPlanner.plan(p, o);
    assert.equal(JSON.stringify(alone), JSON.stringify({ ...tuned, meta }), label);
    assert.deepEqual(validatePlan(tuned).issues.map(formatIssue), [], label);
  }
});

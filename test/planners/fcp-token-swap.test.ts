/**
 * The loader layout's token-neutral refinement (placement/token-swap.ts): from a levelled layout
 * it keeps every rank's tokens in its band, covers every token exactly once, never raises
 * max fwd + max bwd (modelled, phase-cost.ts), reports loads that are those of the layout it
 * returns, and is deterministic; on a layout that is balanced in tokens but not in compute it
 * exchanges pieces and lowers the objective.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Layout, Mask } from '../../src/plan/types.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { levelTokens, tokenBounds } from '../../src/planners/fcp/placement/loader-layout.ts';
import {
  layoutPhaseMs,
  type PhaseLoads,
  refineLoaderLayout,
  type SwapModel,
} from '../../src/planners/fcp/placement/token-swap.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const kernel = new KernelTime(resolveProblem({ world: 2 }).model);
const grid = { tmax: 1024, minTile: 256, wholeMax: 8192 };

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

const objective = (l: PhaseLoads): number => Math.max(...l.fwd) + Math.max(...l.bwd);

function assertClose(a: Float64Array, b: Float64Array, what: string): void {
  for (let r = 0; r < a.length; r++)
    assert.ok(Math.abs(a[r]! - b[r]!) <= 1e-9 * Math.max(1, Math.abs(b[r]!)), `${what}: rank ${r}`);
}

/** A levelled layout of `lengths` over `world` ranks from a skewed start (whole sequences). */
function levelled(lengths: number[], world: number, mask: Mask, seed: number): Layout {
  const sequences = Int32Array.from(lengths);
  const skewed: Layout = {
    rank: Int32Array.from(lengths, (_, s) => (s * 7 + seed) % world),
    seq: Int32Array.from(lengths, (_, s) => s),
    start: new Int32Array(lengths.length),
    length: Int32Array.from(lengths),
  };
  return levelTokens(skewed, sequences, world, mask);
}

function model(lengths: number[], mask: Mask, block: number): SwapModel {
  const sequences = Int32Array.from(lengths);
  return { sequences, mask, blockSize: new Int32Array(lengths.length).fill(block), grid, kernel };
}

test('refineLoaderLayout: tokens in band, every token once, objective never rises, exact loads, deterministic', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 12000 }), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 8 }),
      fc.constantFrom('causal' as const, 'full' as const),
      fc.constantFrom(256, 512, 1024),
      fc.integer({ min: 0, max: 1000 }),
      (lengths, world, mask, block, seed) => {
        const input = levelled(lengths, world, mask, seed);
        const m = model(lengths, mask, block);
        const total = lengths.reduce((a, b) => a + b, 0);
        const bounds = tokenBounds(total, world);
        const o = { ...bounds, steps: 40, partners: 3, nodeSize: 1 + (seed % 4) };
        const out = refineLoaderLayout(input, world, m, o);
        assertCovers(out.layout, m.sequences);
        const t0 = perRank(input, world);
        perRank(out.layout, world).forEach((t, r) => {
          assert.ok(t >= Math.min(bounds.lo[r]!, t0[r]!), `rank ${r}: ${t} tokens below its band`);
          assert.ok(t <= Math.max(bounds.hi[r]!, t0[r]!), `rank ${r}: ${t} tokens above its band`);
        });
        const before = layoutPhaseMs(input, world, m);
        const after = layoutPhaseMs(out.layout, world, m);
        assertClose(out.before.fwd, before.fwd, 'forward before');
        assertClose(out.before.bwd, before.bwd, 'backward before');
        assertClose(out.after.fwd, after.fwd, 'forward after');
        assertClose(out.after.bwd, after.bwd, 'backward after');
        assert.ok(objective(after) <= objective(before) * (1 + 1e-9), 'max fwd + max bwd never rises');
        assert.ok(out.steps <= o.steps);
        assert.deepEqual(refineLoaderLayout(input, world, m, o), out, 'same input, same refinement');
      },
    ),
    { numRuns: 60, seed: 15 },
  );
});

test('refineLoaderLayout: a layout equal in tokens but not in compute is exchanged towards balance', () => {
  // Rank 0 holds one 8K sequence (causal: ~32M pairs), rank 1 eight 1K ones (~4M): equal tokens.
  const lengths = [8192, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024];
  const input: Layout = {
    rank: Int32Array.from(lengths, (_, s) => (s === 0 ? 0 : 1)),
    seq: Int32Array.from(lengths, (_, s) => s),
    start: new Int32Array(lengths.length),
    length: Int32Array.from(lengths),
  };
  const m = model(lengths, 'causal', 1024);
  const bounds = tokenBounds(16384, 2);
  const out = refineLoaderLayout(input, 2, m, { ...bounds, steps: 50, partners: 3, nodeSize: 2 });
  assert.ok(out.steps > 0, 'some exchange is applied');
  const before = objective(out.before);
  const after = objective(out.after);
  assert.ok(
    after < 0.8 * before,
    `objective ${before.toFixed(3)} -> ${after.toFixed(3)} ms: at least 20% lower`,
  );
  for (const t of perRank(out.layout, 2))
    assert.ok(Math.abs(t - 8192) <= 40, `${t} tokens: within the band (0.5% of 8192)`);
  assertCovers(out.layout, m.sequences);
});

test('refineLoaderLayout: a busiest rank whose lightest partners are on other nodes exchanges with its node mates', () => {
  // Nodes of 2: rank 0 holds one 8K causal sequence, rank 1 (its node mate) two 4K ones, ranks 2
  // and 3 (the other node) sixteen 512s each, the lightest. The long sequence's blocks may not
  // cross nodes (new K/V across the NIC), and sending it whole only moves the problem: the only
  // exchange that helps is with rank 1.
  const lengths = [8192, ...new Array<number>(2).fill(4096), ...new Array<number>(32).fill(512)];
  const rankOf = (s: number): number => (s === 0 ? 0 : s <= 2 ? 1 : s <= 18 ? 2 : 3);
  const input: Layout = {
    rank: Int32Array.from(lengths, (_, s) => rankOf(s)),
    seq: Int32Array.from(lengths, (_, s) => s),
    start: new Int32Array(lengths.length),
    length: Int32Array.from(lengths),
  };
  const m = model(lengths, 'causal', 1024);
  const bounds = tokenBounds(4 * 8192, 4);
  // One partner per key: the world's lightest alone (rank 2) would leave rank 0 without exchange.
  const out = refineLoaderLayout(input, 4, m, { ...bounds, steps: 50, partners: 3, nodeSize: 2 });
  const load = (r: number): number => out.before.fwd[r]! + out.before.bwd[r]!;
  assert.ok(load(0) > load(1) && load(1) > load(2) && load(2) === load(3), 'the loads the test is about');
  assert.ok(out.steps > 0, 'an exchange with the node mate is applied');
  assert.ok(
    objective(out.after) < 0.85 * objective(out.before),
    `objective ${objective(out.before).toFixed(3)} -> ${objective(out.after).toFixed(3)} ms: at least 15% lower`,
  );
  for (let i = 0; i < out.layout.rank.length; i++)
    if (out.layout.seq[i] === 0) assert.ok(out.layout.rank[i]! < 2, 'the long sequence stays in its node');
  for (const t of perRank(out.layout, 4))
    assert.ok(Math.abs(t - 8192) <= 40, `${t} tokens: within the band (0.5% of 8192)`);
  assertCovers(out.layout, m.sequences);
});

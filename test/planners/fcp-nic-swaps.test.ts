/**
 * Mode (a)'s experimental NIC swaps (placement/nic-swaps.ts): on random batches the swaps keep every
 * block on one rank, memory within capacity, the loads consistent and no rank above the cap, and
 * never raise the sum of squares of the cross-node tokens each rank sends and receives; a small
 * hand-built case shows the swap that evens two senders, and the checks reject a broken placement.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { LLAMA3_70B } from '../../src/model/attention.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { plannerContext } from '../../src/planners/fcp/context.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { type FcpPlannerOptions, resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import type { Blocks } from '../../src/planners/fcp/placement/blocks.ts';
import type { Placement } from '../../src/planners/fcp/placement/distribute.ts';
import { NIC_TOLERANCE, nicSwaps } from '../../src/planners/fcp/placement/nic-swaps.ts';
import { placeBlocks } from '../../src/planners/fcp/placement/place.ts';
import type { SeqRows } from '../../src/planners/fcp/placement/seq-rows.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const TM = new KernelTime(LLAMA3_70B);

/** Sum over ranks of (cross-node tokens sent)^2 + (received)^2 in the reshuffle of `blockRank`. */
function nicSquares(
  blocks: Blocks,
  rows: SeqRows,
  blockRank: Int32Array,
  world: number,
  nodeSize: number,
): number {
  const send = new Float64Array(world);
  const recv = new Float64Array(world);
  for (let b = 0; b < blocks.seq.length; b++) {
    const s = blocks.seq[b]!;
    const a = blocks.start[b]!;
    const e = a + blocks.length[b]!;
    const h = blockRank[b]!;
    for (let i = rows.off[s]!; i < rows.off[s + 1]!; i++) {
      const ov = Math.min(e, rows.start[i]! + rows.length[i]!) - Math.max(a, rows.start[i]!);
      const q = rows.rank[i]!;
      if (ov <= 0 || Math.floor(q / nodeSize) === Math.floor(h / nodeSize)) continue;
      send[q]! += ov;
      recv[h]! += ov;
    }
  }
  let sum = 0;
  for (let r = 0; r < world; r++) sum += send[r]! * send[r]! + recv[r]! * recv[r]!;
  return sum;
}

/** Throws unless every block is on one rank, loads and memory add up, memory and the cap hold. */
function checkPlacement(
  blocks: Blocks,
  w: Float64Array,
  p: Placement,
  world: number,
  memoryTokens: number,
  cap: number,
): void {
  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  for (let b = 0; b < blocks.seq.length; b++) {
    const r = p.blockRank[b]!;
    assert.ok(Number.isInteger(r) && r >= 0 && r < world, `block ${b} on rank ${r}`);
    load[r]! += w[b]!;
    mem[r]! += blocks.length[b]!;
  }
  for (let r = 0; r < world; r++) {
    assert.ok(mem[r]! <= memoryTokens, `rank ${r} holds ${mem[r]} > ${memoryTokens} tokens`);
    assert.ok(Math.abs(mem[r]! - p.memoryLoad[r]!) < 1e-6, `memory load of rank ${r}`);
    assert.ok(Math.abs(load[r]! - p.computeLoad[r]!) <= 1e-9 * cap * world, `compute load of rank ${r}`);
    assert.ok(load[r]! <= cap * (1 + 1e-9), `rank ${r} load ${load[r]} above the cap ${cap}`);
  }
}

test('NIC swaps: placement valid, loads under the cap, NIC squares never rise (random batches)', () => {
  let swapped = 0;
  fc.assert(
    fc.property(
      fc.constantFrom('longtail', 'magi', 'bimodal'),
      fc.constantFrom(16, 32),
      fc.integer({ min: 1, max: 1000 }),
      (batch, world, seed) => {
        const problem = resolveProblem({ batch, world, tokensPerRank: 8192, seed });
        // The placer alone, without the swaps or the per-phase exchanges.
        const ctx = plannerContext(problem, resolveFcpOptions({ blockSize: 1024, phaseSwaps: 0 }), TM);
        const { blocks, weights, placement } = placeBlocks(ctx);
        const nodeSize = ctx.links.nodeSize;
        const before = nicSquares(blocks, ctx.userRows, placement.blockRank, world, nodeSize);
        let max = 0;
        for (const l of placement.computeLoad) max = Math.max(max, l);
        const cap = Math.max(max, (weights.total / world) * (1 + NIC_TOLERANCE));
        const p: Placement = {
          ...placement,
          blockRank: placement.blockRank.slice(),
          computeLoad: placement.computeLoad.slice(),
          memoryLoad: placement.memoryLoad.slice(),
        };
        const n = nicSwaps(blocks, weights.block, ctx.userRows, p, {
          world,
          nodeSize,
          memoryTokens: problem.memoryTokens,
        });
        checkPlacement(blocks, weights.block, p, world, problem.memoryTokens, cap);
        const after = nicSquares(blocks, ctx.userRows, p.blockRank, world, nodeSize);
        assert.ok(after <= before, `NIC squares rose: ${before} -> ${after}`);
        swapped += n;
        if (n === 0) assert.deepEqual(p.blockRank, placement.blockRank, 'no swap, no change');
        else assert.ok(after < before, 'a swap lowers the squares');
      },
    ),
    { numRuns: 12, seed: 24 },
  );
  assert.ok(swapped > 0, 'some batch was swapped');
});

test('NIC swaps: two equal blocks from one sender are split between two senders', () => {
  // 2 nodes of 2 ranks; one sequence of 4 blocks of 100 tokens with equal weights (as if not
  // causal), user ranks 0,0,1,1 (node 0); blocks 0 and 1 (both from rank 0) sit on node 1.
  const blocks = {
    seq: Int32Array.from([0, 0, 0, 0]),
    start: Int32Array.from([0, 100, 200, 300]),
    length: Int32Array.from([100, 100, 100, 100]),
    seqBlocks: Int32Array.from([0, 4]),
    unitSeq: Int32Array.from([0, 0, 0, 0]),
    unitBlockA: Int32Array.from([0, 1, 2, 3]),
    unitBlockB: Int32Array.from([-1, -1, -1, -1]),
  } as unknown as Blocks;
  const rows: SeqRows = {
    off: Int32Array.from([0, 2]),
    rank: Int32Array.from([0, 1]),
    start: Int32Array.from([0, 200]),
    length: Int32Array.from([200, 200]),
  };
  const w = Float64Array.from([1, 1, 1, 1]);
  const p: Placement = {
    unitRank: Int32Array.from([2, 3, 0, 1]),
    blockRank: Int32Array.from([2, 3, 0, 1]),
    computeLoad: Float64Array.from([1, 1, 1, 1]),
    memoryLoad: Float64Array.from([100, 100, 100, 100]),
    greedyImbalance: 0,
    refineSteps: 0,
  };
  const before = nicSquares(blocks, rows, p.blockRank, 4, 2);
  const n = nicSwaps(blocks, w, rows, p, { world: 4, nodeSize: 2, memoryTokens: 1000 });
  assert.equal(n, 1);
  // Rank 0 now sends one block across and rank 1 the other.
  const cross = (q: number): number => p.blockRank.filter((r, b) => Math.floor(b / 2) === q && r >= 2).length;
  assert.deepEqual([cross(0), cross(1)], [1, 1]);
  assert.ok(nicSquares(blocks, rows, p.blockRank, 4, 2) < before);
  checkPlacement(blocks, w, p, 4, 1000, 1);
  // The check rejects a placement whose loads no longer add up, and one above memory.
  const broken = { ...p, blockRank: Int32Array.from([2, 2, 0, 1]) };
  assert.throws(() => checkPlacement(blocks, w, broken, 4, 1000, 1));
  assert.throws(() => checkPlacement(blocks, w, p, 4, 50, 1));
});

test('NIC swaps: plans valid, recorded, and byte-identical on the same input', () => {
  const problem = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 8192, seed: 1 });
  const on: FcpPlannerOptions = { nicSwaps: true, tune: false };
  const a = fcpPlanner.plan(problem, on);
  const b = fcpPlanner.plan(problem, on);
  assert.equal(JSON.stringify(a), JSON.stringify(b));
  const checked = validatePlan(a);
  assert.deepEqual(checked.issues.slice(0, 3), []);
  for (const ph of ['forward', 'backward'] as const) assert.ok(checked.report[ph].congestion <= 1);
  const stats = a.meta!.stats as { nicSwaps?: number };
  assert.ok((stats.nicSwaps ?? 0) > 0, 'the swaps ran');
  const off = fcpPlanner.plan(problem, { tune: false } as FcpPlannerOptions);
  assert.equal((off.meta!.stats as { nicSwaps?: number }).nicSwaps, undefined, 'off by default');
});

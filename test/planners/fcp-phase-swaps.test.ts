/**
 * Mode (a)'s per-phase exchanges (placement/phase-swaps.ts): on by default up to 4 nodes and off
 * beyond; they never raise the modelled max forward + max backward of the home layout, never move
 * a token to another node than the unswapped placement gave it, respect memory, and the plans
 * stay valid and byte-identical for the same input.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { planToJson } from '../../src/plan/io.ts';
import type { Layout } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { planFcp } from '../../src/planners/fcp/index.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import type { PipelineResult } from '../../src/planners/fcp/pipeline.ts';
import { layoutPhaseMs } from '../../src/planners/fcp/placement/phase-cost.ts';
import {
  PHASE_SWAP_MAX_NODES,
  PHASE_SWAP_STEPS,
  phaseSwapSteps,
} from '../../src/planners/fcp/placement/phase-swaps.ts';
import { weightGeometry } from '../../src/planners/fcp/placement/place.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { cli } from '../helpers/cli.ts';

const expectCode = (f: () => unknown, code: string): void =>
  assert.throws(f, (e: { issues?: { code: string }[] }) => e.issues?.some((i) => i.code === code) === true);

test('phaseSwapSteps: 32 up to 4 nodes, none beyond; the option pins it; none when balancing pairs', () => {
  const o = resolveFcpOptions({});
  assert.equal(phaseSwapSteps(o, 8 * PHASE_SWAP_MAX_NODES, 8), PHASE_SWAP_STEPS);
  assert.equal(phaseSwapSteps(o, 16, 8), PHASE_SWAP_STEPS);
  assert.equal(phaseSwapSteps(o, 8, 8), PHASE_SWAP_STEPS);
  assert.equal(phaseSwapSteps(o, 8 * PHASE_SWAP_MAX_NODES + 1, 8), 0);
  assert.equal(phaseSwapSteps(o, 256, 8), 0);
  assert.equal(phaseSwapSteps(resolveFcpOptions({ phaseSwaps: 0 }), 16, 8), 0);
  assert.equal(phaseSwapSteps(resolveFcpOptions({ phaseSwaps: 5 }), 256, 8), 5);
  assert.equal(phaseSwapSteps(resolveFcpOptions({ balance: 'pairs' }), 16, 8), 0);
});

test('phaseSwaps: a bad value is an option error', () => {
  expectCode(() => resolveFcpOptions({ phaseSwaps: -2 }), 'option.phaseSwaps');
  expectCode(() => resolveFcpOptions({ phaseSwaps: 1.5 }), 'option.phaseSwaps');
});

/** Home rank of every token, per sequence. */
function homeOfTokens(l: Layout, sequences: Int32Array): Int32Array[] {
  const out = Array.from(sequences, (n) => new Int32Array(n).fill(-1));
  for (let i = 0; i < l.rank.length; i++)
    out[l.seq[i]!]!.fill(l.rank[i]!, l.start[i]!, l.start[i]! + l.length[i]!);
  return out;
}

test('property: the exchanges keep every token in its node, respect memory, never raise max fwd + max bwd, and plans stay valid', () => {
  fc.assert(
    fc.property(
      fc.constantFrom('longtail', 'magi', 'bimodal'),
      fc.constantFrom(16, 24, 32),
      fc.integer({ min: 1, max: 1000 }),
      (batch, world, seed) => {
        const problem = resolveProblem({ batch, world, tokensPerRank: 4096, seed });
        // One block size and group size, so that both plans share everything up to the exchanges.
        const pin = { tune: false, blockSize: 4096 } as const;
        const off = planFcp(problem, { ...pin, phaseSwaps: 0 }) as PipelineResult;
        const on = planFcp(problem, { ...pin, phaseSwaps: 8 }) as PipelineResult;
        const loaded = validatePlan(on.plan);
        assert.deepEqual(loaded.issues.slice(0, 3).map(formatIssue), []);
        for (const ph of ['forward', 'backward'] as const) assert.ok(loaded.report[ph].congestion <= 1);
        const homeOff = homeOfTokens(off.plan.homeLayout, problem.sequences);
        const homeOn = homeOfTokens(on.plan.homeLayout, problem.sequences);
        homeOn.forEach((ranks, s) => {
          for (let t = 0; t < ranks.length; t++)
            assert.equal(Math.floor(ranks[t]! / 8), Math.floor(homeOff[s]![t]! / 8), `seq ${s} token ${t}`);
        });
        const tokens = new Float64Array(world);
        const l = on.plan.homeLayout;
        for (let i = 0; i < l.rank.length; i++) tokens[l.rank[i]!]! += l.length[i]!;
        for (let r = 0; r < world; r++) assert.ok(tokens[r]! <= problem.memoryTokens, `rank ${r} memory`);
        const o = resolveFcpOptions({});
        const model = {
          sequences: problem.sequences,
          mask: problem.mask,
          blockSize: off.placed.blocks.blockSizeOfSeq,
          grid: weightGeometry(o),
          kernel: new KernelTime(problem.model, o.calibration),
        };
        const cost = (h: Layout): number => {
          const p = layoutPhaseMs(h, world, model);
          return Math.max(...p.fwd) + Math.max(...p.bwd);
        };
        assert.ok(cost(on.plan.homeLayout) <= cost(off.plan.homeLayout) * (1 + 1e-9));
      },
    ),
    { numRuns: 6, seed: 23 },
  );
});

test('mode (a) plans with the default exchanges record them and are byte-identical for the same input', () => {
  const problem = resolveProblem({ batch: 'bimodal', world: 16, tokensPerRank: 4096, seed: 2 });
  const a = planFcp(problem).plan;
  const b = planFcp(problem).plan;
  assert.equal(planToJson(a), planToJson(b));
  const stats = a.meta!.stats as { phaseSwaps?: number };
  assert.ok((stats.phaseSwaps ?? 0) > 0, 'the exchanges ran');
  const big = planFcp(resolveProblem({ batch: 'bimodal', world: 40, tokensPerRank: 2048, seed: 2 })).plan;
  assert.equal((big.meta!.stats as { phaseSwaps?: number }).phaseSwaps, undefined, 'none beyond 4 nodes');
});

test('fcp plan --phase-swaps: a bad value is one coded line, exit 2, no file; 0 switches the exchanges off', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-phase-swaps-'));
  try {
    const bad = join(dir, 'bad.json');
    const args = [
      'plan',
      '--strategy',
      'fcp',
      '--batch',
      'bimodal',
      '--world',
      '16',
      '--tokens-per-rank',
      '2048',
    ];
    const r = await cli([...args, '--phase-swaps', '-2', '--out', bad]);
    assert.equal(r.code, 2);
    assert.match(r.err, /option\.phaseSwaps/);
    assert.equal(r.err.trim().split('\n').length, 1);
    assert.equal(existsSync(bad), false);
    // A batch where the exchanges apply (bimodal, 16 ranks, 4096 tokens each, seed 1).
    const on = await cli([...args.slice(0, -1), '4096', '--out', join(dir, 'on.json')]);
    assert.equal(on.code, 0);
    assert.match(on.out + on.err, /per-phase exchanges \d+ \(--phase-swaps\)/);
    const off = join(dir, 'off.json');
    assert.equal((await cli([...args, '--phase-swaps', '0', '--out', off])).code, 0);
    const stats = JSON.parse(readFileSync(off, 'utf8')).meta.stats as { phaseSwaps?: number };
    assert.equal(stats.phaseSwaps, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * The per-rank memory estimate (issue 16 item 5): src/plan/memory.ts and its Python twin
 * python/fcp_torch/memory.py give the same bytes, field by field, on shared plans of every
 * strategy (ring's compact chunk rows included), for every dtype and both kernel families; the
 * estimate moves the way the runtime's buffers do; budgets below a plan's peak are refused with
 * `run.memory` by `fcp run --memory-gb` (before any process starts) and by the Python API. The
 * estimate against the measured resident set: python/tests/measure_memory.py (too slow for CI; the
 * numbers are in examples/README.md).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findTorchPython, pythonPackageRoot, torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { writePlan } from '../../src/plan/io.ts';
import { estimateMemory, type MemoryOptions, type RankMemory, worstRank } from '../../src/plan/memory.ts';
import type { Plan } from '../../src/plan/types.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { relayedPlan } from '../fixtures/relayed.ts';

const skip = torchSuiteSkip();
const python = skip ? null : findTorchPython();
const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-memory-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');

const model = { qHeads: 4, kvHeads: 2, headDim: 16, bytesPerElement: 2 };
const batch = [300, 40, 9, 120, 5, 60, 1, 47, 200];
function planOf(strategy: string, world: number, options: Record<string, unknown> = {}): Plan {
  return getPlanner(strategy).plan(resolveProblem({ batch, world, model }), options);
}

function python_(args: string[]): RankMemory[][] {
  const r = spawnSync(python!.python, ['-m', 'fcp_torch.memory', ...args], {
    cwd: pythonPackageRoot(),
    encoding: 'utf8',
    timeout: 120000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as RankMemory[][];
}

describe('memory estimate: TypeScript and Python twins agree', { skip }, () => {
  const plans: [string, Plan][] = [
    ['fcp', planOf('fcp', 4, { blockSize: 32, coalesce: 2 })],
    ['fcp-w2', planOf('fcp', 2, { blockSize: 64 })],
    ['ring', planOf('ring', 4)],
    ['bytescale', planOf('bytescale', 4)],
    ['magi', planOf('magi', 4, { chunkSize: 32 })],
    // Two-hop reshuffle (PXN routing, two nodes of two GPUs): relays hold ranges outside their layouts.
    ['fcp-relays', relayedPlan(model)],
  ];
  const paths = plans.map(([name, p]) => {
    const path = join(dir, `${name}.json`);
    writePlan(path, p);
    return path;
  });
  const cases: MemoryOptions[] = [
    { dtype: 'float32', kernel: 'math', layers: 3 },
    { dtype: 'bfloat16', kernel: 'gpu', layers: 1 },
    { dtype: 'float16', kernel: 'math', layers: 2 },
    { dtype: 'bfloat16', kernel: 'gpu', layers: 2, messages: 'host' },
  ];
  for (const o of cases)
    it(`${o.dtype}, ${o.kernel} kernels, ${o.layers} layers: every field of every rank equal`, () => {
      const py = python_([
        ...paths.flatMap((p) => ['--plan', p]),
        '--dtype',
        o.dtype,
        '--kernel',
        o.kernel,
        '--layers',
        String(o.layers),
        '--messages',
        o.messages ?? 'device',
      ]);
      plans.forEach(([name, plan], i) => {
        const ts = estimateMemory(plan, o);
        assert.deepEqual(py[i], ts, name);
        assert.ok(worstRank(ts).peak > 0, name);
      });
    });
});

describe('memory estimate: follows the buffers', () => {
  const plan = planOf('fcp', 4, { blockSize: 32 });
  it('each layer adds its kept state; float32 needs more than bfloat16; math kernels keep score matrices', () => {
    const one = estimateMemory(plan, { dtype: 'bfloat16', kernel: 'gpu', layers: 1 });
    const four = estimateMemory(plan, { dtype: 'bfloat16', kernel: 'gpu', layers: 4 });
    one.forEach((r, i) => {
      assert.equal(r.keptPerLayer > 0, r.qTokens > 0);
      assert.equal(four[i]!.peak - r.peak, 3 * r.keptPerLayer);
    });
    const f32 = estimateMemory(plan, { dtype: 'float32', kernel: 'gpu', layers: 1 });
    for (const [i, r] of f32.entries()) assert.ok(r.peak > one[i]!.peak || r.qTokens === 0);
    const math = estimateMemory(plan, { dtype: 'float32', kernel: 'math', layers: 1 });
    // The backward holds 5 float32 score matrices [H, lq, lk] of its largest piece (a 32 x 32 block
    // at least): 5 * 4 heads * 32 * 32 * 4 bytes.
    assert.ok(worstRank(math).workspaceBackward >= 5 * 4 * 32 * 32 * 4);
  });
  it('host messages (StagedComm) never cost more device memory; float32 forward rows only where partials meet', () => {
    const dev = estimateMemory(plan, { dtype: 'bfloat16', kernel: 'gpu', layers: 1 });
    const host = estimateMemory(plan, { dtype: 'bfloat16', kernel: 'gpu', layers: 1, messages: 'host' });
    assert.ok(
      dev.some((r, i) => r.peak > host[i]!.peak),
      'some rank keeps messages on the device',
    );
    dev.forEach((r, i) => {
      assert.ok(host[i]!.peak <= r.peak);
      assert.ok(r.accumulatorRowsForward <= r.qTokens);
    });
    // One rank, one task per sequence: every query slot gets exactly one partial row.
    const [w1] = estimateMemory(planOf('fcp', 1, { blockSize: 1024 }), {
      dtype: 'bfloat16',
      kernel: 'gpu',
      layers: 1,
    });
    assert.equal(w1!.accumulatorRowsForward, 0);
  });
  it("one rank holding everything: kept state = O (bf16), LSE (f32); Q, K/V are the caller's (zero-copy)", () => {
    const p = planOf('fcp', 1, { blockSize: 64 });
    const [r] = estimateMemory(p, { dtype: 'bfloat16', kernel: 'gpu', layers: 1 });
    const T = batch.reduce((a, b) => a + b, 0);
    assert.equal(r!.qTokens, T);
    assert.equal(r!.kvTokensForward, T);
    assert.equal(r!.messagesForward, 0);
    assert.equal(r!.keptPerLayer, T * 4 * 16 * 2 + T * 4 * 4);
    assert.equal(r!.kvResident, 0, "K/V buffers are the caller's k and v");
    // a rank that receives K/V rows keeps its own K/V buffers (and copies its K/V for the backward)
    // phaseSwaps 0: a plan that fetches K/V (mode (a)'s per-phase exchanges may keep every
    // sequence of this batch whole on one rank).
    const w2 = estimateMemory(planOf('fcp', 2, { blockSize: 64, phaseSwaps: 0 }), {
      dtype: 'bfloat16',
      kernel: 'gpu',
      layers: 1,
    });
    const fetching = w2.filter((x) => x.kvTokensForward > x.qTokens);
    assert.ok(fetching.length > 0, 'the 2-rank plan fetches K/V somewhere');
    for (const x of fetching) {
      assert.ok(x.kvResident >= 2 * x.kvTokensForward * 2 * 16 * 2);
      assert.ok(x.keptPerLayer >= x.qTokens * (4 * 16 * 2 + 4 * 4 + 2 * 2 * 16 * 2));
    }
  });
});

describe('memory budgets are refused before running', { skip }, () => {
  const plan = planOf('fcp', 2, { blockSize: 64 });
  const path = join(dir, 'budget.json');
  writePlan(path, plan);
  const peak = worstRank(estimateMemory(plan, { dtype: 'float32', kernel: 'math', layers: 1 })).peak;
  it('fcp run --memory-gb below the peak: run.memory, exit 2, no process started', () => {
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', cli, 'run', path, '--memory-gb', String((peak * 0.5) / 2 ** 30)],
      { encoding: 'utf8', timeout: 120000 },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /^fcp: error: run\.memory/m);
    assert.doesNotMatch(r.stderr, /starting/);
    const bad = spawnSync(process.execPath, ['--import', 'tsx', cli, 'run', path, '--memory-gb', '0'], {
      encoding: 'utf8',
      timeout: 120000,
    });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /option\.memoryGb/);
  });
  it('Python: check_memory and FcpAttention.from_plan(memory_budget=) refuse with run.memory, accept above', () => {
    const code = [
      'import sys, torch',
      'from fcp_torch import read_plan, FcpAttention, PlanError',
      'from fcp_torch.memory import check_memory',
      `p = read_plan(${JSON.stringify(path)}); peak = ${peak}`,
      'check_memory(p, peak * 1.01, dtype="float32", kernel="math")',
      'for f in (lambda: check_memory(p, peak * 0.99, dtype="float32", kernel="math"),',
      '          lambda: FcpAttention.from_plan(p, rank=0, memory_budget=peak * 0.5, comm=object())):',
      '    try: f(); print("accepted")',
      '    except PlanError as e: print(e.code)',
      'print(type(FcpAttention.from_plan(p, rank=1, memory_budget=peak * 1.01, comm=object())).__name__)',
    ].join('\n');
    const r = spawnSync(python!.python, ['-c', code], {
      cwd: pythonPackageRoot(),
      encoding: 'utf8',
      timeout: 120000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n'), ['run.memory', 'run.memory', 'FcpAttention']);
  });
});

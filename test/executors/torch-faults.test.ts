/**
 * Bad inputs of the torch runtime fail clearly, fast, and leave no process behind: a plan for more
 * ranks than processes (caught here and, independently, by every worker), CUDA requested where torch
 * sees none, a peer that dies mid-run, a peer that hangs (overall deadline).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { runTorch } from '../../src/executors/torch/index.ts';
import { launchWorkers } from '../../src/executors/torch/launch.ts';
import { findTorchPython, torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

// Under CI a missing torch fails the suite (torchSuiteSkip throws) instead of skipping it.
const skip = torchSuiteSkip();
const python = skip ? null : findTorchPython();

const plan = (world: number) =>
  getPlanner('fcp').plan(resolveProblem({ batch: [60, 20, 33], world, model: SMALL_MODEL }), {
    blockSize: 16,
  });

/** True when no process with this id is alive any more. */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

async function fails(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof FcpError, `expected FcpError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

describe('torch runtime failures', { skip }, () => {
  it('a plan for more ranks than processes is refused before anything starts', async () => {
    await fails(runTorch(plan(4), undefined, { nproc: 2 }), 'run.nproc');
  });

  it('every worker also checks the plan against WORLD_SIZE', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-test-'));
    try {
      const path = join(dir, 'plan.json');
      writePlan(path, plan(4));
      await fails(
        launchWorkers({
          python: python!.python,
          nproc: 2,
          args: ['--plan', path, '--out', dir],
          timeoutMs: 60000,
        }),
        'run.nproc',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('CUDA requested where torch sees none', {
    skip: python?.cuda ? 'this machine has CUDA' : false,
  }, async () => {
    await fails(runTorch(plan(2), undefined, { device: 'cuda' }), 'run.noCuda');
  });

  it('a dead peer fails the run within 60 s and every process ends', async () => {
    let pids: number[] = [];
    const t0 = Date.now();
    await fails(
      runTorch(plan(2), undefined, {
        env: { FCP_TORCH_FAULT: '1:exit' },
        onSpawn: (p) => (pids = p),
        timeoutMs: 120000,
      }),
      'run.rankFailed',
    );
    assert.ok(Date.now() - t0 < 60000, `took ${Date.now() - t0} ms`);
    assert.equal(pids.length, 2);
    assert.ok(pids.every(gone), 'a worker is still running');
  });

  it('a hanging peer hits the deadline and every process ends', async () => {
    let pids: number[] = [];
    await fails(
      runTorch(plan(2), undefined, {
        env: { FCP_TORCH_FAULT: '0:hang' },
        onSpawn: (p) => (pids = p),
        timeoutMs: 5000,
      }),
      'run.timeout',
    );
    assert.ok(pids.length === 2 && pids.every(gone), 'a worker is still running');
  });
});

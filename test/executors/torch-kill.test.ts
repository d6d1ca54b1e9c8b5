/**
 * Killing `fcp run --backend torch` never leaves its Python workers running (issue 11 item 11):
 * three runs of a 2-rank plan whose rank 0 hangs (FCP_TORCH_FAULT, so the other rank sits in a
 * collective), started together; once every worker has torch loaded, the three parents get
 * SIGKILL, SIGTERM and SIGINT. Every worker must be gone within 5 s (SIGKILL: the workers notice
 * by their parent-death signal and stdin pipe; SIGTERM/SIGINT: the parent kills them first).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const skip = torchSuiteSkip() || (process.platform !== 'linux' ? 'needs /proc (Linux)' : false);
const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-kill-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const root = join(import.meta.dirname, '..', '..');

/** Process ids whose parent is `ppid` and whose command line runs fcp_torch.worker. */
function workersOf(ppid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent !== ppid) continue;
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('fcp_torch.worker')) out.push(Number(d));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

const alive = (pid: number): boolean => {
  try {
    // a zombie (state Z) is gone for our purpose: it runs nothing and holds no GPU or port
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

const torchLoaded = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/maps`, 'utf8').includes('libtorch');
  } catch {
    return false;
  }
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ok: () => boolean, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) assert.fail(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
  return Date.now() - t0;
}

describe('killing fcp run --backend torch', { skip }, () => {
  it('SIGKILL, SIGTERM and SIGINT of the parent: every worker is gone within 5 s', async () => {
    const plan = join(dir, 'plan.json');
    writePlan(
      plan,
      getPlanner('fcp').plan(resolveProblem({ batch: [60, 20, 33], world: 2, model: SMALL_MODEL }), {
        blockSize: 16,
      }),
    );
    const { NODE_TEST_CONTEXT: _ctx, ...env } = process.env;
    const signals = ['SIGKILL', 'SIGTERM', 'SIGINT'] as const;
    const parents: ChildProcess[] = signals.map(() =>
      spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'run', '--backend', 'torch', plan], {
        cwd: root,
        env: { ...env, FCP_TORCH_FAULT: '0:hang' },
        stdio: 'ignore',
      }),
    );
    try {
      const pids = parents.map(() => [] as number[]);
      await until(
        'every run has 2 workers with torch loaded',
        () =>
          parents.every((p, i) => {
            if (pids[i]!.length < 2) pids[i] = workersOf(p.pid!);
            return pids[i]!.length === 2 && pids[i]!.every(torchLoaded);
          }),
        120000,
      );
      await sleep(1500); // into the process-group set-up and the first collective
      for (const [i, p] of parents.entries()) process.kill(p.pid!, signals[i]);
      const times = await Promise.all(
        pids.map((ws, i) => until(`workers of the ${signals[i]} run`, () => !ws.some(alive), 5000)),
      );
      console.log(
        `# workers gone after the parent's ${signals.map((s, i) => `${s} in ${times[i]} ms`).join(', ')}`,
      );
    } finally {
      for (const p of parents) if (p.exitCode === null) p.kill('SIGKILL');
    }
  });
});

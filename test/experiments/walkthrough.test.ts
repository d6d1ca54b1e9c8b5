/**
 * The README's command table as one walk-through, run in order in a fresh folder through the real
 * CLI: each command reads what an earlier one wrote (plan.json -> validate, simulate, run on torch,
 * verify with a .npy dump -> numpy; compare -> report; serve -> validate; demo -> report). The steps
 * are small worlds (2 to 8 ranks) so that the whole sequence stays near a minute on two idle cores;
 * most of it is process start-up (Node with tsx, Python with torch) and vega rendering reports.
 *
 * The torch step needs /usr/bin/python3 with torch (gloo): without it the step fails when CI is set
 * and is skipped otherwise, like the browser test's chromium.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'src/cli.ts');
// tsx resolved from the repository, since the commands run in a temporary folder.
const TSX = import.meta.resolve('tsx');
const PYTHON = '/usr/bin/python3';

/** One row of the walk-through: the command as the README shows it, and what to check after it. */
interface Step {
  /** Arguments after `fcp`. */
  args: string[];
  /** Text fed to stdin (serve's requests). */
  input?: string;
  /** Needs python3 with torch. */
  torch?: boolean;
  check: (dir: string, out: { stdout: string; stderr: string }) => void;
}

const MODEL = ['--q-heads', '4', '--kv-heads', '2', '--head-dim', '32'];

/** The walk-through, in README order. */
const WALKTHROUGH: Step[] = [
  {
    args: [
      'plan',
      '--strategy',
      'fcp',
      '--world',
      '2',
      '--tokens-per-rank',
      '512',
      ...MODEL,
      '-o',
      'plan.json',
    ],
    check: (d) => assert.ok(existsSync(join(d, 'plan.json'))),
  },
  {
    args: ['validate', 'plan.json'],
    check: () => {},
  },
  {
    args: ['simulate', 'plan.json', '--trace', 'trace.json'],
    check: (d, o) => {
      assert.match(o.stdout, /simulated/i);
      const trace = JSON.parse(readFileSync(join(d, 'trace.json'), 'utf8')) as { traceEvents: unknown[] };
      assert.ok(trace.traceEvents.length > 0);
    },
  },
  {
    args: ['run', '--backend', 'torch', 'plan.json', '--check'],
    torch: true,
    check: (_d, o) => assert.match(o.stdout, /check: OK/),
  },
  {
    args: ['verify', '--plan', 'plan.json', '--dump', 'dump'],
    check: (d, o) => {
      assert.match(o.stdout, /verify: OK/);
      const index = JSON.parse(readFileSync(join(d, 'dump', 'index.json'), 'utf8')) as {
        arrays: { name: string; file: string; shape: number[] }[];
      };
      const a = index.arrays.find((x) => x.name === 'o')!;
      assert.ok(a.file.endsWith('.npy'));
      // What a Python user does with a dump, when numpy is there.
      const py = spawnSync(
        PYTHON,
        ['-c', `import numpy as np; print(np.load(${JSON.stringify(join(d, 'dump', a.file))}).shape)`],
        {
          encoding: 'utf8',
        },
      );
      if (py.status === 0) assert.equal(py.stdout.trim(), `(${a.shape.join(', ')})`);
    },
  },
  {
    args: ['compare-plans', '--world', '4,8', '--tokens-per-rank', '1024'],
    check: (_d, o) => assert.match(o.stdout, /fcp/),
  },
  {
    args: [
      'compare',
      '--strategies',
      'fcp,ring,bytescale,wlb,magi',
      '--world',
      '4,8',
      '--tokens-per-rank',
      '1024',
      '--out',
      'cmp',
    ],
    check: (d) => assert.ok(existsSync(join(d, 'cmp', 'compare.json'))),
  },
  {
    args: ['report', 'cmp/compare.json', '--out', 'cmp-report'],
    check: (d) => assert.match(readFileSync(join(d, 'cmp-report', 'index.html'), 'utf8'), /Drawn from/),
  },
  {
    args: ['serve'],
    input: `${JSON.stringify({ id: 1, strategy: 'magi', batch: 'longtail', world: 2, tokensPerRank: 512, output: 'served.json' })}\n`,
    check: (d, o) => {
      assert.equal((JSON.parse(o.stdout.trim().split('\n')[0]!) as { ok: boolean }).ok, true);
      assert.ok(existsSync(join(d, 'served.json')));
    },
  },
  {
    args: ['validate', 'served.json'],
    check: () => {},
  },
  {
    args: [
      'demo',
      '--world',
      '8',
      '--tokens-per-rank',
      '2048',
      '--scaling',
      'none',
      '--numerics-world',
      '2',
      '--numerics-tokens',
      '256',
      '--out',
      'demo',
    ],
    check: (d) => assert.ok(existsSync(join(d, 'demo', 'index.html'))),
  },
  {
    args: ['report', 'demo/results.json', '--out', 'demo-again'],
    check: (d) =>
      assert.equal(
        readFileSync(join(d, 'demo-again', 'index.html'), 'utf8'),
        readFileSync(join(d, 'demo', 'index.html'), 'utf8'),
      ),
  },
];

const haveTorch = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;

test('the README walk-through runs in order, each command on what the previous ones wrote', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-walkthrough-'));
  const t0 = performance.now();
  try {
    for (const step of WALKTHROUGH) {
      const line = `fcp ${step.args.join(' ')}`;
      if (step.torch && !haveTorch) {
        if (process.env.CI) assert.fail(`${line}: ${PYTHON} has no torch`);
        t.diagnostic(`skipped (no torch): ${line}`);
        continue;
      }
      const s0 = performance.now();
      const r = spawnSync(process.execPath, ['--import', TSX, CLI, ...step.args], {
        cwd: dir,
        encoding: 'utf8',
        input: step.input ?? '',
        env: { ...process.env, FCP_DEBUG: '' },
        maxBuffer: 64 << 20,
      });
      assert.equal(r.status, 0, `${line} exited ${r.status}:\n${r.stderr}`);
      step.check(dir, { stdout: r.stdout, stderr: r.stderr });
      t.diagnostic(`${((performance.now() - s0) / 1000).toFixed(1)} s  ${line}`);
    }
    t.diagnostic(`walk-through: ${((performance.now() - t0) / 1000).toFixed(1)} s in all`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

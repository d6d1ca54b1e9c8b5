/**
 * The Python probe (src/executors/torch/python.ts) tells slow from absent, and under CI a missing
 * torch fails the torch suites instead of skipping them (issue 11 item 5). Fake interpreters: a
 * shell script running Python without its site packages (no torch: ModuleNotFoundError), one that
 * sleeps before starting Python (slow), and a path that does not exist.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { probePythonDetailed, requireTorchPython, torchSuiteSkip } from '../../src/executors/torch/python.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-probe-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const p = join(dir, name);
  writeFileSync(p, `#!/bin/sh\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}

const noTorch = script('python-without-torch', 'exec /usr/bin/python3 -S "$@"');
const real = probePythonDetailed('/usr/bin/python3');
const skip = real.ok ? false : `no /usr/bin/python3 with torch here (${real.ok ? '' : real.detail})`;

describe('probePython', () => {
  it('a missing interpreter and one without torch are absent, with the reason', () => {
    const m = probePythonDetailed(join(dir, 'nonexistent-python'));
    assert.equal(m.ok ? 'ok' : m.why, 'missing');
    const n = probePythonDetailed(noTorch);
    assert.equal(n.ok ? 'ok' : n.why, 'noTorch');
  });

  it('a slow interpreter times out, is not cached as absent, and is found with a longer timeout', {
    skip,
  }, () => {
    const slow = script('slow-python', 'sleep 2\nexec /usr/bin/python3 "$@"');
    const t0 = Date.now();
    const r = probePythonDetailed(slow, { timeoutMs: 500, attempts: 2 });
    assert.equal(r.ok ? 'ok' : r.why, 'timeout');
    assert.ok(Date.now() - t0 >= 1000, 'tried twice');
    const again = probePythonDetailed(slow, { timeoutMs: 120000 });
    assert.ok(again.ok, again.ok ? '' : again.detail);
  });

  it('requireTorchPython says run.pythonTimeout for a slow interpreter and run.noTorch naming python3-torch for a missing one', () => {
    const slow = script('slower-python', 'sleep 5\nexec /usr/bin/python3 "$@"');
    const env = process.env.FCP_PROBE_TIMEOUT_MS;
    process.env.FCP_PROBE_TIMEOUT_MS = '300';
    try {
      assert.throws(
        () => requireTorchPython(slow),
        (e: unknown) => e instanceof FcpError && e.code === 'run.pythonTimeout',
      );
    } finally {
      if (env === undefined) delete process.env.FCP_PROBE_TIMEOUT_MS;
      else process.env.FCP_PROBE_TIMEOUT_MS = env;
    }
    assert.throws(
      () => requireTorchPython(noTorch),
      (e: unknown) => e instanceof FcpError && e.code === 'run.noTorch' && /python3-torch/.test(e.message),
    );
  });

  it('torchSuiteSkip skips without CI and throws run.noTorch under CI=1 and CI=true', () => {
    const saved = { py: process.env.FCP_PYTHON, ci: process.env.CI };
    try {
      process.env.FCP_PYTHON = noTorch;
      delete process.env.CI;
      assert.match(String(torchSuiteSkip()), /python3-torch/);
      for (const ci of ['1', 'true']) {
        process.env.CI = ci;
        assert.throws(
          () => torchSuiteSkip(),
          (e: unknown) =>
            e instanceof FcpError && e.code === 'run.noTorch' && /python3-torch/.test(e.message),
        );
      }
    } finally {
      for (const [k, v] of [
        ['FCP_PYTHON', saved.py],
        ['CI', saved.ci],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  });
});

describe('a torch suite under CI=1 without torch', () => {
  it('fails (not skips), naming python3-torch; without CI it skips', () => {
    const suite = join(import.meta.dirname, 'torch-example.test.ts');
    // NODE_TEST_CONTEXT would make the child report to this runner instead of exiting with its status.
    const { CI: _ci, NODE_TEST_CONTEXT: _ctx, ...base } = process.env;
    const run = (env: Record<string, string>) =>
      spawnSync(process.execPath, ['--import', 'tsx', '--test', suite], {
        encoding: 'utf8',
        timeout: 120000,
        env: { ...base, FCP_PYTHON: noTorch, ...env },
      });
    const ci = run({ CI: '1' });
    assert.notEqual(ci.status, 0, ci.stdout);
    assert.match(ci.stdout + ci.stderr, /run\.noTorch/);
    assert.match(ci.stdout + ci.stderr, /python3-torch/);
    const local = run({});
    assert.equal(local.status, 0, local.stdout + local.stderr);
    assert.match(local.stdout, /# SKIP no Python with torch/);
  });
});

/**
 * `fcp verify` through the real CLI: planning or reading a plan, the error table and exit codes,
 * dumps (layout, atomicity) and reading inputs back from a dump.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatVerify, verifyPlan } from '../../src/cli/verify.ts';
import { type DumpIndex, readDumpInputs, writeDump } from '../../src/cli/verify-dump.ts';
import { FcpError } from '../../src/core/issues.ts';
import { npyBytes, parseNpy } from '../../src/core/npy.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { readPlan, writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { shuffledPlan } from './cpu-plans.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Runs the real CLI in a child process (the test runner reports through this process's stdout). */
function fcp(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src/cli.ts'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, FCP_DEBUG: '' },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

const dir = mkdtempSync(join(tmpdir(), 'fcp-verify-'));
const problem = resolveProblem({
  batch: [100, 37, 60, 3],
  world: 3,
  mask: 'causal',
  model: SMALL_MODEL,
  seed: 1,
});
const planFile = join(dir, 'plan.json');
writePlan(planFile, shuffledPlan(problem, 1));

/** The error table's lines (output, error) of a verify report. */
const table = (s: string) =>
  s
    .split('\n')
    .filter((l) => /^(o|dq|dk|dv) /.test(l))
    .map((l) => l.split(/ +/).slice(0, 2).join(' '));

describe('fcp verify (CLI)', () => {
  const d = join(dir, 'dump');
  let first = '';

  it('plans with a registered strategy and the small model, prints errors and per-rank timings, dumps', () => {
    const r = fcp([
      'verify',
      '--strategy',
      'fcp',
      '--world',
      '3',
      '--tokens-per-rank',
      '96',
      '--batch',
      'uniform',
      '--block-size',
      '64',
      '--seed',
      '5',
      '--dump',
      d,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /strategy fcp, 3 ranks, .* 4 query heads \/ 2 KV heads x 32/);
    for (const k of ['o', 'dq', 'dk', 'dv'])
      assert.match(r.stdout, new RegExp(`^${k} +\\d\\.\\d\\de-\\d+  1\\.00e-5 +yes$`, 'm'));
    assert.match(r.stdout, /^ +2 +[\d.]+ +[\d.]+/m); // rank 2's timing row
    assert.match(r.stdout, /verify: OK/);
    first = r.stdout;
    const index = JSON.parse(readFileSync(join(d, 'index.json'), 'utf8')) as DumpIndex;
    assert.equal(index.world, 3);
    assert.equal(index.arrays.length, index.sequences.length * 8);
    for (const a of index.arrays) {
      assert.equal(a.dtype, 'float32');
      assert.equal(a.byteOrder, 'little');
      assert.ok(a.file.endsWith('.npy'), a.file);
      assert.deepEqual(parseNpy(readFileSync(join(d, a.file))).shape, a.shape);
    }
    const plan = readPlan(join(d, 'plan.json'));
    const q1 = index.arrays.find((a) => a.name === 'q' && a.sequence === 0)!;
    assert.deepEqual(parseNpy(readFileSync(join(d, q1.file))).data, randomInputsForPlan(plan, 5).q[0]);
  });

  it('reads a plan file and inputs back from a dump (same errors); exits 1 on a mismatch', () => {
    const r = fcp(['verify', '--plan', join(d, 'plan.json'), '--inputs', d, '--max-error', '1e-12']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /verify: MISMATCH/);
    assert.deepEqual(table(r.stdout), table(first));
  });

  it('bad input: exit 2 with one error line and nothing on stdout', () => {
    const r = fcp(['verify', '--plan', join(d, 'plan.json'), '--world', '4']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^fcp: error: input\.world/m);
    assert.equal(r.stdout, '');
  });
});

describe('fcp verify (library)', () => {
  it('verifyPlan compares every output and flags a too small limit', async () => {
    const plan = readPlan(planFile);
    const ok = await verifyPlan(plan, { seed: 2 });
    assert.ok(ok.ok);
    for (const k of ['o', 'dq', 'dk', 'dv'] as const) assert.ok(ok.errors[k] > 0 && ok.errors[k] < 1e-6);
    const strict = await verifyPlan(plan, { seed: 2, maxError: 1e-12 });
    assert.equal(strict.ok, false);
    assert.match(formatVerify(plan, strict, undefined), /verify: MISMATCH/);
  });

  it('bad inputs are FcpErrors: world or sequences of a dump, head counts of a plan', async () => {
    const plan = readPlan(planFile);
    const d = join(dir, 'lib-dump');
    writeDump(d, plan, randomInputsForPlan(plan, 1), undefined, { seed: 1, errors: null });
    const code = async (f: () => unknown) => {
      try {
        await f();
      } catch (e) {
        assert.ok(e instanceof FcpError, String(e));
        return e.code;
      }
      return 'none';
    };
    assert.equal(await code(() => readDumpInputs(d, { ...plan, world: 2 })), 'input.world');
    assert.equal(
      await code(() => readDumpInputs(d, { ...plan, sequences: Int32Array.of(100, 37, 61, 3) })),
      'input.sequences',
    );
    assert.equal(
      await code(() => readDumpInputs(d, { ...plan, model: { ...plan.model, headDim: 16 } })),
      'input.shape',
    );
    assert.equal(
      await code(() => verifyPlan({ ...plan, model: { ...plan.model, qHeads: 3, kvHeads: 2 } })),
      'plan.structure.model', // the validator refuses heads that do not divide before any input is made
    );
    assert.deepEqual(readDumpInputs(d, plan).k[2], randomInputsForPlan(plan, 1).k[2]);
    writeFileSync(join(d, 'seq0_v.npy'), npyBytes(new Float32Array(3), [3]));
    assert.equal(await code(() => readDumpInputs(d, plan)), 'input.length');
  });

  it('dumps are atomic: an existing dump is replaced, anything else refused, a failed write leaves nothing', () => {
    const plan = readPlan(planFile);
    const inputs = randomInputsForPlan(plan, 1);
    const target = join(dir, 'atomic');
    writeDump(target, plan, inputs, undefined, { seed: 1, errors: null });
    writeDump(target, plan, inputs, undefined, { seed: 2, errors: null });
    assert.equal((JSON.parse(readFileSync(join(target, 'index.json'), 'utf8')) as DumpIndex).seed, 2);
    assert.deepEqual(
      readdirSync(dir).filter((n) => n.includes('.tmp-') || n.includes('.old-')),
      [],
    );
    const notDump = join(dir, 'not-a-dump');
    mkdirSync(notDump);
    writeFileSync(join(notDump, 'keep.txt'), 'x');
    assert.throws(
      () => writeDump(notDump, plan, inputs, undefined, { seed: 1, errors: null }),
      (e: unknown) => e instanceof FcpError && e.code === 'io.write',
    );
    assert.deepEqual(readdirSync(notDump), ['keep.txt']);
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    assert.throws(
      () => writeDump(join(file, 'sub'), plan, inputs, undefined, { seed: 1, errors: null }),
      (e: unknown) => e instanceof FcpError && e.code === 'io.write',
    );
    assert.equal(readFileSync(file, 'utf8'), 'x');
  });
});

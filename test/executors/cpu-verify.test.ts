/**
 * `fcp verify` through the real CLI: planning or reading a plan, the error table and exit codes,
 * dumps (layout, atomicity) and reading inputs back from a dump.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type DumpIndex, readDumpInputs, writeDump } from '../../src/cli/verify.ts';
import { SMALL_MODEL } from '../../src/cluster/model.ts';
import { resolveProblem } from '../../src/cluster/problem.ts';
import { FcpError } from '../../src/core/issues.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { readPlan, writePlan } from '../../src/plan/io.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
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

describe('fcp verify', () => {
  const d = join(dir, 'dump');
  let table1: string[] = [];
  const table = (s: string) => s.split('\n').filter((l) => /^(o|dq|dk|dv) /.test(l));

  it('verifies a plan file, prints the four errors and per-rank timings, dumps plan, inputs and outputs', () => {
    const r = fcp(['verify', '--plan', planFile, '--seed', '5', '--dump', d]);
    assert.equal(r.code, 0, r.stderr);
    for (const k of ['o', 'dq', 'dk', 'dv'])
      assert.match(r.stdout, new RegExp(`^${k} +\\d\\.\\d\\de-\\d+  1\\.00e-5 +yes$`, 'm'));
    assert.match(r.stdout, /^ +2 +[\d.]+ +[\d.]+/m); // rank 2's timing row
    assert.match(r.stdout, /verify: OK/);
    table1 = table(r.stdout);
    const index = JSON.parse(readFileSync(join(d, 'index.json'), 'utf8')) as DumpIndex;
    assert.equal(index.world, 3);
    assert.deepEqual(index.sequences, [100, 37, 60, 3]);
    assert.equal(index.arrays.length, 4 * 8);
    assert.ok(existsSync(join(d, 'plan.json')));
    for (const a of index.arrays) {
      assert.equal(a.dtype, 'float32');
      assert.equal(a.byteOrder, 'little');
      assert.equal(statSync(join(d, a.file)).size, a.shape[0] * a.shape[1] * a.shape[2] * 4);
    }
    const q1 = index.arrays.find((a) => a.name === 'q' && a.sequence === 1)!;
    const bytes = readFileSync(join(d, q1.file));
    const expected = randomInputsForPlan(shuffledPlan(problem, 1), 5).q[1]!;
    assert.deepEqual(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), expected);
    const o0 = index.arrays.find((a) => a.name === 'o' && a.sequence === 0)!;
    assert.deepEqual(o0.shape, [100, 4, 32]);
  });

  it('reads inputs back from a dump (same errors) and exits 1 on a mismatch', () => {
    const r = fcp(['verify', '--plan', planFile, '--inputs', d, '--max-error', '1e-12']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /verify: MISMATCH/);
    assert.deepEqual(
      table(r.stdout).map((l) => l.split(/ +/).slice(0, 2)),
      table1.map((l) => l.split(/ +/).slice(0, 2)),
    );
  });

  it('bad inputs: exit 2 with one error line', () => {
    const other = resolveProblem({
      batch: [100, 37, 60, 3],
      world: 2,
      mask: 'causal',
      model: SMALL_MODEL,
      seed: 1,
    });
    const otherPlan = join(dir, 'plan-w2.json');
    writePlan(otherPlan, simplePlan(other));
    const badHeads = join(dir, 'plan-heads.json');
    const p = simplePlan(other);
    writePlan(badHeads, { ...p, model: { ...p.model, qHeads: 3, kvHeads: 2 } });
    const cases: [string[], string][] = [
      [['--plan', planFile, '--world', '4'], 'input.world'],
      [['--plan', otherPlan, '--inputs', d], 'input.world'],
      [['--plan', badHeads], 'exec.input.heads'],
    ];
    for (const [args, code] of cases) {
      const r = fcp(['verify', ...args]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(
        r.stderr,
        new RegExp(`^fcp: error: ${code.replaceAll('.', '\\.')}`, 'm'),
        `${args.join(' ')}: ${r.stderr}`,
      );
      assert.equal(r.stdout, '');
    }
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

  it('inputs read from a dump must fit the plan', () => {
    const plan = readPlan(planFile);
    assert.deepEqual(readDumpInputs(d, plan).k[2], randomInputsForPlan(plan, 5).k[2]);
    const code = (p: typeof plan) => {
      try {
        readDumpInputs(d, p);
      } catch (e) {
        return (e as FcpError).code;
      }
      return 'none';
    };
    assert.equal(code({ ...plan, sequences: Int32Array.of(100, 37, 61, 3) }), 'input.sequences');
    assert.equal(code({ ...plan, model: { ...plan.model, headDim: 16 } }), 'input.shape');
    const trunc = join(dir, 'trunc');
    writeDump(trunc, plan, randomInputsForPlan(plan, 1), undefined, { seed: 1, errors: null });
    writeFileSync(join(trunc, 'seq0_v.bin'), Buffer.alloc(12));
    assert.throws(
      () => readDumpInputs(trunc, plan),
      (e: unknown) => e instanceof FcpError && e.code === 'input.length',
    );
  });

  it('plans with a registered strategy and the small model by default', () => {
    const r = fcp([
      'verify',
      '--strategy',
      'ring',
      '--world',
      '2',
      '--tokens-per-rank',
      '96',
      '--batch',
      'uniform',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /strategy ring, 2 ranks, .* 4 query heads \/ 2 KV heads x 32/);
  });
});

/**
 * `fcp run` (torch backend, torchrun command), `fcp serve` (the JSON-line planner) and the Python
 * package's own unit tests (plan reader, chunk expansion, kernels, in-process multi-rank runs, the
 * serve client), run through /usr/bin/python3 -m unittest.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, describe, it } from 'node:test';
import { handleServeLine, serve } from '../../src/cli/serve.ts';
import { findTorchPython, pythonPackageRoot, torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { readPlan, writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { cli } from '../helpers/cli.ts';

// Under CI a missing torch fails the suite (torchSuiteSkip throws) instead of skipping it.
const skip = torchSuiteSkip();
const python = skip ? null : findTorchPython();
const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function planFile(world: number, name: string): string {
  const p = getPlanner('fcp').plan(resolveProblem({ batch: [64, 30, 17], world, model: SMALL_MODEL }), {
    blockSize: 16,
  });
  const path = join(dir, name);
  writePlan(path, p);
  return path;
}

describe('fcp run', () => {
  it('runs a plan with torch processes and checks it against the reference', { skip }, async () => {
    const path = planFile(2, 'p2.json');
    const r = await cli([
      'run',
      '--backend',
      'torch',
      '--nproc',
      '2',
      '--check',
      '--iters',
      '2',
      '--warmup',
      '1',
      path,
    ]);
    assert.equal(r.code, 0, r.err + r.out);
    assert.match(r.out, /check: OK/);
    assert.match(r.out, /forward [\d.]+ ms, backward [\d.]+ ms/);
  });

  it('refuses a process count that does not match the plan', async () => {
    const r = await cli(['run', '--nproc', '3', planFile(2, 'p2b.json')]);
    assert.equal(r.code, 2);
    assert.match(r.err, /run\.nproc/);
  });

  it('prints the torchrun command of a multi-node run', async () => {
    const path = planFile(4, 'p4.json.gz');
    const r = await cli(['run', '--print-torchrun', '--nnodes', '2', '--master-addr', 'node0', path]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /torchrun --nnodes=2 --nproc-per-node=2 --node-rank=\$NODE_RANK/);
    assert.match(r.out, /--master-addr=node0/);
    assert.match(r.out, /NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1/);
    assert.match(r.out, /-m fcp_torch\.worker --plan \/.*p4\.json\.gz/);
    const bad = await cli(['run', '--print-torchrun', '--nnodes', '3', '--nproc-per-node', '2', path]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /run\.nproc/);
  });
});

describe('fcp verify --executor', () => {
  // The torch runtime gathers O, dQ, dK, dV; verify refused it as "does not compute outputs" until
  // session 39 (its executor lacked the numeric flag).
  it('checks a plan on the torch runtime against the float64 reference', { skip }, async () => {
    const r = await cli(['verify', '--executor', 'torch', '--plan', planFile(2, 'pv.json')]);
    assert.equal(r.code, 0, r.err + r.out);
    assert.match(r.out, /executor torch/);
    assert.match(r.out, /verify: OK/);
  });

  it('refuses a runtime that computes no outputs', async () => {
    const r = await cli(['verify', '--executor', 'sim', '--world', '2']);
    assert.equal(r.code, 2);
    assert.match(r.err, /option\.executor/);
  });
});

describe('fcp serve', () => {
  it('answers plan requests in order, inline or written to a file, and reports bad requests', async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let text = '';
    output.on('data', (c: Buffer) => {
      text += c.toString();
    });
    const done = serve(input, output);
    const model = { qHeads: 4, kvHeads: 2, headDim: 8 };
    const path = join(dir, 'served.json.gz');
    input.write(
      `${JSON.stringify({ id: 'a', strategy: 'fcp', batch: [90, 12], world: 2, model, options: { blockSize: 16 }, validate: true })}\n`,
    );
    input.write(
      `${JSON.stringify({ id: 'b', strategy: 'magi', batch: [90, 12], world: 2, model, output: path })}\n`,
    );
    input.write('not json\n');
    input.write(`${JSON.stringify({ id: 'c', strategy: 'fcp', world: 0 })}\n`);
    input.write(`${JSON.stringify({ op: 'shutdown' })}\n`);
    await done;
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 4);
    assert.equal(lines[0]!.id, 'a');
    assert.equal(lines[0]!.ok, true);
    assert.equal((lines[0]!.plan as { strategy: string }).strategy, 'fcp');
    assert.equal(lines[1]!.path, path);
    assert.equal(readPlan(path).strategy, 'magi');
    assert.equal((lines[2]!.error as { code: string }).code, 'serve.json');
    assert.equal((lines[3]!.error as { code: string }).code, 'option.world');
  });

  it('handles ping and unknown operations', () => {
    assert.deepEqual(JSON.parse(handleServeLine('{"op":"ping","id":3}')!), { id: 3, ok: true, op: 'ping' });
    // serve's request schema (src/cli/serve.ts) refuses an unknown op as a field of the wrong value
    assert.equal(JSON.parse(handleServeLine('{"op":"dance"}')!).error.code, 'serve.field.type');
    assert.equal(handleServeLine('{"op":"shutdown"}'), null);
  });
});

describe('python package unit tests', { skip }, () => {
  it('python -m unittest discover python/tests passes', () => {
    const r = spawnSync(python!.python, ['-m', 'unittest', 'discover', '-s', 'tests', '-t', '.'], {
      cwd: pythonPackageRoot(),
      encoding: 'utf8',
      timeout: 180000,
      env: { ...process.env, OMP_NUM_THREADS: '1' },
    });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /Ran \d+ tests/);
    assert.match(r.stderr, /\nOK/);
  });
});

/**
 * `--network`, `--routing`, `--network-params`, `--engine` and `--simgrid-model` of `fcp simulate` and
 * `fcp compare`: every output names its network model; bad input is a coded error (exit 2, one line).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { findSimgridPython } from '../../src/executors/simgrid/index.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { cli } from '../helpers/cli.ts';
import { codeOfAsync } from '../helpers/errors.ts';
import { simCli as run } from '../helpers/sim-cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-cli-net-'));
const planFile = join(dir, 'plan.json');
// MagiAttention's all-to-all puts many flows through each NIC port: the models differ on it.
writePlan(
  planFile,
  getPlanner('magi').plan(resolveProblem({ world: 16, batch: 'longtail', seed: 2, tokensPerRank: 8192 })),
);
const badParams = join(dir, 'bad.json');
writeFileSync(badParams, JSON.stringify({ format: 'fcp-network/1', params: { loss: 1.5, msgUs: 1 } }));
const goodParams = join(dir, 'good.json');
writeFileSync(goodParams, JSON.stringify({ format: 'fcp-network/1', params: { loss: 0.5, msgUs: 20 } }));

test('simulate names its network model; contention and a params file change the result', async () => {
  const fluid = await run('simulate', planFile);
  assert.match(fluid, /network model: fluid \(engine builtin\)/);
  const cont = await run('simulate', planFile, '--network', 'contention');
  assert.match(cont, /network model: contention \(engine builtin, loss 0\.06288/);
  const j = JSON.parse(await run('simulate', planFile, '--json', '--network-params', goodParams));
  assert.equal(j.network, 'contention');
  assert.equal(j.cluster.contentionLoss, 0.5);
  assert.equal(j.cluster.contentionMsgUs, 20);
  const f = JSON.parse(await run('simulate', planFile, '--json'));
  assert.equal(f.network, 'fluid');
  assert.ok(j.forward.makespanMs > f.forward.makespanMs, 'a harsh fit makes the plan slower');
  // --network fluid wins over the file's implied model.
  const back = JSON.parse(
    await run('simulate', planFile, '--json', '--network-params', goodParams, '--network', 'fluid'),
  );
  assert.equal(back.forward.makespanMs, f.forward.makespanMs);
});

test("--routing pxn sends across nodes by the receiver's rail and says so", async () => {
  const f = JSON.parse(await run('simulate', planFile, '--json'));
  assert.equal(f.cluster.routing, 'direct');
  const text = await run('simulate', planFile, '--routing', 'pxn');
  assert.match(text, /network model: fluid, routing pxn \(engine builtin\)/);
  const p = JSON.parse(await run('simulate', planFile, '--json', '--routing', 'pxn'));
  assert.equal(p.cluster.routing, 'pxn');
  // The all-to-all's remote flows now share the rail NICs and the NVLink hop: other times.
  assert.notEqual(p.forward.makespanMs, f.forward.makespanMs);
  const d = JSON.parse(await run('simulate', planFile, '--json', '--routing', 'direct'));
  assert.equal(d.forward.makespanMs, f.forward.makespanMs);
});

test('compare names its network model in the table and compare.json', async () => {
  const out = join(dir, 'cmp');
  const text = await run(
    'compare',
    '--strategies',
    'fcp',
    '--world',
    '16',
    '--tokens-per-rank',
    '4096',
    '--network',
    'contention',
    '--out',
    out,
  );
  assert.match(text, /network model: contention \(engine builtin\)/);
  const doc = JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8'));
  assert.equal(doc.network, 'contention');
  assert.equal(doc.engine, 'builtin');
  assert.equal(doc.cluster.network, 'contention');
});

test('compare --engine simgrid replays every plan through SimGrid and says so', {
  skip: findSimgridPython() === null ? 'no Python with simgrid' : false,
}, async () => {
  const text = await run(
    'compare',
    '--strategies',
    'fcp',
    '--world',
    '16',
    '--tokens-per-rank',
    '4096',
    '--engine',
    'simgrid',
    '--simgrid-model',
    'cm02',
  );
  assert.match(text, /network model: simgrid-cm02 \(engine simgrid\)/);
  assert.match(text, /fcp\s+0\.\d{3}\/0\.\d{3}/);
});

test('bad network options get stable codes', async () => {
  assert.equal(await codeOfAsync(run('simulate', planFile, '--network', 'bogus')), 'option.network');
  assert.equal(await codeOfAsync(run('simulate', planFile, '--network-params', badParams)), 'network.params');
  assert.equal(
    await codeOfAsync(run('simulate', planFile, '--network-params', join(dir, 'none.json'))),
    'io.read',
  );
  assert.equal(await codeOfAsync(run('simulate', planFile, '--engine', 'ns3')), 'option.engine');
  assert.equal(
    await codeOfAsync(run('simulate', planFile, '--engine', 'simgrid', '--simgrid-model', 'ns3')),
    'option.simgridModel',
  );
  assert.equal(
    await codeOfAsync(run('simulate', planFile, '--engine', 'simgrid', '--network', 'contention')),
    'option.network',
  );
  assert.equal(
    await codeOfAsync(run('compare', '--strategies', 'fcp', '--world', '8', '--network', 'nope')),
    'option.network',
  );
  assert.equal(await codeOfAsync(run('simulate', planFile, '--routing', 'rail')), 'option.routing');
  assert.equal(
    await codeOfAsync(run('simulate', planFile, '--engine', 'simgrid', '--routing', 'pxn')),
    'option.routing',
  );
});

test('the real CLI: one error line and exit 2 for a malformed params file and for a missing SimGrid', () => {
  const cli = join(import.meta.dirname, '../../src/cli.ts');
  const go = (env: Record<string, string>, ...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', cli, ...args], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
  const a = go({}, 'simulate', planFile, '--network-params', badParams);
  assert.equal(a.status, 2);
  assert.equal(a.stdout, '');
  assert.match(a.stderr, /^fcp: error: network\.params/);
  assert.equal(a.stderr.trim().split('\n').length, 1);
  const b = go({ FCP_SIMGRID_PYTHON: '/nonexistent/python3' }, 'simulate', planFile, '--engine', 'simgrid');
  assert.equal(b.status, 2);
  assert.match(b.stderr, /^fcp: error: simgrid\.missing.*python3-simgrid/);
  assert.equal(b.stderr.trim().split('\n').length, 1);
});

test('fcp plan --network: FCP plans for the model, records a non-default one, and simulate notes a mismatch', async () => {
  const file = join(dir, 'fcp-contention.json');
  const args = ['plan', '--world', '16', '--tokens-per-rank', '4096', '--seed', '2', '-q', '--no-memory'];
  const made = await cli([...args, '--network', 'contention', '-o', file]);
  assert.equal(made.code, 0, made.err);
  const plan = JSON.parse(readFileSync(file, 'utf8')) as { meta: { network?: string } };
  assert.equal(plan.meta.network, 'contention');
  const fluidFile = join(dir, 'fcp-fluid.json');
  assert.equal((await cli([...args, '-o', fluidFile])).code, 0);
  assert.equal(
    (JSON.parse(readFileSync(fluidFile, 'utf8')) as { meta: { network?: string } }).meta.network,
    undefined,
  );
  assert.match(await run('simulate', file), /made for --network contention, simulated under --network fluid/);
  assert.doesNotMatch(await run('simulate', file, '--network', 'contention'), /made for --network/);
  assert.doesNotMatch(await run('simulate', fluidFile), /made for --network/);
  const bad = await cli([...args, '--network', 'packet']);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /^fcp: error: option\.network/m);
});

/**
 * `fcp simulate` and `fcp compare`, run in-process on a program holding only those commands.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
import { codeOfAsync } from '../helpers/errors.ts';
import { simCli as run } from '../helpers/sim-cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-cli-sim-'));
const planFile = join(dir, 'plan.json');
writePlan(
  planFile,
  simplePlan(resolveProblem({ world: 4, batch: 'longtail', seed: 2, tokensPerRank: 8192 })),
);

test('simulate prints a table, --json the full result, --trace a Chrome trace', async () => {
  const text = await run('simulate', planFile);
  assert.match(text, /attention MFU/);
  assert.match(text, /makespan ms/);
  const trace = join(dir, 'trace.json');
  const json = JSON.parse(
    await run('simulate', planFile, '--json', '--cluster', 'ratio-5920', '--comm-sms', '8', '--trace', trace),
  );
  assert.equal(json.cluster.name, 'ratio-5920');
  assert.equal(json.cluster.commSms, 8);
  assert.equal(json.forward.computeMs.length, 4);
  assert.ok(json.forward.mfu > 0 && json.forward.mfu < 1);
  assert.equal(json.trace, undefined);
  const t = JSON.parse(readFileSync(trace, 'utf8'));
  assert.ok(t.traceEvents.some((e: { ph: string }) => e.ph === 'X'));
  // A faster NIC never makes the plan slower.
  const fast = JSON.parse(await run('simulate', planFile, '--json', '--nic-gbps', '500'));
  assert.ok(fast.forward.makespanMs <= json.forward.makespanMs);
});

test('--free-kinds: the named kinds carry no bytes, per phase; labelled a what-if; bad names rejected', async () => {
  const full = JSON.parse(await run('simulate', planFile, '--json'));
  const noIn = JSON.parse(await run('simulate', planFile, '--json', '--free-kinds', 'forward.in'));
  const none = JSON.parse(await run('simulate', planFile, '--json', '--free-kinds', 'in,kv,out,dkv'));
  // Only the forward changes, and it does not get slower; with every kind free the transfers are
  // latency only, so neither phase is slower than with forward `in` alone free.
  assert.equal(noIn.backward.makespanMs, full.backward.makespanMs);
  assert.ok(noIn.forward.makespanMs <= full.forward.makespanMs);
  assert.ok(none.forward.makespanMs <= noIn.forward.makespanMs + 1e-9);
  assert.ok(none.backward.makespanMs < full.backward.makespanMs, 'the backward moves bytes in this plan');
  assert.match(await run('simulate', planFile, '--free-kinds', 'backward.dkv'), /what-if, not a real time/);
  assert.doesNotMatch(await run('simulate', planFile), /what-if/);
  for (const bad of ['bogus', 'forward.nope', 'sideways.in', ''])
    assert.equal(await codeOfAsync(run('simulate', planFile, '--free-kinds', bad)), 'option.freeKinds');
  // compare: labelled in its table, recorded in compare.json; absent from a real comparison.
  const out = join(dir, 'what-if');
  const cmp = ['compare', '--strategies', 'ring', '--world', '4', '--tokens-per-rank', '4096', '--out', out];
  assert.match(await run(...cmp, '--free-kinds', 'kv'), /what-if, not a real time/);
  assert.deepEqual(JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8')).freeKinds, {
    forward: [1],
    backward: [1],
  });
  assert.doesNotMatch(await run(...cmp), /what-if/);
  assert.equal('freeKinds' in JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8')), false);
});

test('simulate rejects bad options with stable codes', async () => {
  assert.equal(await codeOfAsync(run('simulate', planFile, '--cluster', 'nope')), 'cluster.unknown');
  assert.equal(await codeOfAsync(run('simulate', planFile, '--kernel', 'fast')), 'option.kernel');
  assert.equal(await codeOfAsync(run('simulate', planFile, '--nic-gbps', 'x')), 'option.nicGbps');
  assert.equal(await codeOfAsync(run('simulate', join(dir, 'missing.json'))), 'io.read');
  assert.equal(
    await codeOfAsync(run('simulate', planFile, '--calibration', join(dir, 'missing.json'))),
    'io.read',
  );
});

test('compare writes compare.json and plots, deterministically; a failure writes nothing', async () => {
  const out = join(dir, 'cmp');
  const args = [
    'compare',
    '--strategies',
    'ring,magi',
    '--world',
    '2,4',
    '--batches',
    '2',
    '--tokens-per-rank',
    '4096',
    '--out',
    out,
  ];
  const table = await run(...args);
  assert.match(table, /ring/);
  const doc = JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8'));
  assert.equal(doc.rows.length, 2 * 2 * 2);
  const row = doc.rows[0];
  for (const k of [
    'strategy',
    'world',
    'batch',
    'mfuForward',
    'mfuBackward',
    'makespans',
    'imbalances',
    'bytes',
  ])
    assert.ok(k in row, k);
  // The most exposed rank's communication bounds the mean over ranks from above.
  for (const r of doc.rows)
    for (const ph of ['forward', 'backward'])
      assert.ok(r.maxExposedCommMs[ph] >= r.exposedCommMs[ph] - 1e-9, `${r.strategy} ${r.world} ${ph}`);
  for (const f of ['mfu.png', 'mfu.svg', 'imbalance.png', 'imbalance.svg'])
    assert.ok(existsSync(join(out, f)), f);
  const png = readFileSync(join(out, 'mfu.png'));
  assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47]); // "PNG"
  const first = readFileSync(join(out, 'compare.json'));
  writeFileSync(join(out, 'stale.txt'), 'old');
  await run(...args);
  assert.ok(readFileSync(join(out, 'compare.json')).equals(first));
  assert.ok(!existsSync(join(out, 'stale.txt')), 'the folder is replaced as a whole');
  const bad = join(dir, 'bad');
  assert.equal(
    await codeOfAsync(run('compare', '--strategies', 'ring,nope', '--world', '2', '--out', bad)),
    'strategy.unknown',
  );
  assert.ok(!existsSync(bad));
});

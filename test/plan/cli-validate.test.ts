/**
 * `fcp validate`: exit status 0 for a valid plan, 1 for a plan that breaks a rule (issues printed
 * as `code at path[row]: message`), FcpError (the CLI's exit 2) for unreadable or malformed files.
 * Runs the command in-process through the CLI's `main` (test/helpers/cli.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { planToJson, writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
import { cli } from '../helpers/cli.ts';
import { clonePlan } from './mutate.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-cli-validate-'));
const plan = simplePlan(resolveProblem({ batch: [40, 9, 70], world: 2, model: SMALL_MODEL }));

/** Runs `fcp validate ...args` in-process (test/helpers/cli.ts); returns stdout, stderr and the exit code. */
const run = async (...args: string[]): Promise<{ out: string; err: string; code: number }> =>
  cli(['validate', ...args]);

test('a valid plan (gzip too) prints the report and exits 0', async () => {
  const file = join(dir, 'ok.json.gz');
  writePlan(file, plan);
  const { out, code } = await run(file);
  assert.equal(code, 0);
  assert.match(out, /congestion/);
  assert.match(out, /^valid: /m);
});

test('a plan that breaks a rule lists its issues and exits 1; --json prints the result', async () => {
  const bad = clonePlan(plan);
  bad.userLayout.length[0]! -= 1;
  const file = join(dir, 'bad.json');
  writePlan(file, bad);
  const { out, code } = await run(file);
  assert.equal(code, 1);
  assert.match(out, /^plan\.rule1\.gap at userLayout\[\d+\]: /m);
  const json = await run(file, '--json');
  assert.equal(json.code, 1);
  const parsed = JSON.parse(json.out) as { valid: boolean; issues: { code: string }[] };
  assert.equal(parsed.valid, false);
  assert.ok(parsed.issues.some((i) => i.code === 'plan.rule1.gap'));
});

test('unreadable, malformed and other-version files are user errors (exit 2 in main)', async () => {
  const expect = async (file: string, code: string): Promise<void> => {
    const r = await run(file);
    assert.equal(r.code, 2);
    assert.equal(r.err.match(/^fcp: error: ([\w.]+)[: ]/m)?.[1], code, r.err);
    assert.equal(r.err.trim().split('\n').length, 1, r.err);
  };
  await expect(join(dir, 'missing.json'), 'io.read');
  const junk = join(dir, 'junk.json');
  writeFileSync(junk, '{ not json');
  await expect(junk, 'plan.json');
  const old = join(dir, 'old.json');
  writeFileSync(old, planToJson(plan).replace('fcp-plan/1', 'fcp-plan/2'));
  await expect(old, 'plan.format');
  const noTasks = join(dir, 'schema.json');
  const o = JSON.parse(planToJson(plan)) as Record<string, unknown>;
  delete o.tasks;
  writeFileSync(noTasks, JSON.stringify(o));
  await expect(noTasks, 'plan.schema');
});

test('NIC congestion: counted for --gpus-per-node and --routing; bad values are option errors', async () => {
  // Two ranks on nodes of one GPU: the plan's messages all cross nodes.
  const file = join(dir, 'nic.json');
  writePlan(file, plan);
  const pxn = await run(file, '--gpus-per-node', '1', '--routing', 'pxn', '--json');
  assert.equal(pxn.code, 0);
  const r = JSON.parse(pxn.out) as { report: { nicRoute: { gpusPerNode: number; routing: string } } };
  assert.deepEqual(r.report.nicRoute, { gpusPerNode: 1, routing: 'pxn' });
  const text = await run(file);
  assert.match(text.out, /^NIC congestion \(direct, 8\/node\)/m);
  for (const [args, code] of [
    [['--routing', 'rail'], 'option.routing'],
    [['--gpus-per-node', '0'], 'option.gpusPerNode'],
    [['--gpus-per-node', 'x'], 'option.gpusPerNode'],
  ] as const) {
    const bad = await run(file, ...args);
    assert.equal(bad.code, 2, bad.err);
    assert.equal(bad.err.match(/^fcp: error: ([\w.]+)[: ]/m)?.[1], code, bad.err);
  }
});

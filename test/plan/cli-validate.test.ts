/**
 * `fcp validate`: exit status 0 for a valid plan, 1 for a plan that breaks a rule (issues printed
 * as `code at path[row]: message`), FcpError (the CLI's exit 2) for unreadable or malformed files.
 * Runs the command in-process on a program holding only this command.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Command } from 'commander';
import { register } from '../../src/cli/validate.ts';
import { FcpError } from '../../src/core/issues.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { planToJson, writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
import { clonePlan } from './mutate.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-cli-validate-'));
const plan = simplePlan(resolveProblem({ batch: [40, 9, 70], world: 2, model: SMALL_MODEL }));

/** Runs `validate ...args`; returns stdout and the exit code the command set. */
async function run(...args: string[]): Promise<{ out: string; code: number }> {
  const program = new Command('fcp').exitOverride();
  register(program);
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  const saved = process.exitCode;
  try {
    await program.parseAsync(['validate', ...args], { from: 'user' });
    return { out, code: Number(process.exitCode ?? 0) };
  } finally {
    process.stdout.write = write;
    process.exitCode = saved;
  }
}

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
    await assert.rejects(run(file), (e: unknown) => e instanceof FcpError && e.code === code);
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

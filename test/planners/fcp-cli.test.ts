/**
 * `fcp plan` end to end, in-process through `main` (src/cli/main.ts): the summary, `-o` (plain and
 * gzip, byte-identical for the same arguments), `--list`, and bad input: exit code 2, one line
 * naming the problem, and no output file.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readPlan } from '../../src/plan/io.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { cli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-plan-cli-'));

/** Runs `fcp ARGS...` in-process (test/helpers/cli.ts). */
const fcp = (...args: string[]) => cli(args);

const small = ['--world', '8', '--tokens-per-rank', '2048', '--block-size', '256'];

test('fcp plan prints the summary and writes a valid plan with -o', async () => {
  const file = join(dir, 'plan.json');
  const r = await fcp('plan', ...small, '--seed', '3', '-o', file);
  assert.equal(r.code, 0, r.err);
  for (const what of [
    /kv delta \/ kv rounds/,
    /congestion/,
    /compute imbalance/,
    /bytes dkv/,
    /blocks \d+/,
    /reshuffle: .*without the locality tie-break/,
    /planned in/,
  ])
    assert.match(r.out, what);
  // A given block size is pinned: the tuner reports its group-size candidates at that size only.
  assert.match(r.out, /self-tuning \(budget 200 ms\): 2 candidates, kept blocks 256, groups of \d+/);
  const tuned = await fcp('plan', '--world', '8', '--tokens-per-rank', '2048', '--seed', '3');
  assert.equal(tuned.code, 0, tuned.err);
  assert.match(
    tuned.out,
    /self-tuning \(budget 200 ms\): 8 candidates, kept blocks \d+, groups of \d+ \(estimate/,
  );
  // Mode (b): its layout search sized the candidates; no block sizes (they are the layout's).
  const loader = await fcp(
    'plan',
    '--world',
    '16',
    '--tokens-per-rank',
    '2048',
    '--seed',
    '3',
    '--loader-layout',
  );
  assert.equal(loader.code, 0, loader.err);
  assert.match(loader.out, /self-tuning \(full layout search\): \d+ candidates, kept groups of \d+/);
  // Mode (b) moves no token between layouts: no re-plan without the locality tie-break.
  assert.doesNotMatch(loader.out, /locality tie-break/);
  const plan = readPlan(file);
  assert.equal(plan.strategy, 'fcp');
  assert.deepEqual(validatePlan(plan).issues, []);
});

test('same arguments give a byte-identical file (plain and gzip)', async () => {
  const a = join(dir, 'a.json');
  const b = join(dir, 'b.json');
  const gz = join(dir, 'c.json.gz');
  for (const f of [a, b, gz])
    assert.equal((await fcp('plan', ...small, '--seed', '4', '--no-validate', '-o', f)).code, 0);
  assert.ok(readFileSync(a).equals(readFileSync(b)));
  assert.equal(readPlan(gz).tasks.rank.length, readPlan(a).tasks.rank.length);
  const json = await fcp('plan', ...small, '--seed', '4', '--json');
  const summary = JSON.parse(json.out) as { valid: boolean; report: { forward: { congestion: number } } };
  assert.equal(summary.valid, true);
  assert.equal(summary.report.forward.congestion, 1);
});

test('fcp plan --list names every strategy', async () => {
  const r = await fcp('plan', '--list');
  assert.equal(r.code, 0);
  assert.match(r.out, /^fcp\s+\S/m);
});

test('fcp plan plans with any registered strategy', async () => {
  const r = await fcp('plan', '--list');
  const names = r.out
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(/\s+/)[0]!);
  for (const name of names) {
    const p = await fcp(
      'plan',
      '--strategy',
      name,
      '--world',
      '4',
      '--tokens-per-rank',
      '2048',
      '--no-compare-locality',
    );
    // Not a usage error, and a summary (another planner's validity is its own tests' business).
    assert.notEqual(p.code, 2, `${name}: ${p.err}`);
    assert.match(p.out, new RegExp(`strategy ${name}`));
  }
});

/** Bad input: exit 2, exactly one line on stderr naming `code`, and no output file. */
async function rejects(code: string, ...args: string[]): Promise<void> {
  const out = join(dir, `bad-${code}-${args.length}.json`);
  const r = await fcp('plan', ...args, '-o', out);
  assert.equal(r.code, 2, `${code}: exit ${r.code}, stderr ${r.err}`);
  const lines = r.err.trim().split('\n');
  assert.equal(lines.length, 1, `one line expected, got:\n${r.err}`);
  assert.match(lines[0]!, new RegExp(`^fcp: error: ${code.replace(/\./g, '\\.')}\\b`));
  assert.ok(!existsSync(out), 'no output file');
}

const batchFile = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

test('bad batch files: negative, zero, non-integer lengths, empty, malformed, unreadable', async () => {
  await rejects(
    'batch.length.nonPositive',
    '--batch',
    batchFile('neg.txt', '100\n-5\n200\n'),
    '--world',
    '2',
  );
  await rejects('batch.length.nonPositive', '--batch', batchFile('zero.txt', '100\n0\n'), '--world', '2');
  await rejects('batch.length.notInteger', '--batch', batchFile('frac.txt', '100\n2.5\n'), '--world', '2');
  await rejects('batch.length.notInteger', '--batch', batchFile('frac.json', '[100, 7.25]'), '--world', '2');
  await rejects('batch.empty', '--batch', batchFile('empty.txt', '# nothing\n\n'), '--world', '2');
  await rejects('batch.parse', '--batch', batchFile('bad.json', '[100, 200'), '--world', '2');
  const sub = join(dir, 'a-directory');
  mkdirSync(sub);
  await rejects('io.read', '--batch', sub, '--world', '2');
});

test('bad options: world 0, block size 0, tokens over memory, unknown generator or strategy', async () => {
  await rejects('option.world', '--world', '0');
  await rejects('option.blockSize', '--world', '2', '--tokens-per-rank', '1024', '--block-size', '0');
  await rejects('capacity.exceeded', '--world', '2', '--tokens-per-rank', '4096', '--memory-tokens', '1000');
  await rejects('batch.unknown', '--batch', 'no-such-generator', '--world', '2');
  await rejects('strategy.unknown', '--strategy', 'no-such-strategy', '--world', '2');
  await rejects('option.tolerance', '--world', '2', '--tokens-per-rank', '1024', '--tolerance', '1.5');
  await rejects('option.coalesce', '--world', '2', '--tokens-per-rank', '1024', '--coalesce', '0');
});

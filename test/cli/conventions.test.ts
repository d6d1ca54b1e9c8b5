/**
 * The command-line conventions of docs/cli.md, one test per rule, across every command of the
 * program (the list comes from createProgram, so a new command is checked without editing this
 * file). Runs the CLI in-process through main(), capturing stdout and stderr: much faster than a
 * child process per case on a small machine.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, test } from 'node:test';
import { createProgram, main } from '../../src/cli/main.ts';
import { createLiveProgress, formatDuration, stopAllProgress } from '../../src/cli/progress.ts';
import { captureOutput } from '../helpers/cli.ts';

interface Run {
  code: number;
  out: string;
  err: string;
  /** stderr writes with the time (ms) each arrived, for the progress rule. */
  errAt: { t: number; s: string }[];
}

/** Runs `fcp ARGS...` in-process (test/helpers/cli.ts). */
async function fcp(...args: string[]): Promise<Run> {
  const { value: code, out, err, errAt } = await captureOutput(() => main(args));
  return { code, out, err, errAt };
}

const dir = mkdtempSync(join(tmpdir(), 'fcp-conventions-'));
const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

const program = createProgram();
const commands = program.commands.map((c) => c.name()).filter((n) => n !== 'help');
const longs = (name: string): string[] =>
  program.commands.find((c) => c.name() === name)!.options.map((o) => o.long ?? '');
const hidden = (name: string): string[] =>
  program.commands
    .find((c) => c.name() === name)!
    .options.filter((o) => o.hidden)
    .map((o) => o.long ?? '');

/** Commands whose result is a table, with a --csv (docs/cli.md lists the rows of each). */
const TABLES = ['plan', 'validate', 'compare-plans', 'simulate', 'compare', 'verify', 'run', 'demo'];
/** Commands with no result on stdout besides what they are (serve: the protocol; report: a folder). */
const NO_RESULT = ['serve', 'report'];

/** Splits CSV text into rows of fields (RFC 4180 quotes), to check the tables are rectangular. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let f = '';
  let q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (q) {
      if (c === '"' && text[i + 1] === '"') {
        f += '"';
        i++;
      } else if (c === '"') q = false;
      else f += c;
    } else if (c === '"') q = true;
    else if (c === ',') {
      row.push(f);
      f = '';
    } else if (c === '\n') {
      row.push(f);
      rows.push(row);
      row = [];
      f = '';
    } else f += c;
  }
  assert.equal(f, '', 'CSV ends with a line break');
  return rows;
}

function assertCsv(r: Run, what: string): string[][] {
  assert.equal(r.code, 0, `${what}: ${r.err}`);
  const rows = parseCsv(r.out);
  assert.ok(rows.length >= 2, `${what}: a header and at least one row`);
  for (const row of rows) assert.equal(row.length, rows[0]!.length, `${what}: rectangular`);
  assert.ok(
    rows[0]!.every((h) => /^[a-z][a-z0-9_]*$/.test(h)),
    `${what}: snake_case header ${rows[0]}`,
  );
  return rows;
}

function assertJson(r: Run, what: string): unknown {
  assert.equal(r.code, 0, `${what}: ${r.err}`);
  return JSON.parse(r.out); // one document, nothing else on stdout
}

/** The only stderr lines of a usage error: exactly one coded line. */
function assertUsageError(r: Run, code: string, what: string): void {
  assert.equal(r.code, 2, `${what}: exit 2 (${r.err})`);
  assert.equal(r.out, '', `${what}: nothing on stdout`);
  const lines = r.err.trimEnd().split('\n');
  assert.equal(lines.length, 1, `${what}: one line, got ${r.err}`);
  assert.match(lines[0]!, new RegExp(`^fcp: error: ${code.replace('.', '\\.')}( at [^:]+)?: `), what);
}

// ---- fixtures: a small plan and its files -----------------------------------------------------

const planFile = join(dir, 'plan.json');
const small = ['--world', '2', '--tokens-per-rank', '512'];
/** The plan file has the CPU runtime's small model, so that `run --backend cpu` takes a second. */
const smallModel = [...small, '--q-heads', '4', '--kv-heads', '2', '--head-dim', '32'];

describe('rule: help and version go to stdout with exit 0', () => {
  it('fcp --help, fcp help, and --help / help CMD for every command', async () => {
    for (const args of [['--help'], ['-h'], ['help']]) {
      const r = await fcp(...args);
      assert.equal(r.code, 0, args.join(' '));
      assert.match(r.out, /^Usage: fcp /);
      assert.equal(r.err, '');
    }
    assert.ok(commands.length >= 10, `${commands}`);
    for (const c of commands)
      for (const args of [
        [c, '--help'],
        ['help', c],
      ]) {
        const r = await fcp(...args);
        assert.equal(r.code, 0, args.join(' '));
        assert.match(r.out, new RegExp(`^Usage: fcp ${c} `), args.join(' '));
        assert.equal(r.err, '', args.join(' '));
      }
  });
  it('--version and -V print the package version', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await fcp(flag);
      assert.equal(r.code, 0);
      assert.equal(r.out, `${VERSION}\n`);
      assert.equal(r.err, '');
    }
  });
});

describe('rule: usage errors are one coded line on stderr and exit 2', () => {
  it('bare fcp: the help on stderr, then cli.missingCommand', async () => {
    const r = await fcp();
    assert.equal(r.code, 2);
    assert.equal(r.out, '');
    assert.match(r.err, /^Usage: fcp /);
    assert.match(r.err.trimEnd().split('\n').at(-1)!, /^fcp: error: cli\.missingCommand: /);
  });
  it('unknown command, unknown option of every command, missing values and arguments', async () => {
    assertUsageError(await fcp('nope'), 'cli.unknownCommand', 'fcp nope');
    for (const c of commands) assertUsageError(await fcp(c, '--bogus'), 'cli.unknownOption', `${c} --bogus`);
    for (const c of ['validate', 'simulate', 'report', 'run'])
      assertUsageError(await fcp(c), 'cli.missingArgument', c);
    assertUsageError(await fcp('plan', '--world'), 'cli.missingValue', 'plan --world');
    assertUsageError(await fcp('validate', 'a', 'b'), 'cli.extraArgument', 'validate a b');
    assertUsageError(await fcp('plan', '--world', 'x'), 'option.world', 'plan --world x');
  });
  it('values bench/fuzz-cli.ts found unchecked: out-of-range group sizes and batch counts, empty and unwritable output paths, refused before any planning', async () => {
    for (const flag of ['--coalesce', '--comm-coalesce', '--push-coalesce'])
      assertUsageError(
        await fcp('plan', ...small, flag, '99999999999'),
        `option.${flag.slice(2).replace(/-c/, 'C')}`,
        `plan ${flag}`,
      );
    assertUsageError(
      await fcp('plan', ...small, '--coalesce', '4097'),
      'option.coalesce',
      'plan --coalesce 4097',
    );
    assertUsageError(
      await fcp('compare', ...small, '--batches', '99999999999'),
      'option.batches',
      'compare --batches',
    );
    // The path is checked before planning: the planner, which refuses --tolerance 5 as it starts,
    // never runs (before, the plan was made and then found nowhere to go).
    assertUsageError(
      await fcp('plan', ...small, '--tolerance', '5', '-o', join(dir, 'missing', 'p.json')),
      'io.write',
      'plan -o missing/',
    );
    assertUsageError(await fcp('plan', ...small, '-o', ''), 'io.write', 'plan -o ""');
    assertUsageError(await fcp('compare', ...small, '--out', ''), 'io.write', 'compare --out ""');
  });
  it('--json and --csv together are refused by every command that has both', async () => {
    for (const c of TABLES)
      assertUsageError(await fcp(c, '--json', '--csv'), 'cli.conflictingOptions', `${c} --json --csv`);
  });
});

describe('rule: every command declares the shared output options', () => {
  it('--quiet everywhere, --json where there is a result, --csv where it is a table', () => {
    for (const c of commands) {
      const o = longs(c);
      assert.ok(o.includes('--quiet'), `${c} --quiet`);
      if (!NO_RESULT.includes(c)) assert.ok(o.includes('--json'), `${c} --json`);
      assert.equal(o.includes('--csv'), TABLES.includes(c), `${c} --csv`);
    }
    assert.deepEqual(
      commands.filter((c) => !NO_RESULT.includes(c) && !TABLES.includes(c)),
      [],
      'every command with a result is a table',
    );
  });
  it('files and folders a command writes are -o/--out (older spellings stay as hidden aliases)', () => {
    for (const c of commands) {
      const cmd = program.commands.find((x) => x.name() === c)!;
      for (const o of cmd.options) {
        if (o.long === '--out') assert.equal(o.short, '-o', `${c}: --out has -o`);
        if (o.long === '--output') assert.ok(o.hidden, `${c}: --output is a hidden alias`);
        if (o.long === '--json') assert.ok(!o.required && !o.optional, `${c}: --json takes no value`);
      }
      if (longs(c).includes('--output')) assert.ok(hidden(c).includes('--output'));
    }
  });
});

describe('rule: results on stdout; progress and "wrote" lines on stderr; --quiet silences them', () => {
  it('plan', async () => {
    const r = await fcp('plan', ...smallModel, '-o', planFile);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /planned in/);
    assert.doesNotMatch(r.out, /wrote/);
    assert.match(r.err, new RegExp(`^fcp plan: wrote ${planFile}`, 'm'));
    const q = await fcp('plan', ...small, '-o', join(dir, 'q.json'), '--quiet', '--json');
    assert.equal(q.err, '');
    assert.equal((assertJson(q, 'plan --json') as { valid: boolean }).valid, true);
    assert.ok(existsSync(join(dir, 'q.json')));
    // The old spelling still writes the plan.
    assert.equal((await fcp('plan', ...small, '--output', join(dir, 'old.json'), '-q')).code, 0);
    assert.ok(existsSync(join(dir, 'old.json')));
    const csv = assertCsv(await fcp('plan', ...small, '--csv', '-q'), 'plan --csv');
    assert.deepEqual(
      csv.slice(1).map((x) => x[0]),
      ['forward', 'backward', 'total'],
    );
  });
  it('validate', async () => {
    const r = await fcp('validate', planFile);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /valid: /);
    assert.equal(r.err, '');
    assert.equal(
      (assertJson(await fcp('validate', planFile, '--json'), 'validate') as { valid: boolean }).valid,
      true,
    );
    assertCsv(await fcp('validate', planFile, '--csv'), 'validate --csv');
  });
  it('compare-plans: --json on stdout, -o for the file', async () => {
    const args = ['compare-plans', '--world', '2,4', '--tokens-per-rank', '256', '--strategies', 'ring,fcp'];
    const file = join(dir, 'rows.json');
    const r = await fcp(...args, '-o', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, new RegExp(`^fcp compare-plans: wrote ${file}`, 'm'));
    assert.doesNotMatch(r.out, /\[1\/4 /); // progress, if any, is on stderr
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).length, 4);
    const j = await fcp(...args, '--json', '-q');
    assert.equal(j.err, '');
    assert.equal((assertJson(j, 'compare-plans --json') as unknown[]).length, 4);
    assert.equal(assertCsv(await fcp(...args, '--csv', '-q'), 'compare-plans --csv').length, 5);
  });
  it('simulate: --trace is a "wrote" line', async () => {
    const trace = join(dir, 'trace.json');
    const r = await fcp('simulate', planFile, '--trace', trace);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /all times simulated/);
    assert.match(r.err, new RegExp(`^fcp simulate: wrote ${trace}`, 'm'));
    assert.ok(existsSync(trace));
    assert.equal((await fcp('simulate', planFile, '--trace', trace, '-q')).err, '');
    assertJson(await fcp('simulate', planFile, '--json'), 'simulate --json');
    const csv = assertCsv(await fcp('simulate', planFile, '--csv'), 'simulate --csv');
    assert.deepEqual(
      csv.slice(1).map((x) => x[0]),
      ['forward', 'backward'],
    );
  });
  it('compare, and fcp report accepts the compare.json it writes', async () => {
    const args = ['compare', '--strategies', 'fcp,ring', '--world', '2,4', '--tokens-per-rank', '512'];
    const j = await fcp(...args, '--json', '-q');
    assert.equal(j.err, '');
    const doc = assertJson(j, 'compare --json') as { format: string; rows: unknown[] };
    assert.equal(doc.format, 'fcp-compare/1');
    assert.equal(doc.rows.length, 4);
    assert.equal(assertCsv(await fcp(...args, '--csv', '-q'), 'compare --csv').length, 5);
    const out = join(dir, 'cmp');
    const r = await fcp(...args, '-o', out);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /attention MFU forward\/backward/);
    assert.match(r.err, new RegExp(`^fcp compare: wrote ${join(out, 'compare.json')}`, 'm'));
    const rep = await fcp('report', join(out, 'compare.json'), '--out', join(dir, 'rep'));
    assert.equal(rep.code, 0, rep.err);
    assert.equal(rep.out, '', 'report prints no result: the folder is the result');
    assert.match(rep.err, /^fcp report: wrote .*index\.html/m);
    assert.ok(existsSync(join(dir, 'rep', 'index.html')));
  });
  it('verify', async () => {
    const tiny = ['--world', '2', '--tokens-per-rank', '256'];
    const j = await fcp('verify', ...tiny, '--json', '-q');
    assert.equal(j.err, '');
    const doc = assertJson(j, 'verify --json') as { ok: boolean; errors: Record<string, number> };
    assert.equal(doc.ok, true);
    assert.deepEqual(Object.keys(doc.errors).sort(), ['dk', 'dq', 'dv', 'o']);
    const csv = assertCsv(await fcp('verify', ...tiny, '--csv', '-q'), 'verify --csv');
    assert.deepEqual(
      csv.slice(1).map((x) => x[3]),
      ['true', 'true', 'true', 'true'],
    );
  });
  it('run (sim and cpu runtimes)', async () => {
    const file = join(dir, 'run.json');
    const r = await fcp('run', '--backend', 'sim', planFile, '-o', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, new RegExp(`^fcp run: wrote ${file}`, 'm'));
    assert.doesNotMatch(r.out, /wrote/);
    assertJson(await fcp('run', '--backend', 'cpu', '--check', planFile, '--json', '-q'), 'run --json');
    const csv = assertCsv(await fcp('run', '--backend', 'sim', planFile, '--csv'), 'run --csv');
    assert.equal(csv.length, 1 + 2 * 2, 'one row per phase and rank');
    const q = await fcp('run', '--backend', 'cpu', planFile, '-q');
    assert.equal(q.code, 0, q.err);
    assert.equal(q.err, '');
  });
  it('demo', async () => {
    const args = [
      'demo',
      '--world',
      '4',
      '--tokens-per-rank',
      '512',
      '--scaling',
      'none',
      '--no-numerics',
      '--no-ablation',
    ];
    const out = join(dir, 'demo');
    const j = await fcp(...args, '--out', out, '--json', '-q');
    assert.equal(j.err, '');
    const doc = assertJson(j, 'demo --json') as { runs: unknown[] };
    assert.ok(doc.runs.length >= 5);
    assert.ok(existsSync(join(out, 'index.html')));
    const c = await fcp(...args, '--out', out, '--csv');
    assertCsv(c, 'demo --csv');
    assert.match(c.err, /^fcp demo: wrote .*index\.html/m);
  });
  it('serve: --quiet drops the ready line', () => {
    assert.ok(longs('serve').includes('--quiet'));
  });
});

describe('rule: long work prints progress on stderr at least every 5 s, with an estimate', () => {
  it('a fake clock: a line per step, a heartbeat after the interval, fractions throttled, estimates', () => {
    let t = 0;
    const lines: string[] = [];
    const p = createLiveProgress({
      name: 'fcp x',
      total: 2,
      weights: [1, 3],
      intervalMs: 3000,
      startDelayMs: 0,
      now: () => t,
      timer: false,
      stream: { write: (s: string) => lines.push(s) },
    });
    p.step('first');
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^fcp x: \[1\/2 +0\.0s\] first\n$/);
    t = 1000;
    p.heartbeat();
    p.fraction(0.5);
    assert.equal(lines.length, 1, 'nothing within the interval');
    t = 3000;
    p.fraction(0.5);
    assert.equal(lines.length, 2, 'a fraction after the interval prints');
    // 0.5 of weight 1 done in 3 s: 3.5 weights left at 6 s per weight.
    assert.match(lines[1]!, /first: 50%, about 21 s left\n$/);
    t = 4000;
    p.step('second');
    // 1% of the whole done (0.04 of weight 3 after weight 1): no estimate yet, not a wild one.
    const few = createLiveProgress({
      name: 'fcp z',
      total: 1,
      weights: [1],
      startDelayMs: 0,
      now: () => t,
      timer: false,
      stream: { write: (s: string) => lines.push(s) },
    });
    few.step('plan and simulate');
    t = 4000 + 68000;
    few.fraction(0.0001);
    assert.match(lines.at(-1)!, /plan and simulate: 0%\n$/);
    few.done();
    lines.length = 3;
    t = 7000;
    p.heartbeat();
    assert.equal(lines.length, 4, 'the heartbeat prints after the interval');
    assert.match(lines[3]!, /^fcp x: \[2\/2 +7\.0s\] second/);
    p.done();
    t = 20000;
    p.heartbeat();
    p.fraction(0.9);
    assert.equal(lines.length, 4, 'nothing after done');
  });
  it("without weights the estimate is the step's own; durations read well", () => {
    let t = 0;
    const lines: string[] = [];
    const p = createLiveProgress({
      name: 'fcp y',
      total: 1,
      startDelayMs: 0,
      now: () => t,
      timer: false,
      stream: { write: (s: string) => lines.push(s) },
    });
    p.step('reference');
    t = 4000;
    p.fraction(0.25);
    assert.match(lines[1]!, /reference: 25%, about 12 s left in this step\n$/);
    assert.equal(formatDuration(125000), '2 min 5 s');
    assert.equal(formatDuration(3.25e6), '54 min 10 s');
    // The start delay: a job that ends within it prints nothing; a later step prints at once.
    t = 0;
    const held: string[] = [];
    const d = createLiveProgress({
      name: 'fcp z',
      total: 2,
      now: () => t,
      timer: false,
      stream: { write: (s: string) => held.push(s) },
    });
    d.step('quick');
    t = 900;
    d.heartbeat();
    assert.equal(held.length, 0, 'nothing within the first second');
    t = 1000;
    d.heartbeat();
    assert.match(held[0]!, /\[1\/2 +1\.0s\] quick/);
    d.step('next');
    assert.equal(held.length, 2);
    d.done();
    stopAllProgress();
  });
  it('a real verify run: no stderr silence longer than 5 s, fractions with estimates', async () => {
    const t0 = performance.now();
    const r = await fcp('verify', '--world', '4', '--tokens-per-rank', '512');
    const end = performance.now();
    assert.equal(r.code, 0, r.err);
    const times = [t0, ...r.errAt.map((x) => x.t), end];
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    assert.ok(Math.max(...gaps) <= 5000, `longest silence ${Math.max(...gaps).toFixed(0)} ms: ${r.err}`);
    assert.match(r.err, /^fcp verify: \[3\/3 .*float64 reference/m);
  });
});

test('--quiet leaves errors alone', async () => {
  assertUsageError(await fcp('plan', '--world', 'x', '-q'), 'option.world', 'plan --world x -q');
});

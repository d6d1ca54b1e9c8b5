/**
 * Every option of every command with values a user may mistype: each call must end in exit 0, or
 * exit 1 with a verdict (validate, verify, run --check), or exit 2 with one line `fcp: error: CODE
 * ...` on stderr; never an internal error, a stack trace, or a file left behind by a refused call.
 * The commands run in-process (src/cli/main.ts) on a small problem (`--world 4 --tokens-per-rank
 * 512`, plan files of that size) so that a call that accepts a value is quick; options that start
 * processes (`run --backend torch`) are left out; `serve`'s requests go through its line handler,
 * every field and planner option of every strategy with JSON values of every kind, and each answer
 * must be one JSON line, ok or a coded error (never `serve.internal`).
 *
 * What it found (session 39): see docs/results.md, "Session 39".
 *
 * Run: npx tsx bench/fuzz-cli.ts [--commands plan,verify,...] [--values ...] (comma-separated)
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command, Option } from 'commander';
import { createProgram, main } from '../src/cli/main.ts';
import { handleServeLine, serveRequestSchema } from '../src/cli/serve.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../src/model/attention.ts';
import { writePlan } from '../src/plan/io.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { captureOutput } from '../test/helpers/cli.ts';
import { argValue } from './fcp-replay.ts';

const argv = process.argv.slice(2);
/** Values a user may mistype: signs, words, empties, huge and fractional numbers, lists. */
const VALUES = argValue(argv, '--values', '-1,0,abc,,1e400,NaN,0.5,3x,1;2,-0,99999999999').split(',');
const only = argValue(argv, '--commands', '');
/** Commands left out: they start processes or read stdin. */
const SKIP_COMMANDS = new Set(['serve', 'help']);
/** Options left out everywhere: they choose where output goes, or print and exit. */
const SKIP_OPTIONS = new Set(['--help', '--version', '--quiet', '--json', '--csv']);

const dir = mkdtempSync(join(tmpdir(), 'fcp-fuzz-cli-'));
// Output options given a fuzz value as their path (`--trace abc`) write relative to here.
const work = join(dir, 'cwd');
mkdirSync(work);
process.chdir(work);
const planPath = join(dir, 'p.json');
writePlan(
  planPath,
  getPlanner('fcp').plan(resolveProblem({ batch: [300, 120, 60, 32], world: 4, model: SMALL_MODEL }), {
    blockSize: 32,
  }),
);

/** Small-problem arguments every planning command accepts, so that accepted values run fast. */
function baseArgs(cmd: Command): string[] {
  const has = (flag: string): boolean => cmd.options.some((o) => o.long === flag);
  const args: string[] = [];
  if (has('--world')) args.push('--world', '4');
  if (has('--tokens-per-rank')) args.push('--tokens-per-rank', '512');
  if (has('--batches')) args.push('--batches', '1');
  if (has('--strategies')) args.push('--strategies', 'fcp,magi');
  if (has('--q-heads')) args.push('--q-heads', '4', '--kv-heads', '2', '--head-dim', '8');
  return args;
}

/** Positional arguments: a plan file for commands that read one. */
function positional(cmd: Command): string[] {
  const names = (cmd as unknown as { registeredArguments?: { name(): string }[] }).registeredArguments ?? [];
  return names.map((a) => (a.name() === 'results' ? dir : planPath));
}

/** Whether a refused call left something at `out`: a file (`plan -o`), or a folder with anything in it. */
const leftOutput = (out: string): boolean =>
  existsSync(out) && (!statSync(out).isDirectory() || readdirSync(out).length > 0);

/** Whether `err` is one coded line (the CLI's error rule). */
const codedLine = (err: string): boolean => /^fcp: error: [a-z][\w.-]*( at [^:]*)?: ./m.test(err);
const crashed = (err: string): boolean => /internal error|\n\s+at \S+ \(|TypeError|RangeError/.test(err);

let calls = 0;
let bad = 0;
const t0 = performance.now();
const program = createProgram();
for (const cmd of program.commands as Command[]) {
  if (SKIP_COMMANDS.has(cmd.name()) || (only !== '' && !only.split(',').includes(cmd.name()))) continue;
  const opts = (cmd.options as Option[]).filter((o) => o.long && !SKIP_OPTIONS.has(o.long) && !o.hidden);
  for (const opt of opts) {
    const takesValue = opt.required || opt.optional;
    for (const value of takesValue ? VALUES : ['']) {
      const out = join(dir, `out-${calls}`);
      const args = [
        cmd.name(),
        ...baseArgs(cmd).filter((_, i, a) => a[i] !== opt.long && a[i - 1] !== opt.long),
      ];
      args.push(...(takesValue ? [opt.long!, value] : [opt.long!]));
      if (cmd.options.some((o) => o.long === '--backend') && opt.long !== '--backend')
        args.push('--backend', 'sim');
      if (cmd.options.some((o) => o.long === '--out') && opt.long !== '--out' && cmd.name() !== 'run')
        args.push('--out', out);
      args.push(...positional(cmd));
      calls++;
      const before = process.exitCode;
      let code: number;
      let err: string;
      try {
        const r = await captureOutput(() => main(args));
        code = r.value;
        err = r.err;
      } catch (e) {
        code = -1;
        err = `threw: ${String((e as Error).stack ?? e)}`;
      } finally {
        process.exitCode = before;
      }
      const why =
        code === -1 || crashed(err)
          ? 'crash'
          : code === 2 && !codedLine(err)
            ? 'exit 2 without a coded line'
            : code === 2 && (leftOutput(out) || readdirSync(work).length > 0)
              ? 'refused but left output'
              : ![0, 1, 2].includes(code)
                ? `exit ${code}`
                : '';
      if (why !== '') {
        bad++;
        console.log(`BAD  fcp ${args.join(' ')}: ${why}: ${err.trim().split('\n').slice(0, 3).join(' | ')}`);
      }
      rmSync(out, { recursive: true, force: true });
      for (const f of readdirSync(work)) rmSync(join(work, f), { recursive: true, force: true });
    }
  }
  process.stderr.write(
    `fuzz-cli: ${cmd.name()} done, ${calls} calls, ${bad} bad, ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
  );
}

// `fcp serve`: every request field and planner option of every strategy, with JSON values of every
// kind; each answer must be one JSON line, ok or a coded error, never `serve.internal`.
if (only === '' || only.split(',').includes('serve')) {
  const JSON_VALUES: unknown[] = [-1, 0, 0.5, 1e300, 99999999999, -0, 'abc', '', true, null, [], {}, [1, -2]];
  const base = { batch: [300, 120, 60, 32], world: 4, model: { qHeads: 4, kvHeads: 2, headDim: 8 } };
  const fields = [
    ...Object.keys(serveRequestSchema.shape).filter((k) => k !== 'op' && k !== 'output'),
    ...Object.keys(serveRequestSchema.shape.options.unwrap().shape).map((k) => `options.${k}`),
    'model.qHeads',
    'model.kvHeads',
    'model.headDim',
    'model.bytesPerElement',
  ];
  for (const strategy of ['fcp', 'ring', 'bytescale', 'wlb', 'magi'])
    for (const field of fields)
      for (const value of JSON_VALUES) {
        const req: Record<string, unknown> = { ...base, model: { ...base.model }, strategy, id: calls };
        const [head, tail] = field.split('.') as [string, string | undefined];
        if (tail === undefined) req[head] = value;
        else req[head] = { ...((req[head] as object | undefined) ?? {}), [tail]: value };
        calls++;
        let why = '';
        let answer = '';
        try {
          answer = handleServeLine(JSON.stringify(req)) ?? '';
          const a = JSON.parse(answer) as { ok?: boolean; error?: { code?: string } };
          if (a.ok !== true && !(a.ok === false && typeof a.error?.code === 'string'))
            why = 'neither ok nor a coded error';
          else if (a.error?.code === 'serve.internal') why = 'internal error';
        } catch (e) {
          why = `threw or not JSON: ${String(e)}`;
        }
        if (why !== '') {
          bad++;
          console.log(`BAD  serve ${JSON.stringify(req)}: ${why}: ${answer.slice(0, 200)}`);
        }
      }
  process.stderr.write(
    `fuzz-cli: serve done, ${calls} calls, ${bad} bad, ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
  );
}

rmSync(dir, { recursive: true, force: true });
console.log(`fuzz-cli: ${calls} calls, ${bad} bad, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
process.exitCode = bad > 0 ? 1 : 0;

/**
 * The command line's output conventions in one place (docs/cli.md, "Conventions"):
 *
 * - results go to stdout: text by default, one JSON document with `--json`, one CSV table with
 *   `--csv` (never both);
 * - everything else goes to stderr: progress, notes and `fcp CMD: wrote PATH` lines, all silenced
 *   by `-q/--quiet` (errors never are);
 * - files and folders a command writes are named with `-o/--out`.
 *
 * Every command declares the options with {@link addOutputOptions} and prints through an
 * {@link Output}, so that the same flag means the same thing everywhere.
 */
import { type Command, Option } from 'commander';
import { assert } from '../core/assert.ts';
import { fail } from '../core/issues.ts';
import { createLiveProgress, type LiveProgress, quietProgress } from './progress.ts';

/** Which of the shared output options a command has (each doc says what it prints). */
export interface OutputOptionsSpec {
  /** `--json`: what the JSON document holds. */
  json?: string;
  /** `--csv`: what the rows are. */
  csv?: string;
}

/** Adds `--json`, `--csv` (where the command has them) and `-q, --quiet`. */
export function addOutputOptions(cmd: Command, spec: OutputOptionsSpec): Command {
  if (spec.json !== undefined)
    cmd.addOption(
      new Option('--json', `print ${spec.json} as one JSON document on stdout`).conflicts(
        spec.csv !== undefined ? ['csv'] : [],
      ),
    );
  if (spec.csv !== undefined) cmd.option('--csv', `print ${spec.csv} as CSV on stdout`);
  return cmd.option('-q, --quiet', 'no progress or "wrote" lines on stderr (errors are still printed)');
}

/**
 * Adds `-o, --out <path>` and, when the command had another spelling before (`--output`), that
 * spelling as a hidden alias: old command lines keep working. {@link outPath} reads either.
 */
export function addOutOption(cmd: Command, doc: string, def?: string, alias?: string): Command {
  const o = new Option('-o, --out <path>', doc);
  if (def !== undefined) o.default(def);
  cmd.addOption(o);
  if (alias !== undefined) cmd.addOption(new Option(`${alias} <path>`, `same as --out`).hideHelp());
  return cmd;
}

/** The `-o/--out` value (or its alias `--output`); undefined when neither is given. */
export function outPath(o: Record<string, unknown>): string | undefined {
  if (o.output !== undefined && o.out !== undefined && o.output !== o.out)
    fail('cli.conflictingOptions', '--out and --output name different paths; give one', 'out');
  const v = o.output ?? o.out;
  return v === undefined ? undefined : String(v);
}

/** What a command prints: the parsed flags and the streams (stdout, stderr) to print on. */
export interface Output {
  /** `--json` was given. */
  readonly json: boolean;
  /** `--csv` was given. */
  readonly csv: boolean;
  /** `--quiet` was given. */
  readonly quiet: boolean;
  /** The text result (a newline is added). */
  text(s: string): void;
  /** The JSON result. */
  printJson(value: unknown): void;
  /** The CSV result: a header and rows of cells. */
  printCsv(header: readonly string[], rows: readonly (readonly Cell[])[]): void;
  /** A note on stderr, `fcp CMD: message` (silenced by --quiet). */
  note(message: string): void;
  /** `fcp CMD: wrote PATH` on stderr (silenced by --quiet). */
  wrote(path: string, what?: string): void;
  /** Progress on stderr (nothing with --quiet). */
  progress(total: number, weights?: readonly number[]): LiveProgress;
}

/** One CSV cell. */
export type Cell = string | number | boolean | null | undefined;

/** The {@link Output} of command `name` for its parsed options. */
export function outputOf(name: string, o: Record<string, unknown>): Output {
  const quiet = o.quiet === true;
  const prefix = `fcp ${name}`;
  return {
    json: o.json === true,
    csv: o.csv === true,
    quiet,
    text: (s) => void process.stdout.write(s.endsWith('\n') ? s : `${s}\n`),
    printJson: (v) => void process.stdout.write(`${JSON.stringify(v, null, 1)}\n`),
    printCsv: (header, rows) => void process.stdout.write(toCsv(header, rows)),
    note: (m) => {
      if (!quiet) process.stderr.write(`${prefix}: ${m}\n`);
    },
    wrote: (path, what) => {
      if (!quiet) process.stderr.write(`${prefix}: wrote ${path}${what ? ` (${what})` : ''}\n`);
    },
    progress: (total, weights) =>
      quiet ? quietProgress : createLiveProgress({ name: prefix, total, ...(weights ? { weights } : {}) }),
  };
}

/** One CSV field (RFC 4180: quoted when it holds a comma, quote or line break). */
function csvField(c: Cell): string {
  if (c === null || c === undefined) return '';
  const s = String(c);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** A CSV table, header first, `\n` line ends, every row as wide as the header. */
export function toCsv(header: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const lines = [header.map(csvField).join(',')];
  for (const r of rows) {
    assert(r.length === header.length, `CSV row of ${r.length} cells under a header of ${header.length}`);
    lines.push(r.map(csvField).join(','));
  }
  return `${lines.join('\n')}\n`;
}

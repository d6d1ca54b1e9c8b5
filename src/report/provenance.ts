/**
 * What produced a report: the command line, fcp's version, node's version and the git commit of the
 * fcp checkout (read-only `git rev-parse`; null when fcp is not run from a git checkout).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Provenance } from './results.ts';

/** The package root: two levels above this module in both `src/report` and `dist/report`. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** fcp's version from package.json. */
export function fcpVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(`${PACKAGE_ROOT}package.json`, 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** `git rev-parse HEAD` of the fcp checkout, `+dirty` when tracked files changed; null outside git. */
export function gitCommit(): string | null {
  const git = (args: string[]): string =>
    execFileSync('git', args, {
      cwd: PACKAGE_ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
      encoding: 'utf8',
    }).trim();
  try {
    const head = git(['rev-parse', 'HEAD']);
    const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
    return dirty ? `${head}+dirty` : head;
  } catch {
    return null;
  }
}

/** Quotes one argument for a POSIX shell when it needs it. */
export function shellQuote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The command line as a user would type it again: `fcp demo --world 16`. */
export function commandLine(argv: readonly string[]): string {
  return ['fcp', ...argv].map(shellQuote).join(' ');
}

/** Provenance of a run started with `argv` (the arguments after `fcp`). */
export function provenanceOf(argv: readonly string[]): Provenance {
  return {
    command: commandLine(argv),
    fcpVersion: fcpVersion(),
    node: process.version,
    gitCommit: gitCommit(),
    platform: `${process.platform}-${process.arch}`,
  };
}

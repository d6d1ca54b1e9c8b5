/**
 * The `fcp` command line: parses argv, runs one command, and turns user errors into one line each
 * and exit code 2 (never a stack trace). Internal bugs exit 1 with a short message; set
 * FCP_DEBUG=1 for the stack.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { FcpError, formatIssue } from '../core/issues.ts';
import { COMMANDS } from './commands.ts';
import { stopAllProgress } from './progress.ts';

/** The package version (`fcp --version`), read from package.json so that it never drifts. */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** Builds the program with every command registered. */
export function createProgram(): Command {
  const program = new Command('fcp')
    .description(
      'Flexible Context Parallelism: plan, check, simulate and run attention over long-tailed batches',
    )
    .version(VERSION, '-V, --version', 'print the version and exit')
    .showHelpAfterError(false)
    // Commander's own errors (unknown command or option, missing value, extra argument) are
    // printed by reportError as one coded line like every other user error.
    .configureOutput({ outputError: () => {} })
    .exitOverride();
  for (const register of COMMANDS) register(program);
  for (const cmd of program.commands) cmd.exitOverride();
  return program;
}

/**
 * Runs the CLI; resolves to the process exit code (docs/cli.md, "Conventions": 0 success, 1 a check
 * failed, 2 a usage or input error). Bare `fcp` is a usage error: the help goes to stderr, then
 * one coded line, exit 2 (`fcp --help` prints the help on stdout and exits 0).
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = createProgram();
  // Commands set process.exitCode for "ran, but a check failed"; start from a clean slate so that
  // in-process callers (tests) never see the previous run's code.
  const before = process.exitCode;
  process.exitCode = undefined;
  try {
    if (argv.length === 0) {
      process.stderr.write(program.helpInformation());
      process.stderr.write('fcp: error: cli.missingCommand: no command given (fcp --help lists commands)\n');
      return 2;
    }
    await program.parseAsync(argv as string[], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    return reportError(e);
  } finally {
    stopAllProgress();
    process.exitCode = before;
  }
}

/** Our codes for commander's errors (tests and scripts match these, never the message). */
const COMMANDER_CODES: Record<string, string> = {
  'commander.unknownCommand': 'cli.unknownCommand',
  'commander.unknownOption': 'cli.unknownOption',
  'commander.optionMissingArgument': 'cli.missingValue',
  'commander.missingArgument': 'cli.missingArgument',
  'commander.excessArguments': 'cli.extraArgument',
  'commander.missingMandatoryOptionValue': 'cli.missingOption',
  'commander.conflictingOption': 'cli.conflictingOptions',
  'commander.invalidArgument': 'cli.invalidArgument',
};

/** Prints an error the way users should see it and returns the exit code. */
export function reportError(e: unknown): number {
  if (e instanceof FcpError) {
    for (const i of e.issues) process.stderr.write(`fcp: error: ${formatIssue(i)}\n`);
    return 2;
  }
  if (e instanceof CommanderError) {
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help')
      return 0;
    const code = COMMANDER_CODES[e.code] ?? 'cli.usage';
    const message = e.message.replace(/^error: /, '').split('\n')[0];
    process.stderr.write(`fcp: error: ${code}: ${message} (fcp --help lists commands and options)\n`);
    return 2;
  }
  const err = e as Error;
  process.stderr.write(
    `fcp: internal error: ${err?.message ?? String(e)} (please report; FCP_DEBUG=1 shows the stack)\n`,
  );
  if (process.env.FCP_DEBUG) process.stderr.write(`${err?.stack ?? ''}\n`);
  return 1;
}

/** Runs `fcp simulate` / `fcp compare` in-process through their commander registration. */
import { Command } from 'commander';
import { register as registerCompare } from '../../src/cli/compare.ts';
import { register as registerSimulate } from '../../src/cli/simulate.ts';
import { captureOutput } from './cli.ts';

/** Runs the program on `args`; returns stdout (stderr is swallowed). */
export async function simCli(...args: string[]): Promise<string> {
  const program = new Command('fcp').exitOverride();
  registerSimulate(program);
  registerCompare(program);
  return (await captureOutput(() => program.parseAsync(args, { from: 'user' }))).out;
}

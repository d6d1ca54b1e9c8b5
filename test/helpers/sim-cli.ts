/** Runs `fcp simulate` / `fcp compare` in-process through their commander registration. */
import { Command } from 'commander';
import { register as registerCompare } from '../../src/cli/compare.ts';
import { register as registerSimulate } from '../../src/cli/simulate.ts';

/** Runs the program on `args`; returns stdout (stderr is swallowed). */
export async function simCli(...args: string[]): Promise<string> {
  const program = new Command('fcp').exitOverride();
  registerSimulate(program);
  registerCompare(program);
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  const writeErr = process.stderr.write.bind(process.stderr);
  // The CLI writes strings; the test runner reports through this process's stdout in binary
  // chunks, which must pass (or the results of the tests that ran meanwhile are lost).
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    if (typeof chunk !== 'string') return write(chunk, ...rest);
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) =>
    typeof chunk === 'string' ? true : writeErr(chunk, ...rest)) as typeof process.stderr.write;
  try {
    await program.parseAsync(args, { from: 'user' });
    return out;
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
  }
}

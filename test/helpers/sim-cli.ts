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
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  try {
    await program.parseAsync(args, { from: 'user' });
    return out;
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
  }
}

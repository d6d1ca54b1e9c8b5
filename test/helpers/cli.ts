/** Runs the CLI in-process (no process start-up), capturing what it writes to stdout and stderr. */
import { main } from '../../src/cli/main.ts';

/** The exit code `main` returns and the text it wrote; process.exitCode is restored afterwards. */
export async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const ow = process.stdout.write.bind(process.stdout);
  const ew = process.stderr.write.bind(process.stderr);
  // The CLI writes strings; the test runner reports through this process's stdout in binary
  // chunks, which must pass (or the results of the tests that ran meanwhile are lost).
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    if (typeof chunk !== 'string') return ow(chunk, ...rest);
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    if (typeof chunk !== 'string') return ew(chunk, ...rest);
    err += chunk;
    return true;
  }) as typeof process.stderr.write;
  const before = process.exitCode;
  try {
    const code = await main(args);
    return { code, out, err };
  } finally {
    process.stdout.write = ow;
    process.stderr.write = ew;
    process.exitCode = before;
  }
}

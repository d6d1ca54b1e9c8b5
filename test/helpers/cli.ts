/** Runs the CLI in-process (no process start-up), capturing what it writes to stdout and stderr. */
import { main } from '../../src/cli/main.ts';

/** The exit code `main` returns and the text it wrote; process.exitCode is restored afterwards. */
export async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const ow = process.stdout.write.bind(process.stdout);
  const ew = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((s: string) => {
    out += s;
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((s: string) => {
    err += s;
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

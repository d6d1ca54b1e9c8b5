/** Runs the CLI in-process (no process start-up), capturing what it writes to stdout and stderr. */
import { main } from '../../src/cli/main.ts';

/** What a captured call wrote, with the time (ms) of each stderr write (for progress rules). */
export interface Captured<T> {
  value: T;
  out: string;
  err: string;
  errAt: { t: number; s: string }[];
}

/**
 * Runs `f` with the string writes to stdout and stderr captured. The test runner reports through
 * this process's stdout in binary chunks, which pass through (or the results of the tests that ran
 * meanwhile are lost).
 */
export async function captureOutput<T>(f: () => Promise<T>): Promise<Captured<T>> {
  let out = '';
  let err = '';
  const errAt: { t: number; s: string }[] = [];
  const ow = process.stdout.write.bind(process.stdout);
  const ew = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    if (typeof chunk !== 'string') return ow(chunk, ...rest);
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    if (typeof chunk !== 'string') return ew(chunk, ...rest);
    err += chunk;
    errAt.push({ t: performance.now(), s: chunk });
    return true;
  }) as typeof process.stderr.write;
  try {
    const value = await f();
    return { value, out, err, errAt };
  } finally {
    process.stdout.write = ow;
    process.stderr.write = ew;
  }
}

/** The exit code `main` returns and the text it wrote; process.exitCode is restored afterwards. */
export async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const before = process.exitCode;
  try {
    const r = await captureOutput(() => main(args));
    return { code: r.value, out: r.out, err: r.err };
  } finally {
    process.exitCode = before;
  }
}

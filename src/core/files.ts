/**
 * Reading user files with one error shape: a file that cannot be read is a user error
 * (`io.read`, naming the file and the system's reason), not a crash.
 */
import { readFileSync } from 'node:fs';
import { fail } from './issues.ts';

/**
 * The bytes (or, with `encoding`, the text) of `path`. Throws FcpError `io.read`
 * ("cannot read <what> file <path>: <errno code or message>", path = `path`).
 */
export function readInputFile(path: string, what: string): Buffer;
export function readInputFile(path: string, what: string, encoding: 'utf8'): string;
export function readInputFile(path: string, what: string, encoding?: 'utf8'): Buffer | string {
  try {
    return encoding === undefined ? readFileSync(path) : readFileSync(path, encoding);
  } catch (e) {
    fail(
      'io.read',
      `cannot read ${what} file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      path,
    );
  }
}

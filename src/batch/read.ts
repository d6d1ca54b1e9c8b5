/**
 * Batch files: one integer per line, a JSON array of integers, or JSON lines with a `length` field.
 * Every problem is reported with its line number.
 */
import { readInputFile } from '../core/files.ts';
import { FcpError, type FcpIssue, fail, issue } from '../core/issues.ts';

/** Reads sequence lengths from `path`. Throws FcpError (`io.read`, `batch.parse`, `batch.length`, `batch.empty`). */
export function readBatchFile(path: string): Int32Array {
  return parseBatchText(readInputFile(path, 'batch', 'utf8'), path);
}

/** Parses batch text in any of the three formats. */
export function parseBatchText(text: string, path = '<batch>'): Int32Array {
  const trimmed = text.trim();
  const values: { value: unknown; line: number }[] = [];
  if (trimmed.startsWith('[')) {
    let arr: unknown;
    try {
      arr = JSON.parse(trimmed);
    } catch (e) {
      fail(
        'batch.parse',
        `${path} looks like a JSON array but does not parse (${(e as Error).message})`,
        path,
      );
    }
    if (!Array.isArray(arr)) fail('batch.parse', `${path} must hold a JSON array of lengths`, path);
    arr.forEach((value, i) => {
      values.push({ value, line: i + 1 });
    });
  } else {
    const lines = text.split(/\r?\n/);
    lines.forEach((raw, i) => {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) return;
      if (line.startsWith('{')) {
        let obj: unknown;
        try {
          obj = JSON.parse(line);
        } catch {
          fail('batch.parse', `line ${i + 1} of ${path} is not valid JSON`, path, i + 1);
        }
        const len = (obj as Record<string, unknown> | null)?.length;
        if (len === undefined)
          fail('batch.parse', `line ${i + 1} of ${path} has no "length" field`, path, i + 1);
        values.push({ value: len, line: i + 1 });
      } else {
        values.push({
          value: /^[-+]?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(line) ? Number(line) : line,
          line: i + 1,
        });
      }
    });
  }
  return checkLengths(values, path);
}

/** Checks that lengths are positive integers; reports each bad one by line (at most 10). */
export function checkLengths(values: readonly { value: unknown; line: number }[], path: string): Int32Array {
  const issues: FcpIssue[] = [];
  const out = new Int32Array(values.length);
  values.forEach(({ value, line }, i) => {
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      issues.push(
        issue(
          'batch.length.notInteger',
          `line ${line}: ${JSON.stringify(value)} is not an integer length`,
          path,
          line,
        ),
      );
    } else if (value <= 0) {
      issues.push(
        issue('batch.length.nonPositive', `line ${line}: length ${value} must be at least 1`, path, line),
      );
    } else if (value > 2147483647) {
      issues.push(issue('batch.length.tooLarge', `line ${line}: length ${value} is too large`, path, line));
    } else out[i] = value;
  });
  if (issues.length > 0) throw new FcpError(issues.slice(0, 10));
  if (out.length === 0) fail('batch.empty', `${path} holds no sequence lengths; give at least one`, path);
  return out;
}

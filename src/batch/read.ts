/**
 * Batch files: one integer per line, a JSON array of integers, or JSON lines with a `length` field.
 * Every problem is reported with its line number.
 */
import { readInputFile } from '../core/files.ts';
import { FcpError, type FcpIssue, fail, issue } from '../core/issues.ts';
import { LIMITS } from '../core/limits.ts';

/** Reads sequence lengths from `path`. Throws FcpError (`io.read`, `batch.parse`, `batch.length`, `batch.empty`). */
export function readBatchFile(path: string): Int32Array {
  const bytes = readInputFile(path, 'batch');
  if (looksBinary(bytes))
    fail(
      'batch.binary',
      `${path} is not a text file (it holds binary bytes); a batch file holds one length per line, a JSON array, or JSON lines`,
      path,
    );
  return parseBatchText(bytes.toString('utf8'), path);
}

/**
 * True when the first 4 KiB hold a NUL byte, bytes that are not UTF-8, or mostly control bytes:
 * such a file is not a batch, and echoing its lines back would only print garbage.
 */
export function looksBinary(bytes: Uint8Array): boolean {
  const head = bytes.subarray(0, 4096);
  if (head.includes(0)) return true;
  const text = Buffer.from(head).toString('utf8');
  // A cut multi-byte character at the 4 KiB boundary is not a sign of binary: allow one at the end.
  const bad = (text.match(/\uFFFD/g) ?? []).length;
  if (bad > 1 || (bad === 1 && !text.endsWith('\uFFFD'))) return true;
  let control = 0;
  for (const b of head) if (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d) control++;
  return control > head.length / 10;
}

/** A value as the message shows it: at most 40 characters of it. */
function shown(value: unknown, raw: string | undefined): string {
  // JSON.stringify writes a number too large for a double (`1e400` parses to Infinity) as null.
  const s = raw ?? (typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? String(value)));
  return s.length > 40 ? `${s.slice(0, 24)}... (${s.length} characters)` : s;
}

/**
 * One length as read: its value, its 1-based line of the file or (`element`) position in a JSON
 * array, and its text where the format keeps it.
 */
export interface BatchValue {
  value: unknown;
  line: number;
  raw?: string;
  element?: boolean;
}

/** Parses batch text in any of the three formats. */
export function parseBatchText(text: string, path = '<batch>'): Int32Array {
  const trimmed = text.trim();
  const values: BatchValue[] = [];
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
      values.push({ value, line: i + 1, element: true });
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
          raw: line,
        });
      }
    });
  }
  return checkLengths(values, path);
}

/** Checks that lengths are positive integers; reports each bad one by line (at most 10). */
export function checkLengths(values: readonly BatchValue[], path: string): Int32Array {
  const issues: FcpIssue[] = [];
  const out = new Int32Array(values.length);
  values.forEach(({ value, line, raw, element }, i) => {
    // `line` is a line of the file, or (`element`) a 1-based position in a JSON array.
    const where = element ? `element ${line}` : `line ${line}`;
    if (typeof value === 'number' && value > LIMITS.sequenceLength.max) {
      // Infinity included (a line of 1e7 digits): a number, just far too large.
      issues.push(
        issue(
          'batch.length.tooLarge',
          `${where}: length ${shown(value, raw)} is above the limit of ${LIMITS.sequenceLength.max} tokens (${LIMITS.sequenceLength.why})`,
          path,
          line,
        ),
      );
    } else if (typeof value !== 'number' || !Number.isInteger(value)) {
      issues.push(
        issue(
          'batch.length.notInteger',
          `${where}: ${shown(value, raw)} is not an integer length`,
          path,
          line,
        ),
      );
    } else if (value <= 0) {
      issues.push(
        issue('batch.length.nonPositive', `${where}: length ${value} must be at least 1`, path, line),
      );
    } else out[i] = value;
  });
  if (issues.length > 0) throw new FcpError(issues.slice(0, 10));
  if (out.length === 0) fail('batch.empty', `${path} holds no sequence lengths; give at least one`, path);
  return out;
}

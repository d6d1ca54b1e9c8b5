/**
 * Errors a user can act on are data: a stable code, where it happened, and a message.
 * Tests match `code`, never `message`.
 */
import type { ErrorCode } from './codes.ts';

export type { ErrorCode } from './codes.ts';

/** One problem found in user input or in a plan. */
export interface FcpIssue {
  /** Stable machine-readable code, e.g. `batch.length.nonPositive` or `plan.rule3.kvMissing`. */
  readonly code: ErrorCode;
  /** Human-readable explanation that says what to do. */
  readonly message: string;
  /** Where: an option name, a file path, or a table path such as `forward.transfers`. */
  readonly path?: string;
  /** Row index inside the table or line number inside the file, when there is one. */
  readonly row?: number;
  /** Executor errors: the rank that failed. */
  readonly rank?: number;
  /** Executor errors: the phase and the compute op (row of `phase.compute`) it was running. */
  readonly phase?: 'forward' | 'backward';
  readonly op?: number;
}

/** An error carrying one or more user-actionable issues; the CLI prints them and exits 2. */
export class FcpError extends Error {
  override name = 'FcpError';
  readonly issues: readonly FcpIssue[];
  constructor(issues: FcpIssue | readonly FcpIssue[]) {
    const list = Array.isArray(issues) ? (issues as readonly FcpIssue[]) : [issues as FcpIssue];
    super(list.map(formatIssue).join('\n'));
    this.issues = list;
  }
  /** The first issue's code (convenient in tests). */
  get code(): string {
    return this.issues[0]?.code ?? 'unknown';
  }
}

/** Builds an issue; `path` and `row` are omitted when undefined (exactOptionalPropertyTypes). */
export function issue(code: ErrorCode, message: string, path?: string, row?: number): FcpIssue {
  const out: { code: ErrorCode; message: string; path?: string; row?: number } = { code, message };
  if (path !== undefined) out.path = path;
  if (row !== undefined) out.row = row;
  return out;
}

/** Throws an {@link FcpError} with a single issue. */
export function fail(code: ErrorCode, message: string, path?: string, row?: number): never {
  throw new FcpError(issue(code, message, path, row));
}

/** One line: `code at path[row]: message`. */
export function formatIssue(i: FcpIssue): string {
  const where = i.path === undefined ? '' : i.row === undefined ? ` at ${i.path}` : ` at ${i.path}[${i.row}]`;
  return `${i.code}${where}: ${i.message}`;
}

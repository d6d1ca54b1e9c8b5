/**
 * Internal invariant checks. A failed assertion is a bug in FCP, never a user error:
 * user errors are {@link FcpIssue} data (see `issues.ts`).
 */

/** Thrown when an internal invariant is broken. */
export class AssertionError extends Error {
  override name = 'AssertionError';
}

/** Throws an {@link AssertionError} when `condition` is false. */
export function assert(condition: unknown, message = 'assertion failed'): asserts condition {
  if (!condition) throw new AssertionError(message);
}

/** Marks a branch that the type system proves unreachable (exhaustive switches). */
export function assertNever(value: never, what = 'value'): never {
  throw new AssertionError(`unexpected ${what}: ${JSON.stringify(value)}`);
}

/**
 * Issue collection for the plan validator: a cap on the number of issues kept, yet at least one
 * issue per broken rule (so a flood of one kind never hides another kind).
 */
import { type ErrorCode, type FcpIssue, issue } from '../core/issues.ts';

/** Collects validator issues up to a cap; counts the ones it drops. */
export class IssueSink {
  readonly issues: FcpIssue[] = [];
  /** Issues found but not kept because of the cap. */
  omitted = 0;
  private readonly rules = new Set<string>();
  private readonly codes = new Set<string>();
  private readonly seen = new Set<string>();

  constructor(private readonly max: number) {}

  /** Adds an issue; past the cap it is kept only when its rule has no issue yet. */
  add(code: ErrorCode, message: string, path?: string, row?: number): void {
    const rule = ruleOf(code);
    this.codes.add(code);
    if (this.issues.length < this.max || !this.rules.has(rule)) {
      this.issues.push(issue(code, message, path, row));
      this.rules.add(rule);
    } else this.omitted++;
  }

  /** Whether any issue with this code prefix (e.g. `plan.structure`) was found. */
  has(prefix: string): boolean {
    for (const c of this.codes) if (c.startsWith(prefix)) return true;
    return false;
  }

  /** Like {@link add}, but at most once per (code, path, row): a chunk row expands to many rows. */
  addOnce(code: ErrorCode, message: string, path: string, row: number): void {
    const key = `${code}|${path}|${row}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.add(code, message, path, row);
  }

  get count(): number {
    return this.issues.length + this.omitted;
  }
}

/** `plan.rule3.kvMissing` -> `plan.rule3`. */
function ruleOf(code: string): string {
  const parts = code.split('.');
  return parts.length >= 2 ? `${parts[0]}.${parts[1]}` : code;
}

/**
 * Where a row of the flattened plan came from: `origin >= 0` is a row of the explicit table,
 * `origin < 0` is row `-origin - 1` of the matching chunk table.
 */
export function whereOf(
  origin: number,
  explicitPath: string,
  chunkPath: string,
): { path: string; row: number } {
  return origin >= 0 ? { path: explicitPath, row: origin } : { path: chunkPath, row: -origin - 1 };
}

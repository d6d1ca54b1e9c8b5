/**
 * The declaration of one option of a planner or an executor: its key in the options bag, its type,
 * its default and its documentation, written once next to the code that reads it. The command line
 * (src/cli/common.ts) builds its flags and parsers from these declarations, and the option tables
 * of README.md and docs/cli.md are generated from them (`npm run docs:options`), so flags, defaults
 * and docs cannot drift apart.
 */

/** The value types an option can have. */
export type OptionType = 'int' | 'number' | 'boolean' | 'enum' | 'string';

/** One declared option. */
export interface OptionSpec {
  /** Field of the options bag, e.g. `blockSize`; the flag is its kebab case (`--block-size`). */
  readonly key: string;
  /** Who reads it, e.g. `fcp`, `magi`, `sim` (the prefix of its help line). */
  readonly owner: string;
  /** The field it sets where that differs from `key` (e.g. the cluster's `nvlinkGBps`). */
  readonly target?: string;
  readonly type: OptionType;
  /** Allowed values of an `enum`. */
  readonly values?: readonly string[];
  /**
   * The default the reader fills in when the option is absent; a test checks it against the
   * reader's own resolution. Booleans default to false.
   */
  readonly default?: number | string;
  /** The default in words where it is computed (e.g. `total / (8 x ranks)`). */
  readonly defaultDoc?: string;
  /**
   * False: the command line leaves the option unset when it is not given, and the reader fills the
   * default (for options whose mere presence changes checks, e.g. tile sizes and the granularity
   * limits). Default true: the command line passes the default, as `--help` shows it.
   */
  readonly passDefault?: boolean;
  /** Placeholder of the value in `--help`, e.g. `n`, `x`, `mode` (default by type). */
  readonly placeholder?: string;
  /** One line: what it does (no default: that is generated). */
  readonly doc: string;
}

/** `blockSize` -> `block-size`. */
export const kebabCase = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** The flag of a declared option, e.g. `--block-size <n>`, `--no-pipeline`, `--fixed-blocks`. */
export function flagOf(spec: OptionSpec): string {
  const name = `--${kebabCase(spec.key)}`;
  if (spec.type === 'boolean') return name;
  const ph =
    spec.placeholder ??
    (spec.type === 'int' ? 'n' : spec.type === 'number' ? 'x' : spec.type === 'string' ? 'value' : 'mode');
  return `${name} <${ph}>`;
}

/** The default as users read it: the value, the computed rule, or `off` for a boolean. */
export function defaultText(spec: OptionSpec): string {
  if (spec.defaultDoc !== undefined) return spec.defaultDoc;
  if (spec.type === 'boolean') return 'off';
  return spec.default === undefined ? '-' : String(spec.default);
}

/**
 * The magi planner's command-line options, declared once (src/core/option-spec.ts); the flags and
 * the docs' option tables are generated from this list, and resolveMagiOptions reads its defaults
 * from {@link MAGI_DEFAULTS}.
 */
import type { OptionSpec } from '../../core/option-spec.ts';

/** Defaults of the magi options that have a fixed value (the chunk size is computed). */
export const MAGI_DEFAULTS = { overlapDegree: 2 } as const;

/** magi's options in the order `--help` lists them. */
export const MAGI_OPTION_SPECS: readonly OptionSpec[] = [
  {
    key: 'chunkSize',
    owner: 'magi',
    type: 'int',
    defaultDoc: 'total/(8N)',
    doc: 'chunk size in tokens',
  },
  {
    key: 'overlapDegree',
    owner: 'magi',
    type: 'int',
    default: MAGI_DEFAULTS.overlapDegree,
    doc: 'overlap stages',
  },
];

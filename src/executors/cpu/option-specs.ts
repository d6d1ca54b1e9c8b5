/**
 * The CPU runtime's command-line options (`fcp verify`), declared once (src/core/option-spec.ts);
 * the flag and the docs' table are generated from this list, the default is {@link CPU_DEFAULTS}'s.
 */
import type { OptionSpec } from '../../core/option-spec.ts';
import { CPU_DEFAULTS } from './executor.ts';

/** The cpu executor's options. */
export const CPU_OPTION_SPECS: readonly OptionSpec[] = [
  {
    key: 'stallTimeout',
    target: 'stallTimeoutMs',
    owner: 'cpu',
    type: 'int',
    placeholder: 'ms',
    default: CPU_DEFAULTS.stallTimeoutMs,
    doc: 'fail when the run makes no progress for this long (ms)',
  },
];

/**
 * Every planner's declared command-line options, in the order `--help` lists them. A planner that
 * adds a flag declares it in its own option-specs.ts and lists it here; the CLI and the docs
 * follow (src/cli/common.ts, src/cli/options-doc.ts).
 */
import type { OptionSpec } from '../core/option-spec.ts';
import { FCP_OPTION_SPECS } from './fcp/option-specs.ts';
import { MAGI_OPTION_SPECS } from './magi/option-specs.ts';

/** All planner options (keys are fields of PlannerOptions). */
export const PLANNER_OPTION_SPECS: readonly OptionSpec[] = [...FCP_OPTION_SPECS, ...MAGI_OPTION_SPECS];

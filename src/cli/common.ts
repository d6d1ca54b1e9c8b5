/**
 * Options shared by commands that plan a batch (`plan`, `verify`, `compare-plans`, `compare`,
 * `demo`): one declaration, one parser, so every command spells them the same way.
 */
import { type Command, Option } from 'commander';
import { fail } from '../core/issues.ts';
import { defaultText, flagOf, type OptionSpec } from '../core/option-spec.ts';
import { PLANNER_OPTION_SPECS } from '../planners/option-specs.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { PROBLEM_OPTION_SPECS } from '../problem/option-specs.ts';
import { type Problem, type ProblemOptions, resolveProblem } from '../problem/problem.ts';

/**
 * Adds the batch, cluster and model options, generated from their declarations
 * (src/problem/option-specs.ts); `defaults` replaces a declared default for one command.
 */
export function addProblemOptions(
  cmd: Command,
  defaults: { world?: string; tokensPerRank?: string } = {},
): Command {
  for (const spec of PROBLEM_OPTION_SPECS) {
    const d = (defaults as Record<string, string | undefined>)[spec.key];
    addSpecOption(cmd, d === undefined ? spec : { ...spec, default: d });
  }
  return cmd;
}

/** Adds the planner options (FCP's and the baselines'), generated from their declarations. */
export function addPlannerOptions(cmd: Command): Command {
  for (const spec of PLANNER_OPTION_SPECS) addSpecOption(cmd, spec);
  return cmd;
}

/**
 * Adds one declared option (src/core/option-spec.ts): its flag, `owner: doc` as help, and the
 * default as commander's (shown by `--help`) or, where the reader fills it, in the help text.
 */
export function addSpecOption(cmd: Command, spec: OptionSpec): Command {
  const shown = spec.type !== 'boolean' && spec.default !== undefined && spec.passDefault !== false;
  const note = shown || spec.type === 'boolean' ? '' : ` (default ${defaultText(spec)})`;
  // The problem's options are everyone's: no owner prefix.
  const prefix = spec.owner === 'problem' ? '' : `${spec.owner}: `;
  const o = new Option(flagOf(spec), `${prefix}${spec.doc}${note}`);
  if (shown) o.default(String(spec.default));
  return cmd.addOption(o);
}

/** The value of one declared option from commander's parsed values; undefined when absent. */
export function specValue(
  o: Record<string, unknown>,
  spec: OptionSpec,
): number | string | boolean | undefined {
  const attr = new Option(flagOf(spec)).attributeName();
  const raw = o[attr];
  if (spec.type === 'boolean') {
    // `--no-pipeline` is commander's negation: attribute `pipeline`, false when given.
    const given = flagOf(spec).startsWith('--no-') ? raw === false : raw === true;
    return given ? true : undefined;
  }
  if (raw === undefined) return undefined;
  if (spec.type === 'int') return intOption(raw, spec.key);
  if (spec.type === 'number') return numberOption(raw, spec.key);
  const v = String(raw);
  if (spec.type === 'string') return v;
  if (!(spec.values ?? []).includes(v))
    fail(
      `option.${spec.key}`,
      `--${kebab(spec.key)} must be ${(spec.values ?? []).join(' or ')} (got ${v})`,
      spec.key,
    );
  return v;
}

/** Parses an integer option; FcpError `option.<name>` when it is not one. */
export function intOption(value: unknown, name: string): number {
  const s = String(value).trim();
  const n = /^[-+]?\d+$/.test(s) ? Number(s) : Number.NaN;
  if (!Number.isSafeInteger(n))
    fail(`option.${name}`, `--${kebab(name)} must be an integer (got ${JSON.stringify(value)})`, name);
  return n;
}

/** Parses an integer option that must lie in [lo, hi]; FcpError `option.<name>` otherwise. */
export function boundedInt(value: unknown, name: string, lo: number, hi: number): number {
  const n = intOption(value, name);
  if (n < lo || n > hi)
    fail(`option.${name}`, `--${kebab(name)} must be between ${lo} and ${hi} (got ${n})`, name);
  return n;
}

/** Parses a number option. */
export function numberOption(value: unknown, name: string): number {
  const n = Number(value);
  if (!Number.isFinite(n))
    fail(`option.${name}`, `--${kebab(name)} must be a number (got ${JSON.stringify(value)})`, name);
  return n;
}

/** Parses a comma-separated list of integers (e.g. `--world 16,64,256`). */
export function intListOption(value: unknown, name: string): number[] {
  return String(value)
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((s) => intOption(s, name));
}

const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Commander's parsed values of {@link addProblemOptions} -> {@link ProblemOptions}. */
export function problemOptionsFrom(
  o: Record<string, unknown>,
  overrides: Partial<ProblemOptions> = {},
): ProblemOptions {
  const out: ProblemOptions = {
    batch: String(o.batch ?? 'longtail'),
    world: intOption(o.world ?? 8, 'world'),
    tokensPerRank: intOption(o.tokensPerRank ?? 32768, 'tokensPerRank'),
    seed: intOption(o.seed ?? 1, 'seed'),
    mask: String(o.mask ?? 'causal'),
    gpusPerNode: intOption(o.gpusPerNode ?? 8, 'gpusPerNode'),
    cluster: String(o.cluster ?? 'hopper-ib'),
  };
  if (o.qHeads !== undefined) out.qHeads = intOption(o.qHeads, 'qHeads');
  if (o.kvHeads !== undefined) out.kvHeads = intOption(o.kvHeads, 'kvHeads');
  if (o.headDim !== undefined) out.headDim = intOption(o.headDim, 'headDim');
  if (o.memoryTokens !== undefined) out.memoryTokens = intOption(o.memoryTokens, 'memoryTokens');
  return { ...out, ...overrides };
}

/** Parses and resolves the problem options in one step. */
export function problemFrom(o: Record<string, unknown>, overrides: Partial<ProblemOptions> = {}): Problem {
  return resolveProblem(problemOptionsFrom(o, overrides));
}

/** Commander's parsed values of {@link addPlannerOptions} -> {@link PlannerOptions}. */
export function plannerOptionsFrom(o: Record<string, unknown>): PlannerOptions {
  const out: Record<string, unknown> = {};
  for (const spec of PLANNER_OPTION_SPECS) {
    const v = specValue(o, spec);
    if (v !== undefined) out[spec.key] = v;
  }
  return out as PlannerOptions;
}

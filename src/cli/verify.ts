/**
 * `fcp verify`: plan a batch (any strategy, the options of `fcp plan`) or read a plan file, draw
 * seeded random inputs (or read them from a dump), run a numeric executor (default `cpu`), compare
 * O, dQ, dK, dV with the independent float64 reference (relative error ||a-b|| / ||b|| over all
 * sequences) and print errors and timings. Exit 1 when any error exceeds `--max-error`.
 *
 * `--dump DIR` writes DIR/plan.json, DIR/index.json and per sequence q, k, v, do, o, dq, dk, dv as
 * NumPy `.npy` float32 arrays of shape [tokens, heads, headDim] in sequence token order (`numpy.load`
 * reads them; index.json keeps every array's name, sequence, file and shape); the
 * directory is assembled under a temporary name and renamed into place, so a failure never leaves
 * a half-written dump. `--inputs DIR` reads q, k, v, do back from such a dump.
 */
import type { Command } from 'commander';
import { FcpError, fail, issue } from '../core/issues.ts';
import { checkOutputFolder } from '../core/outputs.ts';
import { CPU_OPTION_SPECS } from '../executors/cpu/option-specs.ts';
import { randomInputs } from '../executors/inputs.ts';
import { compareOutputs, type OutputErrors, referenceAttention } from '../executors/reference.ts';
import { getExecutor } from '../executors/registry.ts';
import type { ExecutionResult, SequenceInputs, SequenceOutputs } from '../executors/types.ts';
import { getPlanner } from '../experiments/strategies.ts';
import { SMALL_MODEL } from '../model/attention.ts';
import { readPlan } from '../plan/io.ts';
import type { Plan } from '../plan/types.ts';
import { requireValidPlan } from '../plan/validate.ts';
import { type Progress, silentProgress } from '../report/progress.ts';
import {
  addPlannerOptions,
  addProblemOptions,
  addSpecOption,
  intOption,
  numberOption,
  plannerOptionsFrom,
  problemFrom,
  specValue,
} from './common.ts';
import { addOutputOptions, outputOf } from './output.ts';
import type { LiveProgress } from './progress.ts';
import type { CsvTable } from './tables.ts';
import { DUMP_FOLDER, readDumpInputs, writeDump } from './verify-dump.ts';

/** Default largest accepted relative error of every output. */
export const DEFAULT_MAX_ERROR = 1e-5;

/** Options of {@link verifyPlan}. */
export interface VerifyOptions {
  /** Executor name (must be numeric). Default `cpu`. */
  executor?: string;
  /** Largest accepted relative error of each output. Default {@link DEFAULT_MAX_ERROR}. */
  maxError?: number;
  /** Inputs; default seeded random inputs from `seed`. */
  inputs?: SequenceInputs;
  /** Seed of the random inputs. Default 1. */
  seed?: number;
  /** Options passed to the executor (e.g. the cpu executor's stallTimeoutMs or pool). */
  executorOptions?: Record<string, unknown>;
  /** Steps and fractions of the run and the reference (default silent). */
  progress?: Progress | LiveProgress;
}

/** What {@link verifyPlan} measured. */
export interface VerifyResult {
  errors: OutputErrors;
  maxError: number;
  ok: boolean;
  inputs: SequenceInputs;
  outputs: SequenceOutputs;
  execution: ExecutionResult;
  /** Wall-clock milliseconds: the executor run (workers, forward, backward) and the reference. */
  runMs: number;
  referenceMs: number;
}

/** Runs `plan` on a numeric executor and compares every output with the float64 reference. */
export async function verifyPlan(plan: Plan, o: VerifyOptions = {}): Promise<VerifyResult> {
  const maxError = o.maxError ?? DEFAULT_MAX_ERROR;
  if (!(maxError >= 0))
    fail('option.maxError', `--max-error must be a non-negative number (got ${maxError})`, 'maxError');
  const executor = getExecutor(o.executor ?? 'cpu');
  if (!executor.numeric)
    fail(
      'option.executor',
      `executor ${executor.name} does not compute outputs; verify needs a numeric executor`,
      'executor',
    );
  // Before the inputs: their size comes from the plan, which may be absurd.
  requireValidPlan(plan);
  const progress = o.progress ?? silentProgress;
  const inputs = o.inputs ?? randomInputs(plan.sequences, plan.model, o.seed ?? 1);
  const live = 'fraction' in progress ? (progress as LiveProgress) : undefined;
  const fraction = live ? (f: number) => live.fraction(f) : undefined;
  progress.step(`${executor.name} runtime, forward and backward on ${plan.world} ranks`);
  const r0 = performance.now();
  const execution = await executor.run(plan, inputs, {
    ...(o.executorOptions ?? {}),
    ...(fraction ? { onProgress: fraction } : {}),
  });
  const runMs = performance.now() - r0;
  if (!execution.outputs) throw new Error(`executor ${executor.name} returned no outputs`);
  progress.step('float64 reference');
  const f0 = performance.now();
  const ref = referenceAttention(plan.model, plan.mask, inputs, fraction);
  const referenceMs = performance.now() - f0;
  const errors = compareOutputs(execution.outputs, ref);
  const ok = errors.o <= maxError && errors.dq <= maxError && errors.dk <= maxError && errors.dv <= maxError;
  return { errors, maxError, ok, inputs, outputs: execution.outputs, execution, runMs, referenceMs };
}

// ---- command --------------------------------------------------------------------------------

const fmtErr = (x: number): string => (Number.isFinite(x) ? x.toExponential(2) : 'inf');
const ms = (x: number): string => x.toFixed(1);

/** The text report of a verification. */
export function formatVerify(plan: Plan, r: VerifyResult, planMs: number | undefined): string {
  const tokens = plan.sequences.reduce((a, b) => a + b, 0);
  const m = plan.model;
  const lines: string[] = [];
  lines.push(
    `fcp verify: strategy ${plan.strategy}, ${plan.world} ranks, ${plan.sequences.length} sequences, ${tokens} tokens, ${plan.mask} mask, ` +
      `${m.qHeads} query heads / ${m.kvHeads} KV heads x ${m.headDim}, executor ${r.execution.executor}`,
  );
  lines.push('output  rel. error  limit     ok');
  for (const k of ['o', 'dq', 'dk', 'dv'] as const) {
    const e = r.errors[k];
    lines.push(
      `${k.padEnd(6)}  ${fmtErr(e).padStart(10)}  ${fmtErr(r.maxError).padEnd(8)}  ${e <= r.maxError ? 'yes' : 'NO'}`,
    );
  }
  const x = r.execution;
  const d = (x.details ?? {}) as { bootMs?: number; validateMs?: number };
  const parts = [
    planMs === undefined ? undefined : `plan ${ms(planMs)}`,
    d.validateMs === undefined ? undefined : `validate ${ms(d.validateMs)}`,
    d.bootMs === undefined ? undefined : `workers ${ms(d.bootMs)}`,
    `forward ${ms(x.forwardMs)}`,
    `backward ${ms(x.backwardMs)}`,
    `executor total ${ms(r.runMs)}`,
    `reference ${ms(r.referenceMs)}`,
  ].filter((s) => s !== undefined);
  lines.push(`timings (ms): ${parts.join(', ')}`);
  lines.push('rank  fwd compute  fwd comm  fwd idle  bwd compute  bwd comm  bwd idle   (ms)');
  for (let i = 0; i < x.perRank.forward.length; i++) {
    const f = x.perRank.forward[i];
    const b = x.perRank.backward[i];
    if (!f || !b) continue;
    lines.push(
      `${String(f.rank).padStart(4)}  ${ms(f.computeMs).padStart(11)}  ${ms(f.commMs).padStart(8)}  ${ms(f.idleMs).padStart(8)}  ` +
        `${ms(b.computeMs).padStart(11)}  ${ms(b.commMs).padStart(8)}  ${ms(b.idleMs).padStart(8)}`,
    );
  }
  const worst = Math.max(r.errors.o, r.errors.dq, r.errors.dk, r.errors.dv);
  lines.push(
    r.ok
      ? `verify: OK (max relative error ${fmtErr(worst)} <= ${fmtErr(r.maxError)})`
      : `verify: MISMATCH (max relative error ${fmtErr(worst)} > ${fmtErr(r.maxError)})`,
  );
  return lines.join('\n');
}

/** The JSON of `fcp verify --json`: everything {@link formatVerify} prints, as data. */
export function verifyJson(plan: Plan, r: VerifyResult, planMs: number | undefined): Record<string, unknown> {
  const x = r.execution;
  return {
    strategy: plan.strategy,
    world: plan.world,
    sequences: plan.sequences.length,
    tokens: plan.sequences.reduce((a, b) => a + b, 0),
    mask: plan.mask,
    model: plan.model,
    executor: x.executor,
    ok: r.ok,
    maxError: r.maxError,
    errors: r.errors,
    timingsMs: {
      plan: planMs ?? null,
      forward: x.forwardMs,
      backward: x.backwardMs,
      executor: r.runMs,
      reference: r.referenceMs,
      ...(x.details ?? {}),
    },
    perRank: x.perRank,
  };
}

/** One CSV row per output: its relative error against the float64 reference, the limit, ok. */
export function verifyCsv(r: VerifyResult): CsvTable {
  return [
    ['output', 'relative_error', 'max_error', 'ok'],
    (['o', 'dq', 'dk', 'dv'] as const).map((k) => [k, r.errors[k], r.maxError, r.errors[k] <= r.maxError]),
  ];
}

/** Registers `fcp verify`. */
export function register(program: Command): void {
  const cmd = program
    .command('verify')
    .description(
      'run a plan with real attention on the CPU runtime and compare O, dQ, dK, dV with a float64 reference ' +
        '(default model: 4 query heads, 2 KV heads, head dim 32)',
    );
  addProblemOptions(cmd, { tokensPerRank: '1024' });
  // verify's model defaults to the small CPU shape, not Llama-3-70B's: say so in --help.
  const small: Record<string, number> = {
    '--q-heads': SMALL_MODEL.qHeads,
    '--kv-heads': SMALL_MODEL.kvHeads,
    '--head-dim': SMALL_MODEL.headDim,
  };
  for (const o of cmd.options)
    if (o.long && small[o.long] !== undefined)
      o.description = o.description.replace(/\(default \d+\)/, `(default ${small[o.long]})`);
  addPlannerOptions(cmd)
    .option('--strategy <name>', 'planner to verify', 'fcp')
    .option('--plan <file>', 'verify this plan file instead of planning (its model shape is used)')
    .option('--inputs <dir>', 'read q, k, v, do from a dump directory instead of drawing them')
    .option('--executor <name>', 'numeric executor to run', 'cpu')
    .option('--max-error <x>', 'largest accepted relative error of each output', String(DEFAULT_MAX_ERROR))
    .option(
      '--dump <dir>',
      'write the plan, inputs and outputs (.npy float32) and index.json to this folder',
    );
  for (const spec of CPU_OPTION_SPECS) addSpecOption(cmd, spec);
  addOutputOptions(cmd, {
    json: 'the errors, the verdict and the timings (per rank too)',
    csv: 'one row per output (o, dq, dk, dv): relative error, limit, ok',
  });
  cmd.action(async (opts: Record<string, unknown>) => {
    const out = outputOf('verify', opts);
    const maxError = numberOption(opts.maxError, 'maxError');
    // The cpu runtime's declared options, by their target field (stallTimeoutMs).
    const cpuOptions: Record<string, unknown> = {};
    for (const spec of CPU_OPTION_SPECS) {
      const v = specValue(opts, spec);
      if (v !== undefined) cpuOptions[spec.target ?? spec.key] = v;
    }
    const seed = intOption(opts.seed ?? 1, 'seed');
    // The dump target is checked before the run, not after minutes of it.
    if (opts.dump !== undefined) checkOutputFolder(String(opts.dump), DUMP_FOLDER);
    const progress = out.progress(opts.plan === undefined ? 3 : 2);
    let plan: Plan;
    let planMs: number | undefined;
    if (opts.plan !== undefined) {
      plan = readPlan(String(opts.plan));
      requireValidPlan(plan, String(opts.plan));
      checkPlanAgainstOptions(cmd, opts, plan);
    } else {
      const problem = problemFrom(opts, { model: SMALL_MODEL });
      const planner = getPlanner(String(opts.strategy));
      progress.step(`plan with ${planner.name}`);
      const t0 = performance.now();
      plan = planner.plan(problem, plannerOptionsFrom(opts));
      planMs = performance.now() - t0;
    }
    const inputs = opts.inputs === undefined ? undefined : readDumpInputs(String(opts.inputs), plan);
    const executor = String(opts.executor);
    const vo: VerifyOptions = {
      executor,
      maxError,
      seed,
      progress,
      // The cpu runtime's options are its own; other runtimes run with their defaults.
      ...(executor === 'cpu' ? { executorOptions: cpuOptions } : {}),
    };
    if (inputs) vo.inputs = inputs;
    const r = await verifyPlan(plan, vo);
    progress.done();
    if (opts.dump !== undefined) {
      writeDump(String(opts.dump), plan, r.inputs, r.outputs, {
        seed: inputs ? null : seed,
        errors: r.errors,
      });
      out.wrote(String(opts.dump), 'plan, inputs and outputs as .npy, index.json');
    }
    if (out.json) out.printJson(verifyJson(plan, r, planMs));
    else if (out.csv) out.printCsv(...verifyCsv(r));
    else out.text(formatVerify(plan, r, planMs));
    if (!r.ok) process.exitCode = 1;
  });
}

/** With `--plan`, explicitly given world or model options must agree with the plan. */
function checkPlanAgainstOptions(cmd: Command, opts: Record<string, unknown>, plan: Plan): void {
  const given = (name: string): boolean => cmd.getOptionValueSource(name) === 'cli';
  const issues = [];
  if (given('world') && intOption(opts.world, 'world') !== plan.world)
    issues.push(
      issue('input.world', `--world ${opts.world} differs from the plan's world size ${plan.world}`, 'world'),
    );
  for (const k of ['qHeads', 'kvHeads', 'headDim'] as const)
    if (given(k) && intOption(opts[k], k) !== plan.model[k])
      issues.push(
        issue(
          'input.shape',
          `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} ${opts[k]} differs from the plan's ${k} ${plan.model[k]}`,
          k,
        ),
      );
  if (issues.length > 0) throw new FcpError(issues);
}

/**
 * Error codes, declared once. Every code a user can meet is `family.detail` (e.g. `option.world`,
 * `plan.rule3.kvMissing`); the families and what they mean are listed here, the type system refuses
 * a code of any other family, and `data/error-codes.json` (written from this table by
 * `npm run codes`, checked by a test) gives the same list to the Python package.
 */

/** Code families and what each one is about. */
export const CODE_FAMILIES = {
  option: 'an option of a command or of the library API has a bad value',
  limit: 'an input exceeds a documented limit (docs/cli.md, src/core/limits.ts)',
  batch: 'the batch (generator, file or explicit lengths) is malformed',
  capacity: 'the batch does not fit the ranks memory',
  cluster: 'unknown or malformed cluster preset',
  strategy: 'unknown strategy (planner)',
  executor: 'unknown executor',
  io: 'a file or folder cannot be read or written',
  cli: 'usage error of the command line (unknown command or option, missing value)',
  plan: 'a plan file breaks the format or a rule of the validator (docs/plan-format.md)',
  sim: 'the simulator cannot replay a plan',
  network: 'malformed network-model parameters',
  simgrid: 'the SimGrid engine is missing or failed',
  calibration: 'malformed kernel calibration file',
  results: 'malformed results file given to fcp report',
  serve: 'a bad request to fcp serve',
  run: 'the torch runtime cannot run (options, Python, torch, processes, memory)',
  exec: 'an executor failed while running a plan (a worker, a stall, bad inputs)',
  input: 'malformed input tensors (verify --inputs, dumps)',
  model: 'the model shape is invalid',
  hf: 'the Hugging Face integration cannot run',
  tasks: 'the task table of a plan is inconsistent (Python runtime)',
  torch: 'torch is missing or too old (Python runtime)',
  queue: 'the planner client queue failed (Python runtime)',
} as const;

/** A code family. */
export type CodeFamily = keyof typeof CODE_FAMILIES;

/** A user-facing error code: `family.detail`. */
export type ErrorCode = `${CodeFamily}.${string}`;

/** True when `code` belongs to a declared family (for codes read from outside, e.g. Python output). */
export function isErrorCode(code: string): code is ErrorCode {
  const dot = code.indexOf('.');
  return dot > 0 && dot < code.length - 1 && Object.hasOwn(CODE_FAMILIES, code.slice(0, dot));
}

/** The JSON the Python package reads (python/fcp_torch/error_codes.json), byte for byte. */
export function errorCodesJson(): string {
  return `${JSON.stringify({ format: 'fcp-error-codes/1', source: 'src/core/codes.ts', families: CODE_FAMILIES }, null, 2)}\n`;
}

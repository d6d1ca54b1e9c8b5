/**
 * Executor registry: every runtime of `fcp verify`, `fcp simulate`, the conformance suite. Executors
 * register here by name (the simulator and the torch runtime add themselves below `cpu`).
 */
import { fail } from '../core/issues.ts';
import { cpuExecutor } from './cpu/executor.ts';
import { simExecutor } from './sim/index.ts';
import { torchExecutor } from './torch/index.ts';
import type { Executor, ExecutorRunOptions } from './types.ts';

// Executors take their own option bags; the registry stores them under the common base type.
// biome-ignore lint/suspicious/noExplicitAny: option bags differ per executor
type AnyExecutor = Executor<any>;

const EXECUTORS = new Map<string, AnyExecutor>();

/** Adds an executor; registering a name twice is a bug. */
export function registerExecutor<O extends ExecutorRunOptions>(e: Executor<O>): void {
  if (EXECUTORS.has(e.name)) throw new Error(`executor ${e.name} registered twice`);
  EXECUTORS.set(e.name, e);
}

registerExecutor(cpuExecutor);
registerExecutor(simExecutor);
registerExecutor(torchExecutor);

/** The executor called `name`; FcpError `executor.unknown` otherwise. */
export function getExecutor(name: string): AnyExecutor {
  const e = EXECUTORS.get(name);
  if (!e)
    fail(
      'executor.unknown',
      `unknown executor ${JSON.stringify(name)}; choose one of ${executorNames().join(', ')}`,
      'executor',
    );
  return e;
}

/** Registered executor names, in registration order. */
export function executorNames(): string[] {
  return [...EXECUTORS.keys()];
}

/** All registered executors. */
export function allExecutors(): AnyExecutor[] {
  return [...EXECUTORS.values()];
}

/** Executors that compute real outputs (compared against the reference by `verify` and the conformance suite). */
export function numericExecutors(): AnyExecutor[] {
  return allExecutors().filter((e) => e.numeric === true);
}

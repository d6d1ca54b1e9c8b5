/**
 * `fcp plan`'s comparison against the plan without the locality tie-break: the reshuffle bytes of
 * that second plan. From {@link WORKER_FROM} ranks on it is planned on a worker thread started with
 * the main plan, so that it runs on the second core while the main thread plans, validates and
 * estimates memory (`fcp plan --world 4096`: the re-plan took 6.3 s after all of those); below,
 * or when no worker starts, it is planned on the main thread when asked for. Either way the
 * number is the same: the same planner code on a structured clone of the same problem (a plan is
 * a pure function of its inputs).
 */
import { Worker } from 'node:worker_threads';
import { FcpError, type FcpIssue } from '../core/issues.ts';
import { workerBootCode } from '../core/worker-boot.ts';
import { getPlanner } from '../experiments/strategies.ts';
import { reshuffleBytes } from '../plan/report.ts';
import type { PlannerOptions } from '../planners/types.ts';
import type { Problem } from '../problem/problem.ts';

/** The job a worker gets (its workerData). */
export interface ToLocalityWorker {
  readonly planner: string;
  readonly problem: Problem;
  readonly options: PlannerOptions;
}

/** What a worker posts: the bytes, the planner's coded error, or anything else it threw. */
export type FromLocalityWorker =
  | { readonly type: 'result'; readonly bytes: number }
  | { readonly type: 'error'; readonly issues: FcpIssue[] }
  | { readonly type: 'crash'; readonly message: string };

/**
 * Ranks from which the re-plan runs on a worker: booting one (bundling the planner under tsx,
 * loading it from `dist/`) costs a few hundred ms, which a re-plan below this size does not repay
 * (`fcp plan --world 1024`: the re-plan took 2.2 s).
 */
export const WORKER_FROM = 512;

const HERE = import.meta.url;
const WORKER_URL = new URL(HERE.endsWith('.ts') ? './locality-worker.ts' : './locality-worker.js', HERE).href;

/**
 * A re-plan under way; {@link result} waits for its reshuffle bytes (rejects with the planner's
 * FcpError; a worker that fails otherwise is replaced by the main thread).
 */
export interface LocalityReplan {
  result(): Promise<number>;
}

/** Reshuffle bytes of `plannerName`'s plan of `problem` with `options` plus `noLocality` (here or on the worker). */
export function reshuffleWithoutLocality(
  plannerName: string,
  problem: Problem,
  options: PlannerOptions,
): number {
  return reshuffleBytes(getPlanner(plannerName).plan(problem, { ...options, noLocality: true }));
}

/**
 * Starts the re-plan of `problem` by planner `plannerName` with `options` plus `noLocality`.
 * `worker`: force the worker (true) or the main thread (false); default by {@link WORKER_FROM}.
 * `options` must be plain data (no `onProgress`: the worker reports nothing).
 */
export function startLocalityReplan(
  plannerName: string,
  problem: Problem,
  options: PlannerOptions,
  worker = problem.world >= WORKER_FROM,
): LocalityReplan {
  const here = (): number => reshuffleWithoutLocality(plannerName, problem, options);
  if (!worker) return { result: async () => here() };
  // The job goes with the worker (workerData): it starts planning once booted, without waiting for
  // this thread, which is busy planning itself until it asks for the result.
  const job: ToLocalityWorker = { planner: plannerName, problem, options };
  let w: Worker;
  try {
    w = new Worker(workerBootCode(WORKER_URL, { bundle: false }), { eval: true, workerData: job });
  } catch {
    return { result: async () => here() };
  }
  // Until asked for, the worker does not keep the process alive (an error on the main thread
  // ends the command at once); while the caller waits it does.
  w.unref();
  const done = new Promise<number>((resolve, reject) => {
    w.on('message', (m: FromLocalityWorker) => {
      if (m.type === 'result') resolve(m.bytes);
      else if (m.type === 'error') reject(new FcpError(m.issues));
      else resolve(Number.NaN);
    });
    // A worker that cannot boot or run (its loader, its environment) plans nothing: the re-plan
    // then runs here, where a bug of the planner's own shows as it always did.
    w.on('error', () => resolve(Number.NaN));
    w.on('exit', () => resolve(Number.NaN));
  });
  // Handled by result(); never an unhandled rejection if the caller fails before asking.
  done.catch(() => undefined);
  return {
    async result(): Promise<number> {
      w.ref();
      try {
        const bytes = await done;
        return Number.isNaN(bytes) ? here() : bytes;
      } finally {
        void w.terminate();
      }
    },
  };
}

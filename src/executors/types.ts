/**
 * The executor interface: something that runs a plan. The simulator, the CPU reference runtime and
 * the torch runtime implement it; one conformance suite runs against all of them.
 */
import type { Plan } from '../plan/types.ts';

/** Per-sequence tensors in sequence token order, each [tokens, heads, headDim] row-major float32. */
export interface SequenceInputs {
  q: Float32Array[];
  k: Float32Array[];
  v: Float32Array[];
  /** Gradient of the output (backward input). */
  dO: Float32Array[];
}

/** Per-sequence results, same layout as {@link SequenceInputs}. */
export interface SequenceOutputs {
  o: Float32Array[];
  dq: Float32Array[];
  dk: Float32Array[];
  dv: Float32Array[];
}

/** Time spent by one rank in one phase, in milliseconds. */
export interface RankTiming {
  rank: number;
  computeMs: number;
  commMs: number;
  idleMs: number;
}

/** What an executor returns. */
export interface ExecutionResult {
  executor: string;
  /** Present when the executor computes real numbers (cpu, torch). */
  outputs?: SequenceOutputs;
  forwardMs: number;
  backwardMs: number;
  perRank: { forward: RankTiming[]; backward: RankTiming[] };
  /** Executor-specific measurements (e.g. the simulator's MFU and exposed communication). */
  details?: Record<string, unknown>;
}

/** Common run options; executors extend it with their own. */
export interface ExecutorRunOptions {
  /** Called with a fraction in [0, 1] as work progresses. */
  onProgress?: (fraction: number) => void;
  signal?: AbortSignal;
}

/** Runs plans. `inputs` is required by executors that compute numbers and ignored by the simulator. */
export interface Executor<O extends ExecutorRunOptions = ExecutorRunOptions> {
  readonly name: string;
  readonly description: string;
  /** True when `run` computes real outputs from `inputs` (cpu, torch); the conformance suite compares them. */
  readonly numeric?: boolean;
  run(plan: Plan, inputs: SequenceInputs | undefined, options?: O): Promise<ExecutionResult>;
}

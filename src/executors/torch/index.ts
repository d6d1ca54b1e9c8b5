/**
 * The `torch` executor: runs a plan with PyTorch in N Python processes (one per rank), gloo on CPUs
 * or NCCL on GPUs, through the `fcp_torch` package in `python/` (an interpreter of plan files: no
 * planning happens in Python). Inputs go to the workers as one float32 file; each rank writes its
 * user tokens' O, dQ, dK, dV and its timings, which are gathered here.
 *
 * `numeric` is left unset on purpose: the executor does compute real outputs (compare them with
 * `fcp run --backend torch --check` or the tests in test/executors/torch*.test.ts), but every run
 * starts N Python processes (about a second each to import torch), too slow for suites that run
 * every numeric executor on hundreds of plans.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fail } from '../../core/issues.ts';
import { median } from '../../core/stats.ts';
import { attendedPairs, backwardFlops, forwardFlops } from '../../model/attention.ts';
import { planToJson, writeFileAtomic } from '../../plan/io.ts';
import type { Plan } from '../../plan/types.ts';
import { validatePlan } from '../../plan/validate.ts';
import { checkInputs } from '../inputs.ts';
import type { ExecutionResult, Executor, ExecutorRunOptions, RankTiming, SequenceInputs } from '../types.ts';
import {
  readOutputs,
  readWorkerInfos,
  type WorkerInfo,
  type WorkerPhaseStats,
  writeInputFile,
} from './files.ts';
import { launchWorkers } from './launch.ts';
import { TORCH_DEFAULTS } from './option-specs.ts';
import { requireTorchPython } from './python.ts';

/** Options of the torch executor. */
export interface TorchRunOptions extends ExecutorRunOptions {
  /** Processes to start; must equal the plan's world (default: the plan's world). */
  nproc?: number;
  /** `cpu` (gloo, float32 math kernel) or `cuda` (NCCL, bf16 kernels). Default cpu. */
  device?: 'cpu' | 'cuda';
  /** Process-group backend: auto (gloo on CPU; NCCL, or gloo through host copies when ranks share a GPU). */
  backend?: 'auto' | 'gloo' | 'nccl' | 'gloo-staged';
  /** Attention kernel: auto, math, flash (varlen), cudnn (dense batches). Default auto. */
  kernel?: 'auto' | 'math' | 'flash' | 'cudnn';
  /** Piece decomposition: br (bottom-right causal pieces) or square (causal squares + rectangles). */
  mode?: 'br' | 'square';
  /** Compute dtype (default float32 on CPU, bfloat16 on CUDA). */
  dtype?: 'float32' | 'bfloat16' | 'float16';
  /** Timed iterations (forward + backward each) and untimed warm-up iterations before them. */
  iters?: number;
  warmup?: number;
  /** Seed of inputs generated in Python when `inputs` is undefined. Default 1. */
  seed?: number;
  /** Gather O, dQ, dK, dV (default true). */
  outputs?: boolean;
  /** Python interpreter (default: the first of $FCP_PYTHON, /usr/bin/python3, python3 that has torch). */
  python?: string;
  /** Fail (and end every process) after this many ms. Default 600000. */
  timeoutMs?: number;
  /** Keep the exchanged files here instead of a temporary folder. */
  workDir?: string;
  /** Use this plan file instead of writing the plan again (it must hold `plan`). */
  planPath?: string;
  /** Peak TFLOP/s for the MFU in `details` (default 989, H100/H200 dense bf16). */
  peakTflops?: number;
  /** Seconds a worker waits for a peer before failing (torch.distributed timeout). Default 60. */
  peerTimeoutS?: number;
  /** Extra environment for every worker (e.g. FCP_TORCH_FAULT in fault tests). */
  env?: Record<string, string>;
  /** Called with the worker process ids once they are started. */
  onSpawn?: (pids: number[]) => void;
  /** The caller already ran {@link requireValidPlan} on every plan (skips validating again). */
  validated?: boolean;
}

/** Per-rank timings of one phase at the iteration whose makespan is the median. */
function phaseTimings(infos: readonly WorkerInfo[], phase: 'forward' | 'backward') {
  const iters = infos[0]?.iters.length ?? 0;
  const spans: number[] = [];
  for (let i = 0; i < iters; i++) spans.push(Math.max(...infos.map((w) => w.iters[i]?.[phase].wall_ms ?? 0)));
  const med = median(spans);
  let at = 0;
  for (let i = 1; i < iters; i++) if (Math.abs(spans[i]! - med) < Math.abs(spans[at]! - med)) at = i;
  const perRank: RankTiming[] = infos.map((w) => {
    const s: WorkerPhaseStats | undefined = w.iters[at]?.[phase];
    const wall = s?.wall_ms ?? 0;
    const compute = s?.compute_ms ?? 0;
    return { rank: w.rank, computeMs: compute, commMs: s?.comm_ms ?? 0, idleMs: Math.max(0, wall - compute) };
  });
  return { makespanMs: med, perRank, iterationMs: spans };
}

/** Total attended pairs of a plan's tasks (chunk tasks counted through the workers' own counts). */
function planPairs(plan: Plan): number {
  const t = plan.tasks;
  let p = 0;
  for (let i = 0; i < t.rank.length; i++)
    p += attendedPairs(plan.mask === 'causal', t.qStart[i]!, t.qLength[i]!, t.kvStart[i]!, t.kvLength[i]!);
  return p;
}

/** One plan of a launch, with its inputs (undefined: seeded inputs generated in Python). */
export interface TorchJob {
  plan: Plan;
  inputs?: SequenceInputs | undefined;
  /** Existing file holding `plan` (skips writing it again). */
  planPath?: string;
}

/**
 * Throws FcpError with the first issue of an invalid plan (its code, e.g. `plan.rule4.dkvLost`, and
 * how many more there are), so that no runtime ever runs a plan the validator rejects: a plan
 * breaking rules 1-5 runs to the end with wrong outputs (issue 11 item 2). `what` names the plan.
 */
export function requireValidPlan(plan: Plan, what = 'the plan'): void {
  const { issues, omitted } = validatePlan(plan, { maxIssues: 1 });
  const first = issues[0];
  if (first === undefined) return;
  const more = issues.length - 1 + omitted;
  fail(
    first.code,
    `${what} is invalid, nothing was run: ${first.message}${more > 0 ? `; ${more} more issue${more > 1 ? 's' : ''} (fcp validate lists them)` : ''}`,
    first.path,
    first.row,
  );
}

/** Runs a plan in N Python processes; see the module comment. */
export async function runTorch(
  plan: Plan,
  inputs: SequenceInputs | undefined,
  o: TorchRunOptions = {},
): Promise<ExecutionResult> {
  const job: TorchJob = { plan, inputs };
  if (o.planPath !== undefined) job.planPath = o.planPath;
  const [r] = await runTorchMany([job], o);
  return r!;
}

/**
 * Runs several plans of the same world size in one launch (the processes and the process group are
 * started once, which is most of a small run's time); results in job order.
 */
export async function runTorchMany(
  jobs: readonly TorchJob[],
  o: TorchRunOptions = {},
): Promise<ExecutionResult[]> {
  if (jobs.length === 0) return [];
  if (o.validated !== true) for (const j of jobs) requireValidPlan(j.plan);
  const world = jobs[0]!.plan.world;
  const nproc = o.nproc ?? world;
  for (const j of jobs)
    if (j.plan.world !== nproc)
      fail(
        'run.nproc',
        `the plan is for ${j.plan.world} ranks but ${nproc} processes were asked for; use --nproc ${j.plan.world} (or re-plan with --world ${nproc})`,
        'nproc',
      );
  const device = o.device ?? TORCH_DEFAULTS.device;
  if (device === 'cpu' && (o.backend === 'nccl' || o.backend === 'gloo-staged'))
    fail('run.backend', `backend ${o.backend} needs --device cuda`, 'backend');
  const withInputs = jobs.some((j) => j.inputs !== undefined);
  if (withInputs && !jobs.every((j) => j.inputs !== undefined))
    fail('run.inputs', 'give inputs for every plan of a launch or for none', 'inputs');
  for (const j of jobs) if (j.inputs !== undefined) checkInputs(j.plan, j.inputs);
  const py = requireTorchPython(o.python);
  if (device === 'cuda' && !py.cuda)
    fail(
      'run.noCuda',
      `CUDA was requested but torch ${py.torch} (${py.python}) sees no CUDA device; use --device cpu`,
      'device',
    );
  const dir = o.workDir ?? mkdtempSync(join(tmpdir(), 'fcp-torch-'));
  try {
    o.onProgress?.(0);
    const args = ['--out', dir, '--device', device];
    jobs.forEach((j, i) => {
      let planPath = j.planPath;
      if (planPath === undefined) {
        planPath = join(dir, `plan${i}.json`);
        writeFileAtomic(planPath, planToJson(j.plan));
      }
      args.push('--plan', planPath);
      if (j.inputs !== undefined) {
        const inPath = join(dir, `inputs${i}.bin`);
        writeInputFile(inPath, j.inputs);
        args.push('--inputs', inPath);
      }
    });
    args.push(
      '--backend',
      o.backend ?? TORCH_DEFAULTS.backend,
      '--kernel',
      o.kernel ?? TORCH_DEFAULTS.kernel,
    );
    args.push(
      '--iters',
      String(o.iters ?? TORCH_DEFAULTS.iters),
      '--warmup',
      String(o.warmup ?? TORCH_DEFAULTS.warmup),
    );
    args.push('--timeout', String(o.peerTimeoutS ?? 60));
    if (o.mode) args.push('--mode', o.mode);
    if (o.dtype) args.push('--dtype', o.dtype);
    if (o.outputs === false) args.push('--no-outputs');
    if (!withInputs) args.push('--seed', String(o.seed ?? 1));
    const launch: Parameters<typeof launchWorkers>[0] = {
      python: py.python,
      nproc,
      args,
      timeoutMs: o.timeoutMs ?? TORCH_DEFAULTS.timeoutS * 1000,
    };
    if (o.signal) launch.signal = o.signal;
    if (o.env) launch.env = o.env;
    if (o.onSpawn) launch.onSpawn = o.onSpawn;
    await launchWorkers(launch);
    const results = jobs.map((j, i) =>
      collect(j.plan, jobs.length === 1 ? dir : join(dir, String(i)), nproc, py.python, o),
    );
    o.onProgress?.(1);
    return results;
  } finally {
    if (o.workDir === undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** Reads one plan's rank files into an ExecutionResult. */
function collect(
  plan: Plan,
  dir: string,
  nproc: number,
  python: string,
  o: TorchRunOptions,
): ExecutionResult {
  const infos = readWorkerInfos(dir, nproc);
  const fwd = phaseTimings(infos, 'forward');
  const bwd = phaseTimings(infos, 'backward');
  const w0 = infos[0]!;
  const pairs = infos.reduce((s, w) => s + w.pairsForward, 0) || planPairs(plan);
  const peak = (o.peakTflops ?? TORCH_DEFAULTS.peakTflops) * 1e12;
  const mfu = (flops: number, ms: number) => (ms > 0 ? flops / (plan.world * peak * (ms / 1e3)) : 0);
  const result: ExecutionResult = {
    executor: 'torch',
    forwardMs: fwd.makespanMs,
    backwardMs: bwd.makespanMs,
    perRank: { forward: fwd.perRank, backward: bwd.perRank },
    details: {
      python,
      torch: w0.torch,
      device: w0.device,
      gpu: w0.gpu,
      backend: w0.backend,
      kernel: w0.kernel,
      mode: w0.mode,
      dtype: w0.dtype,
      kernelsAvailable: w0.kernelsAvailable,
      kernelErrors: w0.kernelErrors,
      prepareMs: Math.max(...infos.map((w) => w.prepareMs)),
      attendedPairs: pairs,
      forwardIterationsMs: fwd.iterationMs,
      backwardIterationsMs: bwd.iterationMs,
      mfu: {
        forward: mfu(forwardFlops(plan.model, pairs), fwd.makespanMs),
        backward: mfu(backwardFlops(plan.model, pairs), bwd.makespanMs),
      },
      launches: infos.map((w) => w.iters.at(-1)?.forward.launch_kinds ?? {}),
      bytesSent: {
        forward: infos.reduce((s, w) => s + (w.iters.at(-1)?.forward.bytes_sent ?? 0), 0),
        backward: infos.reduce((s, w) => s + (w.iters.at(-1)?.backward.bytes_sent ?? 0), 0),
      },
    },
  };
  if (o.outputs !== false) result.outputs = readOutputs(dir, plan, infos);
  return result;
}

/** The registered `torch` executor. */
export const torchExecutor: Executor<TorchRunOptions> = {
  name: 'torch',
  description: 'PyTorch runtime: one Python process per rank, gloo (CPU, float32) or NCCL (CUDA, bf16)',
  // It gathers O, dQ, dK, dV unless `outputs: false`: `fcp verify --executor torch` checks them.
  numeric: true,
  run: runTorch,
};

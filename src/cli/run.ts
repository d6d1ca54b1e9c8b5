/**
 * `fcp run plan.json`: execute a plan on a runtime. `--backend torch` (default) starts `--nproc`
 * Python processes here (gloo on CPUs, NCCL on GPUs; see docs/gpu.md) and prints timings, MFU and,
 * with `--check`, the relative error of O, dQ, dK, dV against the float64 reference (exit 1 above
 * `--max-error`). `--backend cpu` / `sim` run the in-process executors on the same plan.
 * `--print-torchrun` prints the command that runs the plan on a multi-node cluster and exits.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { FcpError, fail, issue } from '../core/issues.ts';
import { randomInputsForPlan } from '../executors/inputs.ts';
import { compareOutputs, referenceAttention } from '../executors/reference.ts';
import { getExecutor } from '../executors/registry.ts';
import { requireValidPlan, runTorch, type TorchRunOptions } from '../executors/torch/index.ts';
import { NO_MULTICAST_ENV } from '../executors/torch/launch.ts';
import { TORCH_DEFAULTS, TORCH_OPTION_SPECS } from '../executors/torch/option-specs.ts';
import { pythonPackageRoot } from '../executors/torch/python.ts';
import type { ExecutionResult } from '../executors/types.ts';
import { readPlan, writeFileAtomic } from '../plan/io.ts';
import { estimateMemory, worstRank } from '../plan/memory.ts';
import type { Plan } from '../plan/types.ts';
import { addSpecOption, boundedInt, intOption, numberOption } from './common.ts';
import { memoryBudgetFrom } from './memory-options.ts';
import { type Cell, outPath, outputOf } from './output.ts';
import type { CsvTable } from './tables.ts';

const choice = <T extends string>(value: unknown, name: string, allowed: readonly T[]): T => {
  const v = String(value);
  if (!(allowed as readonly string[]).includes(v))
    fail(
      `option.${name}`,
      `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be one of ${allowed.join(', ')} (got ${v})`,
      name,
    );
  return v as T;
};

/** Torch executor options from the parsed command line. */
export function torchOptionsFrom(o: Record<string, unknown>): TorchRunOptions {
  const out: TorchRunOptions = {
    device: choice(o.device ?? TORCH_DEFAULTS.device, 'device', ['cpu', 'cuda'] as const),
    backend: choice(o.distBackend ?? TORCH_DEFAULTS.backend, 'distBackend', [
      'auto',
      'gloo',
      'nccl',
      'gloo-staged',
    ] as const),
    kernel: choice(o.kernel ?? TORCH_DEFAULTS.kernel, 'kernel', ['auto', 'math', 'flash', 'cudnn'] as const),
    iters: intOption(o.iters ?? TORCH_DEFAULTS.iters, 'iters'),
    warmup: intOption(o.warmup ?? TORCH_DEFAULTS.warmup, 'warmup'),
    seed: intOption(o.seed ?? 1, 'seed'),
    timeoutMs: timeoutSeconds(o.timeout ?? TORCH_DEFAULTS.timeoutS) * 1000,
  };
  if (out.iters! < 1 || out.iters! > MAX_ITERS)
    fail('option.iters', `--iters must be between 1 and ${MAX_ITERS} (got ${out.iters})`, 'iters');
  if (out.warmup! < 0 || out.warmup! > MAX_ITERS)
    fail('option.warmup', `--warmup must be between 0 and ${MAX_ITERS} (got ${out.warmup})`, 'warmup');
  if (o.nproc !== undefined) out.nproc = boundedInt(o.nproc, 'nproc', 1, MAX_PROCS);
  if (o.mode !== undefined) out.mode = choice(o.mode, 'mode', ['br', 'square'] as const);
  if (o.dtype !== undefined)
    out.dtype = choice(o.dtype, 'dtype', ['float32', 'bfloat16', 'float16'] as const);
  if (o.python !== undefined) out.python = String(o.python);
  if (o.peakTflops !== undefined) {
    out.peakTflops = numberOption(o.peakTflops, 'peakTflops');
    if (out.peakTflops <= 0)
      fail('option.peakTflops', `--peak-tflops must be positive (got ${out.peakTflops})`, 'peakTflops');
  }
  return out;
}

/** Upper bounds of `fcp run`'s counts (a typo such as --iters 1e9 would otherwise run for days). */
const MAX_ITERS = 100000;
const MAX_PROCS = 65536;
/** Longest `--timeout` in seconds: Node's timers fire at once beyond 2^31-1 ms (24.8 days). */
const MAX_TIMEOUT_S = 1_000_000;

/**
 * `--timeout` in seconds: at least 1 (starting the processes and importing torch alone takes
 * seconds, and the deadline message counts whole seconds) and at most {@link MAX_TIMEOUT_S}.
 */
export function timeoutSeconds(value: unknown): number {
  const t = numberOption(value, 'timeout');
  if (t < 1 || t > MAX_TIMEOUT_S)
    fail('option.timeout', `--timeout must be between 1 and ${MAX_TIMEOUT_S} seconds (got ${t})`, 'timeout');
  return t;
}

/**
 * Checks before any work that `-o FILE` can be written: not a folder or another non-regular file,
 * in an existing, writable folder. Throws `option.output`.
 */
export function checkOutputTarget(path: string): void {
  const abs = resolve(path);
  let st: ReturnType<typeof statSync> | undefined;
  try {
    st = statSync(abs);
  } catch {
    st = undefined;
  }
  if (st?.isDirectory()) fail('option.output', `-o ${path} is a folder; give a file name`, 'output');
  if (st !== undefined && !st.isFile())
    fail('option.output', `-o ${path} is not a regular file; give a file name`, 'output');
  const parent = dirname(abs);
  let ps: ReturnType<typeof statSync> | undefined;
  try {
    ps = statSync(parent);
  } catch {
    ps = undefined;
  }
  if (!ps?.isDirectory()) fail('option.output', `-o ${path}: folder ${parent} does not exist`, 'output');
  try {
    accessSync(parent, constants.W_OK);
  } catch {
    fail('option.output', `-o ${path}: folder ${parent} is not writable`, 'output');
  }
}

/**
 * The shell command that runs `planPath` with torchrun on `nnodes` nodes of `perNode` GPUs each
 * (run it on every node with NODE_RANK set). Throws `run.nproc` when the sizes do not match the plan.
 */
export function torchrunCommand(
  plan: Plan,
  planPath: string,
  o: {
    nnodes: number;
    perNode: number;
    masterAddr: string;
    masterPort: number;
    out: string;
    extra: string[];
  },
): string {
  if (o.nnodes * o.perNode !== plan.world)
    fail(
      'run.nproc',
      `the plan is for ${plan.world} ranks but ${o.nnodes} nodes x ${o.perNode} GPUs give ${o.nnodes * o.perNode}; use --nnodes and --nproc-per-node with a product of ${plan.world}`,
      'nproc',
    );
  const abs = isAbsolute(planPath) ? planPath : resolve(planPath);
  const env = Object.entries(NO_MULTICAST_ENV).map(([k, v]) => `${k}=${v}`);
  return [
    `# on every node, NODE_RANK=0..${o.nnodes - 1}; the plan file and this package must be at the same paths`,
    `${env.join(' ')} PYTHONPATH=${pythonPackageRoot()} \\`,
    `torchrun --nnodes=${o.nnodes} --nproc-per-node=${o.perNode} --node-rank=$NODE_RANK \\`,
    `  --master-addr=${o.masterAddr} --master-port=${o.masterPort} \\`,
    `  -m fcp_torch.worker --plan ${abs} --out ${o.out} --device cuda --backend nccl ${o.extra.join(' ')}`.trimEnd(),
  ].join('\n');
}

/**
 * Throws `run.memory` when a rank's estimated peak on the torch runtime (src/plan/memory.ts; the
 * run's dtype and kernels: math on CPU, flash/cuDNN on CUDA) exceeds `budget` bytes, so nothing
 * starts.
 */
export function requireMemory(plan: Plan, budget: number, layers: number, to?: TorchRunOptions): void {
  const cuda = to?.device === 'cuda';
  const dtype = to?.dtype ?? (cuda ? 'bfloat16' : 'float32');
  const kernel = cuda && to?.kernel !== 'math' ? 'gpu' : 'math';
  const w = worstRank(estimateMemory(plan, { dtype, kernel, layers }));
  if (w.peak > budget)
    fail(
      'run.memory',
      `rank ${w.rank} needs about ${(w.peak / 2 ** 30).toFixed(3)} GiB (${layers} layer${layers === 1 ? '' : 's'}, ${dtype}, ${kernel} kernels) but --memory-gb is ${(budget / 2 ** 30).toFixed(3)}; use more ranks, smaller blocks or fewer tokens per rank`,
      'memoryGb',
    );
}

const ms = (x: number): string => x.toFixed(2);

/** Human-readable summary of a run. */
export function formatRun(
  plan: Plan,
  r: ExecutionResult,
  errors?: Record<string, number>,
  maxError?: number,
): string {
  const raw = (r.details ?? {}) as Record<string, unknown>;
  // Only text details are printed: the simulator's `kernel` is its kernel model, an object.
  const d: Record<string, string | undefined> = {};
  for (const k of ['device', 'gpu', 'torch', 'backend', 'kernel', 'dtype'])
    if (typeof raw[k] === 'string' && raw[k] !== '') d[k] = raw[k];
  const simulated = r.executor === 'sim';
  const lines = [
    `plan: ${plan.strategy}, ${plan.world} ranks, ${plan.sequences.length} sequences, ${plan.mask}`,
    `runtime: ${r.executor}${d.device ? ` on ${d.device}${d.gpu ? ` (${d.gpu})` : ''}` : ''}` +
      `${d.torch ? `, torch ${d.torch}` : ''}${d.backend ? `, ${d.backend}` : ''}` +
      `${d.kernel ? `, kernel ${d.kernel}` : ''}${d.dtype ? `, ${d.dtype}` : ''}`,
    simulated
      ? `forward ${ms(r.forwardMs)} ms, backward ${ms(r.backwardMs)} ms (simulated makespan)`
      : `forward ${ms(r.forwardMs)} ms, backward ${ms(r.backwardMs)} ms (slowest rank, median iteration)`,
  ];
  const mfu = raw.mfu as { forward: number; backward: number } | undefined;
  if (mfu && (d.device ?? '').startsWith('cuda'))
    lines.push(`attention MFU: forward ${mfu.forward.toFixed(3)}, backward ${mfu.backward.toFixed(3)}`);
  lines.push(
    `rank  fwd compute  fwd comm  fwd idle  bwd compute  bwd comm  bwd idle   (ms${simulated ? ', simulated' : ''})`,
  );
  r.perRank.forward.forEach((f, i) => {
    const b = r.perRank.backward[i];
    if (!b) return;
    lines.push(
      `${String(f.rank).padStart(4)}  ${ms(f.computeMs).padStart(11)}  ${ms(f.commMs).padStart(8)}  ${ms(f.idleMs).padStart(8)}  ` +
        `${ms(b.computeMs).padStart(11)}  ${ms(b.commMs).padStart(8)}  ${ms(b.idleMs).padStart(8)}`,
    );
  });
  if (errors && maxError !== undefined) {
    const worst = Math.max(...Object.values(errors));
    const e = (x: number) => x.toExponential(2);
    lines.push(
      `relative error vs float64 reference: o ${e(errors.o!)}, dq ${e(errors.dq!)}, dk ${e(errors.dk!)}, dv ${e(errors.dv!)}`,
    );
    lines.push(
      worst <= maxError ? `check: OK (<= ${e(maxError)})` : `check: MISMATCH (${e(worst)} > ${e(maxError)})`,
    );
  }
  return lines.join('\n');
}

/** Per-rank timings as CSV: one row per (phase, rank), ms (simulated for the sim runtime). */
export function runCsv(r: ExecutionResult): CsvTable {
  const rows: Cell[][] = [];
  for (const [phase, list] of [
    ['forward', r.perRank.forward],
    ['backward', r.perRank.backward],
  ] as const)
    for (const t of list) rows.push([phase, t.rank, r.executor, t.computeMs, t.commMs, t.idleMs]);
  return [['phase', 'rank', 'runtime', 'compute_ms', 'comm_ms', 'idle_ms'], rows];
}

/** Registers `fcp run`. */
export function register(program: Command): void {
  const cmd = program.command('run');
  // The torch runtime's options are declared in src/executors/torch/option-specs.ts.
  for (const spec of TORCH_OPTION_SPECS) addSpecOption(cmd, spec);
  cmd
    .description('execute a plan on a runtime: torch (N Python processes, gloo or NCCL), cpu or sim')
    .argument('<plan>', 'plan file (.json or .json.gz)')
    .option('--backend <name>', 'runtime: torch, cpu or sim', 'torch')
    .option('--seed <n>', 'seed of the random inputs', '1')
    .option('--check', 'compare O, dQ, dK, dV with the float64 reference (small plans; exit 1 on mismatch)')
    .option('--max-error <x>', 'largest accepted relative error with --check', '1e-5')
    .addOption(new Option('--json', 'print the result as one JSON document on stdout').conflicts(['csv']))
    .option('--csv', 'print the per-rank timings as CSV on stdout (one row per rank and phase)')
    .option('-q, --quiet', 'no progress or "wrote" lines on stderr (errors are still printed)')
    .option('-o, --out <file>', 'also write the result as JSON to this file')
    .addOption(new Option('--output <file>', 'same as --out').hideHelp())
    .option('--print-torchrun', 'print the torchrun command for a multi-node cluster and exit')
    .option('--nnodes <n>', 'with --print-torchrun: nodes', '1')
    .option('--nproc-per-node <n>', 'with --print-torchrun: GPUs per node (default: plan world / nodes)')
    .option('--master-addr <host>', 'with --print-torchrun: rendezvous host', '$MASTER_ADDR')
    .option('--master-port <port>', 'with --print-torchrun: rendezvous port', '29500')
    .option('--out-dir <dir>', 'with --print-torchrun: folder the ranks write to', 'fcp-run-out')
    .option(
      '--memory-gb <x>',
      'torch: refuse the plan (run.memory) when a rank is estimated to need more than X GiB',
    )
    .option(
      '--layers <n>',
      'with --memory-gb: attention layers sharing one FcpAttention (each keeps its state)',
      '1',
    )
    .action(async (planPath: string, opts: Record<string, unknown>) => {
      const out = outputOf('run', opts);
      const outFile = outPath(opts);
      // Every option and the output target are checked before the plan is read, the plan is
      // validated before anything starts: bad input never costs a run (issue 11).
      const printTorchrun = opts.printTorchrun === true;
      const backend = choice(opts.backend, 'backend', ['torch', 'cpu', 'sim'] as const);
      const check = opts.check === true;
      const maxError = numberOption(opts.maxError, 'maxError');
      if (maxError < 0)
        fail('option.maxError', `--max-error must be at least 0 (got ${maxError})`, 'maxError');
      const seed = intOption(opts.seed, 'seed');
      if (check && backend === 'sim')
        fail(
          'run.check',
          'the sim runtime computes no outputs to check; use --backend torch or cpu',
          'check',
        );
      const to = backend === 'torch' || printTorchrun ? torchOptionsFrom(opts) : undefined;
      if (backend !== 'torch') timeoutSeconds(opts.timeout ?? 600);
      let launch: { nnodes: number; perNode: number | undefined; masterPort: number } | undefined;
      if (printTorchrun)
        launch = {
          nnodes: boundedInt(opts.nnodes, 'nnodes', 1, MAX_PROCS),
          perNode:
            opts.nprocPerNode !== undefined
              ? boundedInt(opts.nprocPerNode, 'nprocPerNode', 1, MAX_PROCS)
              : undefined,
          masterPort: boundedInt(opts.masterPort, 'masterPort', 1, 65535),
        };
      if (outFile !== undefined && !printTorchrun) checkOutputTarget(outFile);
      const budget = memoryBudgetFrom(opts);
      const layers = boundedInt(opts.layers ?? 1, 'layers', 1, 10000);
      const plan = readPlan(planPath);
      requireValidPlan(plan, `plan ${planPath}`);
      if (budget !== undefined) requireMemory(plan, budget, layers, to);
      if (launch) {
        const perNode = launch.perNode ?? Math.ceil(plan.world / launch.nnodes);
        const extra = [
          '--kernel',
          String(opts.kernel ?? 'auto'),
          '--iters',
          String(opts.iters ?? 1),
          '--warmup',
          String(opts.warmup ?? 0),
        ];
        process.stdout.write(
          `${torchrunCommand(plan, planPath, {
            nnodes: launch.nnodes,
            perNode,
            masterAddr: String(opts.masterAddr),
            masterPort: launch.masterPort,
            out: String(opts.outDir),
            extra,
          })}\n`,
        );
        return;
      }
      const needInputs = check || backend === 'cpu';
      const inputs = needInputs ? randomInputsForPlan(plan, seed) : undefined;
      let result: ExecutionResult;
      // Steps: the run, and the float64 reference with --check; a heartbeat line every few
      // seconds while the processes or workers run (docs/cli.md, "Progress").
      const progress = out.progress(check ? 2 : 1);
      if (backend === 'torch' && to) {
        to.planPath = planPath;
        to.validated = true;
        progress.step(`${to.nproc ?? plan.world} torch processes (${to.device}): start, import torch, run`);
        result = await runTorch(plan, inputs, to);
      } else {
        if (opts.nproc !== undefined && intOption(opts.nproc, 'nproc') !== plan.world)
          throw new FcpError(
            issue('run.nproc', `the plan is for ${plan.world} ranks, not --nproc ${opts.nproc}`, 'nproc'),
          );
        progress.step(`${backend} runtime, ${plan.world} ranks`);
        result = await getExecutor(backend).run(plan, inputs, {
          onProgress: (f: number) => progress.fraction(f),
        });
      }
      let errors: Record<string, number> | undefined;
      if (check) {
        if (!result.outputs)
          fail('run.check', `the ${backend} runtime computes no outputs to check`, 'check');
        progress.step('float64 reference');
        const ref = referenceAttention(plan.model, plan.mask, inputs!, (f) => progress.fraction(f));
        errors = { ...compareOutputs(result.outputs, ref) };
      }
      progress.done();
      const json = JSON.stringify({ ...result, outputs: undefined, errors }, null, 1);
      if (outFile !== undefined) {
        writeFileAtomic(outFile, json);
        out.wrote(outFile, 'result as JSON');
      }
      if (out.json) out.text(json);
      else if (out.csv) out.printCsv(...runCsv(result));
      else out.text(formatRun(plan, result, errors, check ? maxError : undefined));
      if (errors && Math.max(...Object.values(errors)) > maxError) process.exitCode = 1;
    });
}

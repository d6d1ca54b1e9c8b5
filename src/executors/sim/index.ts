/**
 * The `sim` executor: replays a plan on a modelled cluster (cost model in src/cost) with a
 * discrete-event simulation and reports per phase the makespan, attention MFU, per-rank busy and
 * idle time, exposed communication, reshuffle time and bytes; optionally a Chrome trace.
 * {@link simulatePlan} is the synchronous entry point for library use (e.g. the `wlb` oracle).
 */

import { progressSpan } from '../../core/progress-span.ts';
import { imbalance } from '../../core/stats.ts';
import type { Calibration } from '../../cost/calibration.ts';
import { ChunkCoster } from '../../cost/chunks.ts';
import { KernelModel, type KernelPolicy } from '../../cost/kernel.ts';
import { Network } from '../../cost/network.ts';
import { OpCost } from '../../cost/op-cost.ts';
import { sequencePairs } from '../../model/attention.ts';
import { chainsAsGroups } from '../../plan/chains.ts';
import { userTokenImbalance } from '../../plan/layout.ts';
import type { Plan } from '../../plan/types.ts';
import { requireValidPlan } from '../../plan/validate.ts';
import { type ClusterSpec, computeSlowdown, resolveCluster } from '../../problem/cluster.ts';
import type { ExecutionResult, Executor, ExecutorRunOptions, RankTiming } from '../types.ts';
import { type PhaseRun, runPhase } from './engine.ts';
import { type FreeKinds, type PreparedPhase, preparePhase } from './prepare.ts';
import { RATE_DEFAULTS, type RateOptions } from './rates.ts';
import { buildTrace } from './trace.ts';

/** Simulation options; every field optional. */
export interface SimOptions {
  /** Cluster (default: the `hopper-ib` preset). */
  cluster?: ClusterSpec | undefined;
  /** Kernel calibration (default: the shipped H200 tables). */
  calibration?: Calibration | undefined;
  /** Kernel path policy (default `auto`: dense batched squares where cheaper, varlen otherwise). */
  kernel?: KernelPolicy | undefined;
  /** Per-launch overhead override, ms. */
  launchMs?: { forward: number; backward: number } | undefined;
  /** Tile floor of pieces below 128 tokens (kernel.ts). */
  tileFloor?: number | undefined;
  /** Cost of an empty varlen grid tile per head, ms (kernel.ts). */
  emptyTileMs?: number | undefined;
  /** Rate solver neighbourhood. */
  rates?: Partial<RateOptions> | undefined;
  /** Also build a Chrome trace. */
  trace?: boolean | undefined;
  /**
   * Charge the padding recorded in sequence sets (`padTo`, TE's padding to a multiple of 2N);
   * default true. False costs what a runtime that does not pad executes (the GPU runtime's replay).
   */
  padding?: boolean | undefined;
  /**
   * What-if (`--free-kinds`): per phase, the transfer kinds (codes, plan/types.ts `Kind`) whose
   * transfers carry no bytes (their latency is kept). Not a plan's real time: an upper bound on what
   * hiding those transfers would buy.
   */
  freeKinds?: FreeKinds | undefined;
  /** Skip the validation of the plan (only for plans the caller has just validated). */
  skipValidation?: boolean | undefined;
  /**
   * Another engine for the phases (default: the built-in discrete-event engine, {@link runPhase}).
   * It gets the prepared phases (ops with our kernel model's durations, flows, resources) so that
   * only the network differs; e.g. SimGrid (src/executors/simgrid).
   */
  engine?: PhaseEngine | undefined;
  /**
   * Fraction of the work done, called now and then: the validation of the plan (unless skipped)
   * up to {@link VALIDATION_SHARE}, then both phases of the built-in engine.
   */
  onProgress?: (fraction: number) => void;
}

/** An engine that runs prepared phases (forward, backward) on a network. */
export interface PhaseEngine {
  /** Engine name as outputs print it, e.g. `simgrid`. */
  readonly name: string;
  /** Name of the network model as outputs print it, e.g. `simgrid-ib`. */
  readonly network: string;
  run(
    phases: readonly PreparedPhase[],
    network: Network,
  ): { runs: PhaseRun[]; info: Record<string, unknown> };
}

/** Results of one phase. Times in ms; per-rank arrays indexed by rank. */
export interface SimPhaseResult {
  makespanMs: number;
  /** Useful FLOPs / (world * peak * makespan); only attended pairs count. */
  mfu: number;
  /** Useful FLOPs / (peak * sum of compute time): the MFU with perfect balance and no exposed comm. */
  kernelMfu: number;
  usefulFlops: number;
  computeMs: number[];
  commMs: number[];
  idleMs: number[];
  exposedCommMs: number[];
  meanExposedCommMs: number;
  maxExposedCommMs: number;
  /** max/mean - 1 of per-rank compute time. */
  computeImbalance: number;
  /** max/mean - 1 of per-rank bytes sent plus received. */
  commImbalance: number;
  /** Reshuffle: `in` flows all done by inMs; `out` flows span outMs (first ready to last done). */
  reshuffle: { inMs: number; outMs: number };
  bytes: { in: number; kv: number; out: number; dkv: number; total: number };
  ops: number;
  messages: number;
  flows: number;
  groups: number;
  events: number;
  rateSolves: number;
}

/** A simulation's results. */
export interface SimResult {
  strategy: string;
  world: number;
  cluster: ClusterSpec;
  kernel: {
    policy: KernelPolicy;
    sources: readonly string[];
    denseBackend: string | null;
    launchMs: { forward: number; backward: number };
  };
  rates: RateOptions;
  /** Engine that ran the phases: `builtin` (ours) or `simgrid`. */
  engine: string;
  /** Network model: `fluid` or `contention` (ours, cluster.network) or `simgrid-cm02|lv08|ib`. */
  network: string;
  /** What a non-built-in engine reports (SimGrid: model, wall time). */
  engineInfo?: Record<string, unknown>;
  forward: SimPhaseResult;
  backward: SimPhaseResult;
  /** Forward plus backward useful FLOPs over world * peak * (forward + backward makespan). */
  mfu: number;
  /**
   * Token imbalance (max/mean - 1) of the plan's user layout: what the rest of the model (MLP,
   * projections, norms) pays per layer on top of attention. Not part of the simulated makespans.
   */
  userTokenImbalance: number;
  /** Chrome trace object when requested. */
  trace?: unknown;
}

/**
 * Share of {@link simulatePlan}'s time its validation takes, for progress: about 0.3 (an FCP plan of 4096
 * ranks: 8 s of validation, 18 s of simulation; `fcp simulate`).
 */
const VALIDATION_SHARE = 0.3;

/** Simulates a plan. Throws FcpError for plans it cannot replay (`sim.plan.*`, `sim.deadlock`). */
export function simulatePlan(plan: Plan, options: SimOptions = {}): SimResult {
  // A plan the validator rejects can index out of range or loop forever in the engine: refuse it
  // first, with the validator's code (a trusted caller that just validated may skip this).
  const told = options.onProgress;
  const share = options.skipValidation ? 0 : VALIDATION_SHARE;
  if (!options.skipValidation) requireValidPlan(plan, 'the plan', progressSpan(told, 0, share));
  const cluster = options.cluster ?? resolveCluster('hopper-ib');
  const rates: RateOptions = { ...RATE_DEFAULTS, ...definedOnly(options.rates ?? {}) };
  const kernelOpts: ConstructorParameters<typeof KernelModel>[1] = {
    peakTflops: cluster.peakTflops,
    slowdown: computeSlowdown(cluster),
    policy: options.kernel ?? 'auto',
  };
  if (options.calibration) kernelOpts.calibration = options.calibration;
  if (options.launchMs) kernelOpts.launchMs = options.launchMs;
  if (options.tileFloor !== undefined) kernelOpts.tileFloor = options.tileFloor;
  if (options.emptyTileMs !== undefined) kernelOpts.emptyTileMs = options.emptyTileMs;
  const kernel = new KernelModel(plan.model, kernelOpts);
  const network = new Network(cluster, plan.world);
  const contention = network.hasContention()
    ? { mask: network.contended, loss: cluster.contentionLoss }
    : null;
  const ctx = {
    plan,
    network,
    op: new OpCost(kernel, plan.mask),
    chunks: new ChunkCoster(plan, kernel, options.padding ?? true),
    freeKinds: options.freeKinds,
  };
  let pairs = 0;
  for (let i = 0; i < plan.sequences.length; i++)
    pairs += sequencePairs(plan.mask === 'causal', plan.sequences[i]!);
  const dirs = ['forward', 'backward'] as const;
  const preps = dirs.map((dir) => preparePhase(ctx, chainsAsGroups(plan[dir]), dir));
  const engine = options.engine;
  const ran = engine
    ? engine.run(preps, network)
    : {
        runs: preps.map((prep, i) => {
          // Each phase half of what the validation leaves.
          const half = (1 - share) / 2;
          const tell = progressSpan(told, share + i * half, share + (i + 1) * half);
          return runPhase(prep, network.capacity, rates, contention, tell);
        }),
        info: undefined,
      };
  const phases: { prep: PreparedPhase; run: PhaseRun }[] = [];
  const results: SimPhaseResult[] = [];
  dirs.forEach((dir, i) => {
    const prep = preps[i]!;
    const run = ran.runs[i]!;
    phases.push({ prep, run });
    results.push(summarise(prep, run, plan[dir].groupOfRound, kernel.flops(dir, pairs), cluster.peakTflops));
  });
  const [fwd, bwd] = results as [SimPhaseResult, SimPhaseResult];
  const total = fwd.makespanMs + bwd.makespanMs;
  const out: SimResult = {
    strategy: plan.strategy,
    world: plan.world,
    userTokenImbalance: userTokenImbalance(plan),
    cluster,
    kernel: {
      policy: kernel.policy,
      sources: kernel.calibration.sources,
      denseBackend: kernel.calibration.denseBackend ?? null,
      launchMs: { forward: kernel.launchMs('forward'), backward: kernel.launchMs('backward') },
    },
    rates,
    engine: engine ? engine.name : 'builtin',
    network: engine ? engine.network : cluster.network,
    ...(ran.info ? { engineInfo: ran.info } : {}),
    forward: fwd,
    backward: bwd,
    mfu:
      total > 0 ? (fwd.usefulFlops + bwd.usefulFlops) / (plan.world * cluster.peakTflops * 1e9 * total) : 0,
  };
  if (options.trace) out.trace = buildTrace(phases, plan.world);
  return out;
}

function summarise(
  prep: PreparedPhase,
  run: PhaseRun,
  groupOfRound: Int32Array,
  useful: number,
  peakTflops: number,
): SimPhaseResult {
  const W = prep.world;
  const ms = run.makespanMs;
  const compute = Array.from(run.computeMs);
  const traffic = Array.from({ length: W }, (_, r) => run.bytesSent[r]! + run.bytesReceived[r]!);
  const exposed = Array.from(run.exposedMs);
  const sumCompute = compute.reduce((s, v) => s + v, 0);
  const b = run.bytesByKind;
  return {
    makespanMs: ms,
    mfu: ms > 0 ? useful / (W * peakTflops * 1e9 * ms) : 0,
    kernelMfu: sumCompute > 0 ? useful / (peakTflops * 1e9 * sumCompute) : 0,
    usefulFlops: useful,
    computeMs: compute,
    commMs: Array.from(run.commMs),
    idleMs: compute.map((c) => ms - c),
    exposedCommMs: exposed,
    meanExposedCommMs: exposed.reduce((s, v) => s + v, 0) / Math.max(1, W),
    maxExposedCommMs: exposed.reduce((m, v) => Math.max(m, v), 0),
    computeImbalance: imbalance(compute),
    commImbalance: imbalance(traffic),
    reshuffle: {
      inMs: Number.isNaN(run.inEndMs) ? 0 : run.inEndMs,
      outMs: Number.isNaN(run.outEndMs) ? 0 : run.outEndMs - run.outStartMs,
    },
    bytes: { in: b[0]!, kv: b[1]!, out: b[2]!, dkv: b[3]!, total: b[0]! + b[1]! + b[2]! + b[3]! },
    ops: prep.opCount,
    messages: prep.messages,
    flows: prep.flowCount,
    groups: groupOfRound.length > 0 ? groupOfRound[groupOfRound.length - 1]! + 1 : 0,
    events: run.events,
    rateSolves: run.rateSolves,
  };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

/** Options of the `sim` executor. */
export interface SimRunOptions extends ExecutorRunOptions, SimOptions {}

/** The `sim` executor (ignores inputs; computes no numbers, only time). */
export const simExecutor: Executor<SimRunOptions> = {
  name: 'sim',
  description: 'discrete-event cluster simulator driven by H200 kernel calibration (no numerics)',
  numeric: false,
  async run(plan, _inputs, options = {}): Promise<ExecutionResult> {
    options.signal?.throwIfAborted();
    const res = simulatePlan(plan, options);
    options.onProgress?.(1);
    const timing = (p: SimPhaseResult): RankTiming[] =>
      p.computeMs.map((c, rank) => ({
        rank,
        computeMs: c,
        commMs: p.commMs[rank]!,
        idleMs: p.idleMs[rank]!,
      }));
    const { trace, ...details } = res;
    const out: ExecutionResult = {
      executor: 'sim',
      forwardMs: res.forward.makespanMs,
      backwardMs: res.backward.makespanMs,
      perRank: { forward: timing(res.forward), backward: timing(res.backward) },
      details: details as unknown as Record<string, unknown>,
    };
    if (trace !== undefined) (out.details as Record<string, unknown>).trace = trace;
    return out;
  },
};

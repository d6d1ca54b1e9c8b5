/**
 * The `cpu` executor: runs a plan with real attention on one worker thread per rank, every
 * transfer a real message between two workers (a MessageChannel per pair of ranks that exchange
 * anything), and gathers O, dQ, dK, dV per sequence from the user ranks.
 *
 * Faults never hang the caller: a worker that throws or exits fails the run at once with the rank
 * and what it was doing (read from a shared status block, so it is known even after the worker
 * died); a watchdog fails a run that makes no progress for `stallTimeoutMs`; every worker is
 * terminated on every failure path (or, after a successful run with a pool, returned to it).
 *
 * Timings: `forwardMs`/`backwardMs` are wall clock on the main thread (the phases are separated by
 * a barrier); per rank, `computeMs` is time in the attention kernels, `commMs` time packing and
 * applying messages, `idleMs` the rest of the phase (mostly waiting for receives).
 */
import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';
import { type ErrorCode, FcpError, issue } from '../../core/issues.ts';
import { planChainsAsGroups } from '../../plan/chains.ts';
import { expandChunks } from '../../plan/expand.ts';
import type { Plan } from '../../plan/types.ts';
import { requireValidPlan } from '../../plan/validate.ts';
import { checkInputs } from '../inputs.ts';
import type {
  ExecutionResult,
  Executor,
  ExecutorRunOptions,
  RankTiming,
  SequenceInputs,
  SequenceOutputs,
} from '../types.ts';
import { type CpuWorkerPool, spawnWorkers } from './pool.ts';
import {
  describeStatus,
  type FaultInjection,
  type FromWorker,
  type RankJob,
  type RowInputs,
  STATUS_FIELDS,
  Status,
  statusFields,
  type ToWorker,
} from './protocol.ts';

/** Options of the `cpu` executor. */
export interface CpuRunOptions extends ExecutorRunOptions {
  /**
   * Internal: run without validating the plan first. Only tests of deliberately wrong plans set it;
   * the runtime then fails (or stalls, caught by the watchdog) where the plan is wrong.
   */
  skipValidation?: boolean;
  /** Fail with `exec.stall` when no rank makes progress for this long (ms). Default 60000. */
  stallTimeoutMs?: number;
  /** Reuse workers across runs (booting a worker costs tens of ms or more). */
  pool?: CpuWorkerPool;
  /** Internal: a deliberate fault, for tests of fault handling. */
  inject?: FaultInjection;
}

/** Defaults of {@link CpuRunOptions}. */
export const CPU_DEFAULTS = { stallTimeoutMs: 60000 } as const;

/** Per-sequence Float32 arrays of [tokens, width] filled with NaN (tokens nobody delivers stay NaN). */
function nanArrays(sequences: Int32Array, width: number): Float32Array[] {
  return Array.from(sequences, (len) => new Float32Array(len * width).fill(Number.NaN));
}

/** User-layout inputs of every rank (copies, so their buffers can move to the workers). */
function splitInputs(plan: Plan, inputs: SequenceInputs): RowInputs[][] {
  const ul = plan.userLayout;
  const qw = plan.model.qHeads * plan.model.headDim;
  const kw = plan.model.kvHeads * plan.model.headDim;
  const perRank: RowInputs[][] = Array.from({ length: plan.world }, () => []);
  for (let r = 0; r < ul.rank.length; r++) {
    const rank = ul.rank[r]!;
    const s = ul.seq[r]!;
    const a = ul.start[r]!;
    const b = a + ul.length[r]!;
    const len = plan.sequences[s];
    if (rank < 0 || rank >= plan.world || len === undefined || a < 0 || b > len)
      throw new FcpError(
        issue(
          'exec.plan.layout',
          `user layout row ${r} (rank ${rank}, sequence ${s}, [${a}, ${b})) lies outside the plan`,
          'userLayout',
          r,
        ),
      );
    perRank[rank]!.push({
      row: r,
      q: inputs.q[s]!.slice(a * qw, b * qw),
      k: inputs.k[s]!.slice(a * kw, b * kw),
      v: inputs.v[s]!.slice(a * kw, b * kw),
      dO: inputs.dO[s]!.slice(a * qw, b * qw),
    });
  }
  return perRank;
}

/** One MessagePort per (rank, peer) for every pair of distinct ranks that exchange a transfer. */
function connect(plan: Plan): (MessagePort | undefined)[][] {
  const W = plan.world;
  const ports: (MessagePort | undefined)[][] = Array.from(
    { length: W },
    () => new Array<MessagePort | undefined>(W),
  );
  for (const ph of [plan.forward, plan.backward]) {
    const T = ph.transfers;
    for (let t = 0; t < T.src.length; t++) {
      const a = T.src[t]!;
      const b = T.dst[t]!;
      if (a === b || a < 0 || b < 0 || a >= W || b >= W || ports[a]![b]) continue;
      const ch = new MessageChannel();
      ports[a]![b] = ch.port1;
      ports[b]![a] = ch.port2;
    }
  }
  return ports;
}

/** What a rank was doing, from the shared status block. */
function rankStatus(status: Int32Array, rank: number): string {
  return describeStatus(status, rank);
}

async function runCpu(
  plan: Plan,
  inputs: SequenceInputs | undefined,
  options: CpuRunOptions = {},
): Promise<ExecutionResult> {
  const stallTimeoutMs = options.stallTimeoutMs ?? CPU_DEFAULTS.stallTimeoutMs;
  if (!(stallTimeoutMs > 0))
    throw new FcpError(
      issue(
        'exec.option.stallTimeout',
        `the stall timeout must be a positive number of ms (got ${stallTimeoutMs})`,
      ),
    );
  // Validate before anything else: the input check and the expansion index the plan's tables.
  let validateMs = 0;
  if (!options.skipValidation) {
    const v0 = performance.now();
    requireValidPlan(plan);
    validateMs = performance.now() - v0;
  }
  checkInputs(plan, inputs);
  // Chained rounds run as their comm groups, one after another (src/plan/chains.ts).
  const ex = expandChunks(planChainsAsGroups(plan));
  const W = ex.world;
  const rowInputs = splitInputs(ex, inputs);
  const ports = connect(ex);
  const statusBuf = new SharedArrayBuffer(W * STATUS_FIELDS * 4);
  const status = new Int32Array(statusBuf);
  for (let r = 0; r < W; r++) status[r * STATUS_FIELDS + Status.phase] = -1;

  const b0 = performance.now();
  const workers = options.pool ? await options.pool.acquire(W) : await spawnWorkers(W);
  const bootMs = performance.now() - b0;

  // Everything from here on runs inside try/finally so that no exit path leaves a worker behind.
  let watchdog: ReturnType<typeof setInterval> | undefined;
  let succeeded = false;
  let failure: Error | undefined;
  let rejectFailure!: (e: Error) => void;
  const failed = new Promise<never>((_, reject) => {
    rejectFailure = reject;
  });
  failed.catch(() => undefined); // observed through Promise.race below
  const fail = (e: Error): void => {
    if (failure) return;
    failure = e;
    rejectFailure(e);
  };
  // Rank, phase and op travel as fields (tests and callers read them; the message repeats them).
  const runError = (
    code: ErrorCode,
    message: string,
    rank?: number,
    at?: ReturnType<typeof statusFields>,
  ): FcpError =>
    new FcpError(
      rank === undefined
        ? issue(code, message)
        : { ...issue(code, message, 'rank', rank), ...(at ?? statusFields(status, rank)) },
    );

  const fwdTimings: RankTiming[] = new Array(W);
  const bwdTimings: RankTiming[] = new Array(W);
  const rowOutputs: Extract<FromWorker, { type: 'done' }>['outputs'][] = new Array(W);
  let fwdCount = 0;
  let doneCount = 0;
  let finished = false;
  let resolveFwd!: () => void;
  let resolveDone!: () => void;
  const fwdDone = new Promise<void>((r) => {
    resolveFwd = r;
  });
  const allDone = new Promise<void>((r) => {
    resolveDone = r;
  });
  const onAbort = (): void => fail(runError('exec.aborted', 'the run was aborted'));
  const listeners: {
    w: Worker;
    message: (m: FromWorker) => void;
    error: (e: Error) => void;
    exit: (c: number) => void;
  }[] = [];
  try {
    workers.forEach((w, rank) => {
      const message = (m: FromWorker): void => {
        if (m.type === 'phaseDone') {
          fwdTimings[rank] = m.timing;
          if (++fwdCount === W) resolveFwd();
        } else if (m.type === 'done') {
          bwdTimings[rank] = m.timing;
          rowOutputs[rank] = m.outputs;
          if (++doneCount === W) resolveDone();
        } else if (m.type === 'error') {
          fail(runError('exec.worker', `rank ${m.rank} failed in ${m.where}: ${m.message}`, m.rank, m.at));
        }
      };
      const error = (e: Error): void => {
        fail(
          runError('exec.worker', `rank ${rank} failed in ${rankStatus(status, rank)}: ${e.message}`, rank),
        );
      };
      const exit = (code: number): void => {
        if (!finished)
          fail(
            runError(
              'exec.exit',
              `rank ${rank}'s worker exited (code ${code}) during ${rankStatus(status, rank)}`,
              rank,
            ),
          );
      };
      w.on('message', message);
      w.on('error', error);
      w.on('exit', exit);
      listeners.push({ w, message, error, exit });
    });

    // Watchdog: the sum of every rank's progress counter is the heartbeat.
    const expectedBeats = countBeats(ex);
    let lastBeat = -1;
    let lastChange = performance.now();
    const tick = Math.max(10, Math.min(250, stallTimeoutMs / 5));
    watchdog = setInterval(() => {
      let beat = 0;
      for (let r = 0; r < W; r++) beat += Atomics.load(status, r * STATUS_FIELDS + Status.progress);
      const now = performance.now();
      if (beat !== lastBeat) {
        lastBeat = beat;
        lastChange = now;
        options.onProgress?.(Math.min(1, beat / Math.max(1, expectedBeats)));
        return;
      }
      if (now - lastChange < stallTimeoutMs) return;
      const lines: string[] = [];
      for (let r = 0; r < W; r++) lines.push(`rank ${r}: ${rankStatus(status, r)}`);
      fail(
        runError(
          'exec.stall',
          `the run made no progress for ${Math.round(now - lastChange)} ms (stall timeout ${stallTimeoutMs} ms): ${lines.join('; ')}. ` +
            'A transfer that no rank sends, or a deadlock in the plan, stalls a run; a genuinely slow op needs a larger timeout.',
        ),
      );
    }, tick);
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort);

    const t0 = performance.now();
    workers.forEach((w, rank) => {
      const job: RankJob = {
        rank,
        plan: ex,
        ports: ports[rank]!,
        status: statusBuf,
        inputs: rowInputs[rank]!,
      };
      if (options.inject && options.inject.rank === rank) job.inject = options.inject;
      const transfer: (ArrayBuffer | MessagePort)[] = [];
      for (const p of job.ports) if (p) transfer.push(p);
      for (const i of job.inputs)
        transfer.push(
          i.q.buffer as ArrayBuffer,
          i.k.buffer as ArrayBuffer,
          i.v.buffer as ArrayBuffer,
          i.dO.buffer as ArrayBuffer,
        );
      const msg: ToWorker = { type: 'run', job };
      w.postMessage(msg, transfer as never);
    });
    await Promise.race([fwdDone, failed]);
    const t1 = performance.now();
    for (const w of workers) w.postMessage({ type: 'phase', phase: 1 } satisfies ToWorker);
    await Promise.race([allDone, failed]);
    const t2 = performance.now();
    finished = true;
    for (const w of workers) w.postMessage({ type: 'release' } satisfies ToWorker);
    const outputs = gather(ex, rowOutputs);
    succeeded = true;
    return {
      executor: 'cpu',
      outputs,
      forwardMs: t1 - t0,
      backwardMs: t2 - t1,
      perRank: { forward: fwdTimings, backward: bwdTimings },
      details: {
        workers: W,
        bootMs,
        validateMs,
        validated: !options.skipValidation,
        pooled: options.pool !== undefined,
      },
    };
  } finally {
    finished = true;
    if (watchdog) clearInterval(watchdog);
    options.signal?.removeEventListener('abort', onAbort);
    for (const l of listeners) {
      l.w.off('message', l.message);
      l.w.off('error', l.error);
      l.w.off('exit', l.exit);
    }
    if (!succeeded || !options.pool) await Promise.all(workers.map((w) => w.terminate()));
    else options.pool.release(workers);
  }
}

/** Heartbeats of a complete run (tasks plus groups per rank), for progress fractions. */
function countBeats(plan: Plan): number {
  let n = 0;
  for (const ph of [plan.forward, plan.backward]) {
    n += ph.compute.taskIds.length;
    let groups = 0;
    for (let r = 0; r < ph.groupOfRound.length; r++) groups = Math.max(groups, ph.groupOfRound[r]! + 1);
    n += groups * plan.world;
  }
  return n;
}

/** Assembles per-sequence outputs from every rank's user rows. */
function gather(plan: Plan, perRank: Extract<FromWorker, { type: 'done' }>['outputs'][]): SequenceOutputs {
  const qw = plan.model.qHeads * plan.model.headDim;
  const kw = plan.model.kvHeads * plan.model.headDim;
  const out: SequenceOutputs = {
    o: nanArrays(plan.sequences, qw),
    dq: nanArrays(plan.sequences, qw),
    dk: nanArrays(plan.sequences, kw),
    dv: nanArrays(plan.sequences, kw),
  };
  const ul = plan.userLayout;
  for (const rows of perRank)
    for (const r of rows ?? []) {
      const s = ul.seq[r.row]!;
      const a = ul.start[r.row]!;
      out.o[s]!.set(r.o, a * qw);
      out.dq[s]!.set(r.dq, a * qw);
      out.dk[s]!.set(r.dk, a * kw);
      out.dv[s]!.set(r.dv, a * kw);
    }
  return out;
}

/** The CPU reference runtime (registry name `cpu`). */
export const cpuExecutor: Executor<CpuRunOptions> = {
  name: 'cpu',
  description:
    'CPU reference runtime: one worker thread per rank, real attention kernels, real messages (float32 data, float64 math)',
  numeric: true,
  run: runCpu,
};

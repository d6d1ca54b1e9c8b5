/**
 * Messages between the CPU runtime's main thread and its rank workers, and the layout of the
 * shared status block the main thread reads to name what a rank was doing when it failed or
 * stalled (readable even after the worker died).
 */
import type { MessagePort } from 'node:worker_threads';
import type { Plan } from '../../plan/types.ts';
import type { RankTiming } from '../types.ts';

/** Phases by index. */
export const PHASES = ['forward', 'backward'] as const;

/** A deliberate fault for tests of the runtime's fault handling (internal). */
export interface FaultInjection {
  rank: number;
  /** 0 forward, 1 backward. */
  phase: 0 | 1;
  /** Index of the compute op among this rank's ops of the phase, before which the fault fires. */
  op: number;
  /** `throw`: the worker throws; `exit`: the worker thread exits; `hang`: it blocks forever. */
  action: 'throw' | 'exit' | 'hang';
}

/** Inputs of one user-layout row, as sent to its rank. */
export interface RowInputs {
  /** Row of the (expanded) user layout. */
  row: number;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  dO: Float32Array;
}

/** Outputs of one user-layout row, as sent back. */
export interface RowOutputs {
  row: number;
  o: Float32Array;
  dq: Float32Array;
  dk: Float32Array;
  dv: Float32Array;
}

/** Everything a rank needs for one run. */
export interface RankJob {
  rank: number;
  /** The plan without chunk rows. */
  plan: Plan;
  /** ports[peer]: channel to that rank; absent where the plan has no transfer between the two. */
  ports: (MessagePort | undefined)[];
  /** Shared status block of all ranks (see {@link Status}). */
  status: SharedArrayBuffer;
  inputs: RowInputs[];
  inject?: FaultInjection;
}

/** Main thread -> worker. */
export type ToWorker = { type: 'run'; job: RankJob } | { type: 'phase'; phase: 1 } | { type: 'release' };

/** Worker -> main thread. */
export type FromWorker =
  | { type: 'ready' }
  | { type: 'phaseDone'; phase: 0; timing: RankTiming }
  | { type: 'done'; timing: RankTiming; outputs: RowOutputs[] }
  | {
      type: 'error';
      rank: number;
      /** Rank, phase and op the worker was at when it failed (fields of the executor's error). */
      at?: { rank: number; phase?: 'forward' | 'backward'; op?: number };
      where: string;
      message: string;
      stack?: string;
    };

/** Rank -> rank: the payload of transfer `id` of `phase`. */
export interface PeerMessage {
  phase: 0 | 1;
  id: number;
  data: Float32Array;
}

/** Fields of one rank's slot in the status block (Int32Array, {@link STATUS_FIELDS} per rank). */
export const Status = {
  /** -1 before start, 0 forward, 1 backward. */
  phase: 0,
  /** A {@link RankState}. */
  state: 1,
  /** Compute op id (state compute) or group (send, wait, apply). */
  index: 2,
  /** Increments on every task and group done: the watchdog's heartbeat. */
  progress: 3,
  /** First transfer id still awaited (state wait), else -1. */
  waitingFor: 4,
  /** Number of transfers still awaited (state wait). */
  missing: 5,
  /** Task id being computed (state compute), else -1. */
  task: 6,
} as const;
export const STATUS_FIELDS = 8;

/** What a rank is doing. */
export const RankState = {
  booting: 0,
  compute: 1,
  send: 2,
  wait: 3,
  apply: 4,
  phaseDone: 5,
  done: 6,
  failed: 7,
} as const;

const STATE_NAMES = [
  'starting',
  'computing',
  'sending',
  'waiting',
  'receiving',
  'between phases',
  'done',
  'failed',
];

/** Where a rank is, as fields of an executor error: its rank, and its phase and compute op while computing. */
export function statusFields(
  status: Int32Array,
  rank: number,
): { rank: number; phase?: 'forward' | 'backward'; op?: number } {
  const b = rank * STATUS_FIELDS;
  const phase = status[b + Status.phase]!;
  const out: { rank: number; phase?: 'forward' | 'backward'; op?: number } = { rank };
  if (phase === 0 || phase === 1) out.phase = phase === 0 ? 'forward' : 'backward';
  if (status[b + Status.state] === RankState.compute && out.phase) out.op = status[b + Status.index]!;
  return out;
}

/** One line describing a rank's status slot, e.g. "forward: waiting in group 3 for transfer 17 (+2 more)". */
export function describeStatus(status: Int32Array, rank: number): string {
  const b = rank * STATUS_FIELDS;
  const phase = status[b + Status.phase]!;
  const state = status[b + Status.state]!;
  const index = status[b + Status.index]!;
  const where = phase < 0 ? 'before the forward phase' : PHASES[phase];
  switch (state) {
    case RankState.compute: {
      const task = status[b + Status.task]!;
      return `${where} compute op ${index}${task >= 0 ? ` (task ${task})` : ''}`;
    }
    case RankState.send:
      return `${where} group ${index}, posting sends`;
    case RankState.apply:
      return `${where} group ${index}, applying receives`;
    case RankState.wait: {
      const missing = status[b + Status.missing]!;
      const first = status[b + Status.waitingFor]!;
      return `${where} group ${index}, waiting for transfer ${first}${missing > 1 ? ` and ${missing - 1} more` : ''}`;
    }
    default:
      return `${where}, ${STATE_NAMES[state] ?? `state ${state}`}`;
  }
}

/**
 * Entry point of a CPU runtime worker thread: waits for a `run` job, executes the rank's forward
 * phase, waits for the main thread's go for the backward phase (a barrier, so phase timings are
 * clean), executes it and sends the rank's outputs back. Any error is reported with the rank and
 * what it was doing; the main thread then stops every worker. A worker serves one run at a time
 * and may be reused for the next (worker pools) once the main thread releases it.
 */
import { parentPort } from 'node:worker_threads';
import type { FromWorker, PeerMessage, RankJob, ToWorker } from './protocol.ts';
import { RankState, STATUS_FIELDS, Status, statusFields } from './protocol.ts';
import { RankRuntime } from './rank.ts';

const port = parentPort;
if (!port) throw new Error('the CPU runtime worker must run in a worker thread');

let current:
  | { runtime: RankRuntime | undefined; job: RankJob; startBackward: () => void; backward: Promise<void> }
  | undefined;

function post(msg: FromWorker, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(msg, transfer);
}

async function run(job: RankJob): Promise<void> {
  let startBackward!: () => void;
  const backward = new Promise<void>((resolve) => {
    startBackward = resolve;
  });
  const state: NonNullable<typeof current> = { runtime: undefined, job, startBackward, backward };
  current = state;
  try {
    const rt = new RankRuntime(job);
    state.runtime = rt;
    for (const p of job.ports) p?.on('message', (m: PeerMessage) => rt.deliver(m));
    const fwd = await rt.runPhase(0);
    post({ type: 'phaseDone', phase: 0, timing: fwd });
    await backward;
    const bwd = await rt.runPhase(1);
    const outputs = rt.outputs();
    const buffers: ArrayBuffer[] = [];
    for (const o of outputs)
      buffers.push(
        o.o.buffer as ArrayBuffer,
        o.dq.buffer as ArrayBuffer,
        o.dk.buffer as ArrayBuffer,
        o.dv.buffer as ArrayBuffer,
      );
    post({ type: 'done', timing: bwd, outputs }, buffers);
  } catch (e) {
    const err = e as Error;
    const status = new Int32Array(job.status);
    const at = statusFields(status, job.rank); // where it was, before the slot says `failed`
    Atomics.store(status, job.rank * STATUS_FIELDS + Status.state, RankState.failed);
    const msg: FromWorker = {
      type: 'error',
      at,
      rank: job.rank,
      where: state.runtime?.where ?? 'setup',
      message: err?.message ?? String(e),
    };
    if (err?.stack) msg.stack = err.stack;
    post(msg);
  }
}

/** Closes the run's ports once every rank is done (closing earlier could drop messages in flight). */
function release(): void {
  if (!current) return;
  for (const p of current.job.ports) p?.close();
  current = undefined;
}

port.on('message', (msg: ToWorker) => {
  if (msg.type === 'run') void run(msg.job);
  else if (msg.type === 'phase') current?.startBackward();
  else if (msg.type === 'release') release();
});

post({ type: 'ready' });

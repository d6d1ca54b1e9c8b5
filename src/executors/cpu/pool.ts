/**
 * Starting CPU runtime workers, and an optional pool that keeps them between runs.
 *
 * A worker boots from eval'd code (core/worker-boot.ts: the worker module bundled by esbuild under
 * tsx, the compiled `.js` from `dist/`). Booting still costs tens of milliseconds per worker, which
 * dominates small runs: a {@link CpuWorkerPool} amortises it over many runs (the conformance suite).
 */
import { Worker } from 'node:worker_threads';
import { workerBootCode } from '../../core/worker-boot.ts';
import type { FromWorker } from './protocol.ts';

const HERE = import.meta.url;
const WORKER_URL = new URL(HERE.endsWith('.ts') ? './worker.ts' : './worker.js', HERE).href;

let live = 0;

/** Worker threads of the CPU runtime that started and have not exited (tests check none leak). */
export function liveWorkers(): number {
  return live;
}

/** Boots one worker and resolves once its module is loaded (it posts `ready`). */
export function spawnWorker(): Promise<Worker> {
  return new Promise((resolve, reject) => {
    const w = new Worker(workerBootCode(WORKER_URL), { eval: true });
    live++;
    w.once('exit', () => {
      live--;
    });
    const onMessage = (m: FromWorker): void => {
      if (m.type !== 'ready') return;
      cleanup();
      resolve(w);
    };
    const onError = (e: Error): void => {
      cleanup();
      void w.terminate();
      reject(new Error(`a CPU runtime worker failed to start: ${e.message}`));
    };
    const onExit = (code: number): void => {
      cleanup();
      reject(new Error(`a CPU runtime worker exited with code ${code} while starting`));
    };
    const cleanup = (): void => {
      w.off('message', onMessage);
      w.off('error', onError);
      w.off('exit', onExit);
    };
    w.on('message', onMessage);
    w.on('error', onError);
    w.on('exit', onExit);
  });
}

/** Boots `n` workers in parallel; on any failure terminates the ones that started. */
export async function spawnWorkers(n: number): Promise<Worker[]> {
  const results = await Promise.allSettled(Array.from({ length: n }, () => spawnWorker()));
  const ok = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const bad = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (bad) {
    await Promise.all(ok.map((w) => w.terminate()));
    throw bad.reason;
  }
  return ok;
}

/**
 * Idle workers kept between runs. A run takes workers with {@link acquire}; after a successful run
 * the executor gives them back with {@link release}; after any failure it terminates them. Idle
 * workers do not keep the process alive; {@link close} terminates them.
 */
export class CpuWorkerPool {
  private idle: Worker[] = [];
  private closed = false;

  /** `n` ready workers (idle ones first, new ones booted as needed). */
  async acquire(n: number): Promise<Worker[]> {
    if (this.closed) throw new Error('the worker pool is closed');
    this.idle = this.idle.filter((w) => w.threadId !== -1); // drop workers that died while idle
    const take = this.idle.splice(0, Math.min(n, this.idle.length));
    let fresh: Worker[] = [];
    try {
      fresh = await spawnWorkers(n - take.length);
    } catch (e) {
      this.idle.push(...take);
      throw e;
    }
    const all = [...take, ...fresh];
    for (const w of all) w.ref();
    return all;
  }

  /** Returns healthy workers to the pool. */
  release(workers: Worker[]): void {
    if (this.closed) {
      for (const w of workers) void w.terminate();
      return;
    }
    for (const w of workers) w.unref();
    this.idle.push(...workers);
  }

  /** Number of idle workers. */
  get size(): number {
    return this.idle.length;
  }

  /** Terminates every idle worker; the pool cannot be used afterwards. */
  async close(): Promise<void> {
    this.closed = true;
    const all = this.idle;
    this.idle = [];
    await Promise.all(all.map((w) => w.terminate()));
  }
}

/**
 * Starting the N Python worker processes of a torch run on this machine and watching them.
 *
 * Each process gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (Debian's
 * torchrun is broken, so we launch ourselves) and NVLink multicast switched off. When any process
 * fails, every other one is ended at once (SIGTERM, then SIGKILL), so a dead peer never leaves the
 * rest blocked in a receive; an overall deadline does the same for a run that stops making progress.
 * A worker reports user errors as a line `FCP_ERROR {"code", "message"}`, raised here as FcpError.
 * Workers never outlive this process (issue 11 item 11): SIGINT/SIGTERM/SIGHUP here kill them
 * first; if this process is killed outright, each worker ends itself (its stdin pipe closes, and
 * on Linux its parent-death signal fires).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { isErrorCode } from '../../core/codes.ts';
import { type ErrorCode, FcpError, issue } from '../../core/issues.ts';
import { pythonPackageRoot } from './python.ts';

/** Environment that keeps NVLink multicast off in every process we start (shared GPU hosts). */
export const NO_MULTICAST_ENV = {
  NCCL_NVLS_ENABLE: '0',
  TORCH_SYMM_MEM_DISABLE_MULTICAST: '1',
  NVSHMEM_DISABLE_NVLS: '1',
} as const;

/** Options of {@link launchWorkers}. */
export interface LaunchOptions {
  python: string;
  nproc: number;
  /** Arguments after `-m fcp_torch.worker`. */
  args: readonly string[];
  /** Fail the run after this many ms (default 600000). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Extra environment for every worker. */
  env?: Record<string, string>;
  /** Called with the process ids once every worker is started (tests check that all end). */
  onSpawn?: (pids: number[]) => void;
}

/** What each worker printed (stderr kept for error reports). */
export interface WorkerLogs {
  stderr: string[];
}

/** A free TCP port on the loopback interface. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

const TAIL = 4000;

/** Signals that end a run and its workers. */
const SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Environment of one worker. */
export function workerEnv(rank: number, nproc: number, port: number, extra: Record<string, string> = {}) {
  const root = pythonPackageRoot();
  const pp = process.env.PYTHONPATH;
  return {
    ...process.env,
    ...NO_MULTICAST_ENV,
    RANK: String(rank),
    LOCAL_RANK: String(rank),
    WORLD_SIZE: String(nproc),
    LOCAL_WORLD_SIZE: String(nproc),
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(port),
    PYTHONPATH: pp ? `${root}:${pp}` : root,
    PYTHONUNBUFFERED: '1',
    OMP_NUM_THREADS: process.env.OMP_NUM_THREADS ?? '1',
    ...extra,
  };
}

/**
 * Runs the workers to completion. Resolves with their logs when all exit 0; rejects with FcpError
 * (`run.<code>` from a worker's FCP_ERROR line, `run.rankFailed`, `run.timeout`, `run.aborted`)
 * after ending every process.
 */
export async function launchWorkers(o: LaunchOptions): Promise<WorkerLogs> {
  const port = await freePort();
  const procs: ChildProcess[] = [];
  const stderr: string[] = Array.from({ length: o.nproc }, () => '');
  const exited: (number | null | undefined)[] = Array.from({ length: o.nproc }, () => undefined);
  return new Promise<WorkerLogs>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const killAll = (): void => {
      for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
      const hard = setTimeout(() => {
        for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
      }, 2000);
      hard.unref();
    };
    const finish = (err?: FcpError): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      removeSignalHandlers();
      o.signal?.removeEventListener('abort', onAbort);
      if (err) {
        killAll();
        // Resolve the rejection only once every process is gone, so callers never leak children.
        const wait = (): void => {
          if (procs.every((p) => p.exitCode !== null || p.signalCode !== null)) reject(err);
          else setTimeout(wait, 20);
        };
        wait();
      } else resolve({ stderr });
    };
    const onAbort = (): void => finish(new FcpError(issue('run.aborted', 'the run was cancelled')));
    o.signal?.addEventListener('abort', onAbort);
    // SIGINT/SIGTERM/SIGHUP of this process: end every worker at once, then let the signal do what
    // it would have done (the workers run in their own process group, so a terminal's Ctrl-C
    // reaches only us). SIGKILL cannot be caught: then each worker sees its stdin pipe close and
    // its parent-death signal fire (python/fcp_torch/worker.py), and ends itself.
    const onSignal = (sig: NodeJS.Signals): void => {
      for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
      removeSignalHandlers();
      process.kill(process.pid, sig);
    };
    const handlers = SIGNALS.map((sig) => [sig, () => onSignal(sig)] as const);
    const removeSignalHandlers = (): void => {
      for (const [sig, h] of handlers) process.removeListener(sig, h);
    };
    for (const [sig, h] of handlers) process.on(sig, h);
    timer = setTimeout(
      () =>
        finish(
          new FcpError(
            issue(
              'run.timeout',
              `the torch run did not finish within ${Number(((o.timeoutMs ?? 600000) / 1000).toPrecision(6))} s; all ranks were ended`,
            ),
          ),
        ),
      o.timeoutMs ?? 600000,
    );
    for (let r = 0; r < o.nproc; r++) {
      const p = spawn(o.python, ['-m', 'fcp_torch.worker', ...o.args], {
        env: {
          ...workerEnv(r, o.nproc, port, o.env),
          FCP_PARENT_PID: String(process.pid),
          FCP_WATCH_STDIN: '1',
        },
        // stdin: a pipe we never write to nor close; it reaches EOF only when this process is gone.
        stdio: ['pipe', 'ignore', 'pipe'],
        detached: true,
      });
      procs.push(p);
      p.stderr?.setEncoding('utf8');
      p.stderr?.on('data', (chunk: string) => {
        stderr[r] = (stderr[r] + chunk).slice(-TAIL * 4);
      });
      p.on('error', (e) =>
        finish(new FcpError(issue('run.spawn', `cannot start ${o.python}: ${e.message}`, 'python'))),
      );
      p.on('exit', (code, sig) => {
        exited[r] = code;
        if (settled) return;
        if (code === 0) {
          if (exited.every((c) => c === 0)) finish();
          return;
        }
        finish(workerError(r, code, sig, stderr[r] ?? ''));
      });
    }
    o.onSpawn?.(procs.map((p) => p.pid ?? -1));
  });
}

/** The error a failed worker stands for: its FCP_ERROR line if any, else its exit and stderr tail. */
export function workerError(
  rank: number,
  code: number | null,
  sig: NodeJS.Signals | null,
  err: string,
): FcpError {
  for (const line of err.split('\n')) {
    if (!line.startsWith('FCP_ERROR ')) continue;
    try {
      const e = JSON.parse(line.slice('FCP_ERROR '.length)) as { code: string; message: string };
      // A code of an undeclared family from Python is itself a bug there: keep it visible, coded.
      const code = isErrorCode(e.code) ? e.code : `run.worker.${e.code}`;
      return new FcpError({ ...issue(code as ErrorCode, `rank ${rank}: ${e.message}`), rank });
    } catch {
      // fall through to the generic report
    }
  }
  const tail = err.trim().split('\n').slice(-12).join('\n');
  const how = sig ? `was killed by ${sig}` : `exited with status ${code}`;
  return new FcpError(
    issue(
      'run.rankFailed',
      `rank ${rank} ${how}; all ranks were ended${tail ? `. Its last output:\n${tail.slice(-TAIL)}` : ''}`,
    ),
  );
}

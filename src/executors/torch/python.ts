/**
 * Finding a Python interpreter that can `import torch`, and where the `fcp_torch` package lives.
 *
 * Candidates, in order: `$FCP_PYTHON` (alone, when set), else `/usr/bin/python3` (Debian's
 * python3-torch installs there, while a `python3` earlier on PATH may be another interpreter
 * without torch), then `python3`. A probe tells "slow" (timed out, tried again) from "absent"
 * (not installed, ImportError) and caches only definite answers.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fail } from '../../core/issues.ts';

/** What a probe of one interpreter found. */
export interface PythonInfo {
  /** Command that runs it. */
  readonly python: string;
  readonly torch: string;
  readonly cuda: boolean;
  readonly cudaDevices: number;
  readonly gloo: boolean;
  readonly nccl: boolean;
}

/** Folder holding the `fcp_torch` package (`python/` at the package root; works from src/ and dist/). */
export function pythonPackageRoot(): string {
  return fileURLToPath(new URL('../../../python', import.meta.url));
}

const PROBE = [
  'import json, torch, torch.distributed as d',
  'print(json.dumps({"torch": torch.__version__, "cuda": torch.cuda.is_available(),',
  ' "cudaDevices": torch.cuda.device_count(), "gloo": d.is_available() and d.is_gloo_available(),',
  ' "nccl": d.is_available() and d.is_nccl_available()}))',
].join('\n');

/** Why an interpreter cannot run the torch executor. */
export type ProbeFailure =
  /** The command does not exist. */
  | 'missing'
  /** It runs but `import torch` raises ImportError / ModuleNotFoundError. */
  | 'noTorch'
  /** It did not answer within the timeout, on every attempt: slow (a loaded machine), not absent. */
  | 'timeout'
  /** Anything else (a crash, garbage on stdout): the detail says what. */
  | 'failed';

/** What a probe of one interpreter found. */
export type ProbeResult = { ok: true; info: PythonInfo } | { ok: false; why: ProbeFailure; detail: string };

/** Options of {@link probePythonDetailed}. */
export interface ProbeOptions {
  /** Per attempt (default $FCP_PROBE_TIMEOUT_MS or 120000: importing torch takes 10-30 s on a loaded 2-core machine). */
  timeoutMs?: number;
  /** Attempts when an attempt times out (default 2). */
  attempts?: number;
}

// Only definite answers are cached (found, not installed, no torch); a timeout or crash is tried
// again by the next caller: a probe that once hit a loaded machine must not make every later torch
// suite skip (issue 11 item 5).
const cache = new Map<string, ProbeResult>();

function probeTimeoutMs(o: ProbeOptions): number {
  if (o.timeoutMs !== undefined) return o.timeoutMs;
  const env = Number(process.env.FCP_PROBE_TIMEOUT_MS);
  return Number.isFinite(env) && env > 0 ? env : 120000;
}

/** Probes one interpreter: found, or why not (see {@link ProbeFailure}). */
export function probePythonDetailed(python: string, o: ProbeOptions = {}): ProbeResult {
  const hit = cache.get(python);
  if (hit) return hit;
  let res: ProbeResult;
  if (python.includes('/') && !existsSync(python))
    res = { ok: false, why: 'missing', detail: `${python} does not exist` };
  else {
    const attempts = Math.max(1, o.attempts ?? 2);
    const timeout = probeTimeoutMs(o);
    res = { ok: false, why: 'timeout', detail: '' };
    for (let a = 0; a < attempts; a++) {
      res = probeOnce(python, timeout);
      if (res.ok || res.why !== 'timeout') break;
    }
  }
  if (res.ok || res.why === 'missing' || res.why === 'noTorch') cache.set(python, res);
  return res;
}

function probeOnce(python: string, timeoutMs: number): ProbeResult {
  const r = spawnSync(python, ['-c', PROBE], { encoding: 'utf8', timeout: timeoutMs });
  const err = r.error as NodeJS.ErrnoException | undefined;
  if (err?.code === 'ENOENT') return { ok: false, why: 'missing', detail: `${python} is not installed` };
  if (err?.code === 'ETIMEDOUT' || (r.signal === 'SIGTERM' && r.status === null))
    return {
      ok: false,
      why: 'timeout',
      detail: `${python} did not finish importing torch within ${timeoutMs / 1000} s (a loaded machine? raise FCP_PROBE_TIMEOUT_MS)`,
    };
  const stderr = (r.stderr ?? '').trim();
  if (r.status !== 0) {
    if (/(ModuleNotFoundError|ImportError)\b.*\btorch\b/.test(stderr))
      return { ok: false, why: 'noTorch', detail: `${python} cannot import torch` };
    return {
      ok: false,
      why: 'failed',
      detail: `${python} failed probing torch (${r.signal ? `killed by ${r.signal}` : `exit ${r.status}`}): ${stderr.split('\n').slice(-3).join(' ')}`,
    };
  }
  try {
    const j = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as Omit<PythonInfo, 'python'>;
    return { ok: true, info: { python, ...j } };
  } catch {
    return { ok: false, why: 'failed', detail: `${python} printed no probe answer: ${r.stdout.slice(-200)}` };
  }
}

/** Probes one interpreter (definite answers cached); null when it cannot run torch. */
export function probePython(python: string): PythonInfo | null {
  const r = probePythonDetailed(python);
  return r.ok ? r.info : null;
}

/**
 * Candidate interpreters, in order of preference. `$FCP_PYTHON`, when set, is the only one: a
 * user (or a test) who names an interpreter must not silently get another.
 */
export function pythonCandidates(explicit?: string): string[] {
  if (explicit) return [explicit];
  if (process.env.FCP_PYTHON) return [process.env.FCP_PYTHON];
  return ['/usr/bin/python3', 'python3'];
}

/** The first candidate with torch, or null. */
export function findTorchPython(explicit?: string): PythonInfo | null {
  return findTorchPythonDetailed(explicit).info;
}

/** The first candidate with torch, or what each candidate's probe found. */
export function findTorchPythonDetailed(explicit?: string): {
  info: PythonInfo | null;
  failures: { python: string; why: ProbeFailure; detail: string }[];
} {
  const failures: { python: string; why: ProbeFailure; detail: string }[] = [];
  for (const p of pythonCandidates(explicit)) {
    const r = probePythonDetailed(p);
    if (r.ok) return { info: r.info, failures };
    failures.push({ python: p, why: r.why, detail: r.detail });
  }
  return { info: null, failures };
}

/** True under CI (`CI=1` or `CI=true`): missing dependencies fail suites instead of skipping them. */
export function underCi(): boolean {
  const v = (process.env.CI ?? '').toLowerCase();
  return v === '1' || v === 'true';
}

const INSTALL = 'install it (Debian: apt-get install python3-torch) or set FCP_PYTHON';

/**
 * For test suites of the torch runtime: `false` when a Python with torch was found, else the skip
 * reason. Under CI (see {@link underCi}) a missing, failing or timed-out probe is an error instead
 * (throws FcpError `run.noTorch` naming the apt package), so a CI run never passes by skipping.
 */
export function torchSuiteSkip(): string | false {
  const { info, failures } = findTorchPythonDetailed();
  if (info) return false;
  const why = failures.map((f) => f.detail).join('; ');
  if (underCi())
    fail(
      'run.noTorch',
      `CI=${process.env.CI}: the torch runtime tests need Python with torch (${why}); ${INSTALL}`,
      'python',
    );
  return `no Python with torch (${why}); ${INSTALL}`;
}

/** Like {@link findTorchPython} but throws FcpError `run.noTorch` with what to install. */
export function requireTorchPython(explicit?: string): PythonInfo {
  const { info, failures } = findTorchPythonDetailed(explicit);
  if (!info) {
    const slow = failures.length > 0 && failures.every((f) => f.why === 'timeout');
    fail(
      slow ? 'run.pythonTimeout' : 'run.noTorch',
      `no Python with torch found (${failures.map((f) => f.detail).join('; ')}); ${slow ? 'the machine may be overloaded: try again or raise FCP_PROBE_TIMEOUT_MS' : INSTALL}`,
      'python',
    );
  }
  return info;
}

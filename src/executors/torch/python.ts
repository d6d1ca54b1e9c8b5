/**
 * Finding a Python interpreter that can `import torch`, and where the `fcp_torch` package lives.
 *
 * Candidates, in order: `$FCP_PYTHON`, `/usr/bin/python3` (Debian's python3-torch installs there,
 * while a `python3` earlier on PATH may be another interpreter without torch), then `python3`.
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

const cache = new Map<string, PythonInfo | null>();

/** Probes one interpreter (cached); null when it cannot import torch. */
export function probePython(python: string): PythonInfo | null {
  if (cache.has(python)) return cache.get(python) ?? null;
  let info: PythonInfo | null = null;
  if (!python.includes('/') || existsSync(python)) {
    const r = spawnSync(python, ['-c', PROBE], { encoding: 'utf8', timeout: 60000 });
    if (r.status === 0) {
      try {
        const j = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as Omit<PythonInfo, 'python'>;
        info = { python, ...j };
      } catch {
        info = null;
      }
    }
  }
  cache.set(python, info);
  return info;
}

/** Candidate interpreters, in order of preference. */
export function pythonCandidates(explicit?: string): string[] {
  const out: string[] = [];
  if (explicit) return [explicit];
  if (process.env.FCP_PYTHON) out.push(process.env.FCP_PYTHON);
  out.push('/usr/bin/python3', 'python3');
  return [...new Set(out)];
}

/** The first candidate with torch, or null. */
export function findTorchPython(explicit?: string): PythonInfo | null {
  for (const p of pythonCandidates(explicit)) {
    const info = probePython(p);
    if (info) return info;
  }
  return null;
}

/** Like {@link findTorchPython} but throws FcpError `run.noTorch` with what to install. */
export function requireTorchPython(explicit?: string): PythonInfo {
  const info = findTorchPython(explicit);
  if (!info)
    fail(
      'run.noTorch',
      `no Python with torch found (tried ${pythonCandidates(explicit).join(', ')}); install it (Debian: apt-get install python3-torch) or set FCP_PYTHON`,
      'python',
    );
  return info;
}

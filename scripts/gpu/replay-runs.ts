/**
 * The rank programs the H200 script replayed (scripts/gpu/h200.py writes them to
 * docs/results-gpu/h200-run*.json), read by the simulator checks (bench/simulator-check.ts,
 * scripts/gpu/sim-check.ts).
 */
import { existsSync, readFileSync } from 'node:fs';

/** One replayed rank program and its measured times. */
export interface ReplayRun {
  rank: number;
  which: string;
  kernel: string;
  forward_ms: number;
  backward_ms: number;
  kernel_only_ms?: Record<string, number> | null;
}

/**
 * Replayed runs per plan name (plans in scripts/gpu/plans/<name>.json.gz); run 2 overrides run 1.
 * `root` is the repository root (ends with '/'); with `skipMissing`, an absent results file is
 * passed over instead of failing.
 */
export function readReplayRuns(root: string, skipMissing = false): Map<string, ReplayRun[]> {
  const runs = new Map<string, ReplayRun[]>();
  for (const f of ['h200-run1.json', 'h200-run2.json']) {
    const path = `${root}docs/results-gpu/${f}`;
    if (skipMissing && !existsSync(path)) continue;
    const r = JSON.parse(readFileSync(path, 'utf8')) as { replay?: Record<string, { runs?: ReplayRun[] }> };
    for (const [name, v] of Object.entries(r.replay ?? {})) if (v.runs?.length) runs.set(name, v.runs);
  }
  return runs;
}

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
  /** Which results file it came from (1, 2, 3). */
  run: number;
}

/** Results files, oldest first; a later run supersedes an earlier one per (plan, rank choice, kernel). */
const RUN_FILES = ['h200-run1.json', 'h200-run2.json', 'h200-run3.json'];

/**
 * Replayed runs per plan name (plans in scripts/gpu/plans/<name>.json.gz). A later run overrides an
 * earlier one per (plan, heaviest/median, kernel); entries the script skipped (time budget) are
 * passed over, so an older measurement stays where the newer run did not reach. Runs 1-2 used the
 * FCP planner before time-balanced placement: their FCP entries are superseded by run 3.
 * `root` is the repository root (ends with '/'); with `skipMissing`, an absent results file is
 * passed over instead of failing. `files`: other results files (later ones override earlier ones);
 * `mode`: only the runs of this replay mode (runs 9 and later time several per rank).
 */
export function readReplayRuns(
  root: string,
  skipMissing = false,
  files: readonly string[] = RUN_FILES,
  mode: string | null = null,
): Map<string, ReplayRun[]> {
  const byPlan = new Map<string, Map<string, ReplayRun>>();
  files.forEach((f, i) => {
    const path = `${root}docs/results-gpu/${f}`;
    if (skipMissing && !existsSync(path)) return;
    const r = JSON.parse(readFileSync(path, 'utf8')) as {
      replay?: Record<string, { runs?: (Omit<ReplayRun, 'run'> & { mode?: string })[] }>;
    };
    for (const [name, v] of Object.entries(r.replay ?? {})) {
      // Runs 9 and later time several runtime modes of one rank: `mode` picks one.
      const measured = (v.runs ?? []).filter(
        (x) => typeof x.forward_ms === 'number' && (mode === null || x.mode === mode),
      );
      if (!measured.length) continue;
      let m = byPlan.get(name);
      if (!m) byPlan.set(name, (m = new Map()));
      for (const x of measured) m.set(`${x.which}/${x.kernel}`, { ...x, run: i + 1 });
    }
  });
  const runs = new Map<string, ReplayRun[]>();
  for (const [name, m] of byPlan) runs.set(name, [...m.values()]);
  return runs;
}

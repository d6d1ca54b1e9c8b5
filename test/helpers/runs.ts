/**
 * How many cases every property test and law suite runs, in one place. `FCP_TEST_SCALE` (default 1)
 * scales all of them (e.g. 0.2 for a quick local run, 5 for a soak); CI runs the defaults.
 */

const scale = Number(process.env.FCP_TEST_SCALE ?? 1);

/** Runs per property test and cases per law, by name. */
const BASE = {
  /** test/laws: cases per (numeric executor, registered planner). */
  lawCpu: 50,
  /** test/laws: cases per fixture planner (references, not products). */
  lawCpuFixture: 16,
  /** test/laws: cases per planner on the torch runtime (gloo, one launch per world size). */
  lawTorch: 4,
  /** test/laws: cases per planner on the simulator. */
  lawSim: 12,
  /** test/laws: random batches per planner for the planner laws. */
  lawPlanner: 24,
} as const;

/** The number of runs of `name`, scaled by FCP_TEST_SCALE (at least 1). */
export function runs(name: keyof typeof BASE): number {
  if (!(Number.isFinite(scale) && scale > 0))
    throw new Error(`FCP_TEST_SCALE must be a positive number (got ${process.env.FCP_TEST_SCALE})`);
  return Math.max(1, Math.round(BASE[name] * scale));
}

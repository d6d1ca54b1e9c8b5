/**
 * How much of mode (b)'s search (index.ts, planForLoaderLayout) a planning budget buys: its token
 * caps (each two placements), its swap variants (each one more tuned pipeline) and the
 * self-tuner's candidates (each one phase pair). The full search is the default (one cap from
 * {@link ONE_CAP_FROM} ranks on, where the caps were measured to buy nothing); a budget given
 * (`planBudgetMs`) picks the richest of {@link LOADER_SEARCHES} whose modelled planning time
 * ({@link loaderSearchMs}) fits it, or the least one. Like the self-tuner's candidate count, this
 * is a size model of the world size, not the clock: the same input and budget give a
 * byte-identical plan on any machine.
 *
 * What each level costs and is worth was measured, not assumed (docs/results.md, "Mode (b)'s
 * planning budget"). Planning time: {@link LoaderSearch.ms}. Simulated MFU, fluid, 3 batches, seeds 1-3, forward/backward
 * against the full search at 16 / 64 / 256 ranks: `least` longtail -0.012/-0.010, -0.022/-0.016,
 * -0.014/-0.007, magi -0.002/0.000, -0.009/-0.007, -0.024/0.000, bimodal -0.008/-0.011,
 * -0.006/-0.004, -0.023/-0.034; `relays` the same but magi 256 -0.012/0.000; `one-cap` longtail
 * -0.002/-0.002, -0.010/-0.013, -0.001/-0.003, magi 0.000/+0.001, 0.000/-0.001, +0.005/0.000,
 * bimodal -0.007/-0.010, 0.000/+0.001, 0.000/0.000.
 */

import { logLogInterpolate } from '../../core/log-log.ts';

/** One level of mode (b)'s search. */
export interface LoaderSearch {
  /** Name recorded in the plan's `meta.loaderLayout.search`. */
  readonly name: 'least' | 'relays' | 'one-cap' | 'full';
  /** Token caps tried, as multiples of the mean tokens per rank; null: every cap of the full list. */
  readonly caps: readonly number[] | null;
  /** Whether swaps anywhere are planned beside swaps inside nodes (one more tuned pipeline). */
  readonly swapsAnywhere: boolean;
  /** Group-size candidates per pipeline; null: as many as the self-tuner's budget rule gives. */
  readonly candidates: number | null;
  /** Whether the two-hop relay candidate is planned (only matters across nodes). */
  readonly relays: boolean;
  /**
   * Measured planning time, ms, at 16 / 64 / 256 / 1024 ranks on the 2-core machine: `npx tsx
   * bench/loader-search.ts` (best of 2 interleaved rounds after a warm-up, mean of `longtail` and
   * `magi`, seed 1) and `... --worlds 1024 --batches longtail --reps 1` (idle machine, 2026-12-05,
   * after session 15's speed-ups; a budget only compares against these, so re-measuring them
   * changes which level a given budget buys, never a plan made without one).
   */
  readonly ms: readonly [number, number, number, number];
}

/**
 * The cap every reduced level keeps: the full search chose it most often (9 of 27 plans, 3 batches
 * x 16/64/256 ranks x seeds 1-3; then 1.2: 5, 1.05: 4).
 */
const ONE_CAP = 1.1;

/** The levels, cheapest first; the last is the full search. */
export const LOADER_SEARCHES: readonly LoaderSearch[] = [
  {
    name: 'least',
    caps: [ONE_CAP],
    swapsAnywhere: false,
    candidates: 1,
    relays: false,
    ms: [74, 32, 226, 1162],
  },
  {
    name: 'relays',
    caps: [ONE_CAP],
    swapsAnywhere: false,
    candidates: 1,
    relays: true,
    ms: [70, 43, 313, 1833],
  },
  {
    name: 'one-cap',
    caps: [ONE_CAP],
    swapsAnywhere: true,
    candidates: null,
    relays: true,
    ms: [145, 149, 718, 4761],
  },
  {
    name: 'full',
    caps: null,
    swapsAnywhere: true,
    candidates: null,
    relays: true,
    ms: [164, 231, 1155, 6629],
  },
];

/** Worlds of the measured points of {@link LoaderSearch.ms}. */
const MEASURED_WORLDS = [16, 64, 256, 1024] as const;

/**
 * Modelled planning time of `level` at `world` ranks: log-log linear between the measured
 * points, extended beyond them along the nearest segment (from 256 to 1024 ranks the time grows
 * as about world^1.3-1.5).
 */
export function loaderSearchMs(level: LoaderSearch, world: number): number {
  return logLogInterpolate(MEASURED_WORLDS, level.ms, world);
}

/**
 * From this many ranks on, mode (b) without a budget runs the `one-cap` search instead of the
 * full one: there the six token caps buy nothing on average over many batches, while they are
 * about two fifths of the planning time (when measured, before session 15's speed-ups: 1430 ->
 * 865 ms at 256 ranks, 7587 -> 5463 ms at 1024; the table above now: 1155 -> 718, 6629 -> 4761). Measured (simulated, fluid, hopper-ib, mode (b), one cap - six caps,
 * mean ± standard error over paired batches, `npx tsx bench/quality-ab.ts --base 02403ba
 * --loader-layout --worlds W --seeds N`, session 15): 256 ranks, 27 batches (3 kinds x seeds 1-9): forward +0.0005 ± 0.0034, backward +0.0003 ±
 * 0.0015; 1024 ranks, 18 batches (seeds 1-6): -0.0001 ± 0.0038, +0.0017 ± 0.0018. At 128 ranks
 * the caps still pay (-0.0031 ± 0.0012, -0.0026 ± 0.0014 with one cap), so below this the
 * default stays the full search.
 */
export const ONE_CAP_FROM = 256;

/**
 * The search mode (b) runs: `pinned` when given; without a budget the full search, or `one-cap`
 * from {@link ONE_CAP_FROM} ranks on; else the richest level whose modelled time fits `budgetMs`
 * at `world` ranks (the least one when none does).
 */
export function loaderSearch(
  world: number,
  budgetMs: number | undefined,
  pinned?: LoaderSearch['name'],
): LoaderSearch {
  if (pinned !== undefined) return LOADER_SEARCHES.find((l) => l.name === pinned)!;
  const full = LOADER_SEARCHES[LOADER_SEARCHES.length - 1]!;
  if (budgetMs === undefined)
    return world >= ONE_CAP_FROM ? LOADER_SEARCHES.find((l) => l.name === 'one-cap')! : full;
  let chosen = LOADER_SEARCHES[0]!;
  for (const level of LOADER_SEARCHES) if (loaderSearchMs(level, world) <= budgetMs) chosen = level;
  return chosen;
}

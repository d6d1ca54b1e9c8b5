/**
 * What FCP's self-tuner (index.ts, tunedPipeline) chooses among: the candidate settings of the
 * two phases per deployment mode, and the size model that says how many of them a planning budget
 * buys (mode (b)'s layout search has its own: loader-search.ts).
 */

/** One setting the self-tuner tries: only knobs of the two phases, so candidates share one placement. */
export interface TuneCandidate {
  readonly coalesce: number;
  readonly fanOut: boolean;
}

/**
 * Settings the self-tuner tries with `fanOut` (in order; the first is the plan without relays):
 * two-hop relays against direct fetches, and the group size (`coalesce`, rounds per group), which
 * decides how soon a relay may follow its feed (one group later: smaller groups, sooner). Which
 * wins depends on the batch (simulated, longtail, mode (b): relays with groups of 4 rounds win at
 * 16 ranks and on some batches at 64, direct fetches elsewhere). These are FCP's counterparts of
 * what the baselines' sweep tunes (MagiAttention: chunk size, overlap degree and its per-node
 * de-duplicating backend).
 */
export const TUNE_CANDIDATES: readonly TuneCandidate[] = [
  { coalesce: 16, fanOut: false },
  { coalesce: 4, fanOut: true },
  { coalesce: 16, fanOut: true },
  { coalesce: 4, fanOut: false },
];

/**
 * Settings the self-tuner tries by default (no `fanOut`): group sizes only, every candidate
 * fetching directly, so a phase's `kv` rounds stay exactly Δ of the direct fetch graph (the law
 * suite's promise; same-slot hand-overs keep the rounds, `kvOrigin`). The first
 * is the untuned default. Groups of 8 rounds were tried too and left out: the estimate often
 * preferred them in mode (a) where they simulated worse (magi, 64 ranks: 0.255 against 0.272
 * forward MFU on seed 1).
 */
export const DEFAULT_CANDIDATES: readonly TuneCandidate[] = [
  { coalesce: 16, fanOut: false },
  { coalesce: 4, fanOut: false },
];

/**
 * Mode (b)'s candidates: groups of 16, 8 and 4 rounds. Without a reshuffle the estimate ranks
 * them well (simulated, mode (b), fluid, 3 batches, fwd/bwd MFU at 16 / 32 / 64 ranks, without and
 * with groups of 8: longtail 0.613/0.478, 0.613/0.489, 0.632/0.505 -> 0.614/0.481, 0.617/0.489,
 * 0.632/0.505; magi 0.607/0.479, 0.618/0.493, 0.591/0.478 -> 0.607/0.478, 0.619/0.493,
 * 0.599/0.478; bimodal equal within 0.001); in mode (a) they were left out (above). Mode (b)
 * plans at least the first two ({@link LOADER_MIN_CANDIDATES}).
 */
export const LOADER_CANDIDATES: readonly TuneCandidate[] = [
  { coalesce: 16, fanOut: false },
  { coalesce: 8, fanOut: false },
  { coalesce: 4, fanOut: false },
];

/**
 * Candidates mode (b)'s full and one-cap searches plan whatever the budget (loader-search.ts; its
 * least searches plan one): its planning is dominated by its twelve capped placements and two swap
 * variants, so a second group size costs one more phase pair, and the
 * choice matters at scale (simulated, fluid, 3 batches, fwd/bwd MFU at 128 / 256 / 1024 ranks,
 * one candidate (16) or two at 256+ and {16, 4} -> {16, 8} at 128; seeds 1-3: longtail
 * 0.615/0.491, 0.610/0.481, 0.580/0.459 -> 0.617/0.491, 0.610/0.483, 0.583/0.459, magi
 * 0.578/0.445, 0.560/0.450, 0.532/0.441 -> 0.578/0.445, 0.568/0.454, 0.539/0.448; held-out
 * seeds 4-6: longtail 0.615/0.490, 0.599/0.473, 0.548/0.434 -> 0.617/0.492, 0.599/0.473,
 * 0.544/0.442, magi 0.610/0.478, 0.581/0.443, 0.560/0.445 -> 0.609/0.477, 0.583/0.445,
 * 0.563/0.449). Groups of 8 alone at 256+ lost 0.030 forward on magi 256 (seeds 4-6).
 */
export const LOADER_MIN_CANDIDATES = 2;

/**
 * Planning time per rank (ms) of what all candidates share (blocks, placement, layout) and of one
 * candidate's two phases: bench/planner.ts at 256 ranks on the idle 2-core machine (62 ms and 111
 * ms), rounded up. A size model, not the clock, decides how many candidates fit the budget, so the
 * same input still gives a byte-identical plan on any machine; the default budget (200 ms) then
 * tunes up to 128 ranks and plans one candidate at 256 and beyond (mode (b): at least
 * {@link LOADER_MIN_CANDIDATES}).
 */
const SHARED_MS_PER_RANK = 0.25;
/** The self-tuner's budget when none is given (mode (a); mode (b) then runs its full search, loader-search.ts). */
export const DEFAULT_BUDGET_MS = 200;
const CANDIDATE_MS_PER_RANK = 0.45;

/** How many of `available` candidates fit `budgetMs` at `world` ranks (at least one). */
export function tuneCandidates(world: number, budgetMs: number, available = TUNE_CANDIDATES.length): number {
  const w = Math.max(1, world);
  const n = Math.floor((budgetMs - SHARED_MS_PER_RANK * w) / (CANDIDATE_MS_PER_RANK * w));
  return Math.max(1, Math.min(available, n));
}

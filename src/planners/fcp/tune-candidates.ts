/**
 * What FCP's self-tuner (tuner.ts, tunedPipeline) chooses among: the candidate settings of the
 * two phases per deployment mode, and the size model that says how many of them a planning budget
 * buys (mode (b)'s layout search has its own: loader-search.ts).
 */

import { logLogInterpolate } from '../../core/log-log.ts';

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

/**
 * Block sizes (tokens; `blockSize`, the largest block before granularity refinement) mode (a)'s
 * self-tuner plans, in order; the first is the default. Each is a whole tuned pipeline (blocks,
 * placement, layout and the group-size candidates), so the budget buys them by
 * {@link blockSizeCandidates}. Which wins depends on the batch: coarse blocks cut fewer K/V ranges
 * and launches, fine ones balance and overlap better. Chosen on seeds 4-9 (simulated, mode (a),
 * hopper-ib fluid, `longtail`/`magi`/`bimodal` x 16/32/64/128 ranks = 72 batches, the planner's
 * estimate choosing, mean forward / backward MFU against 4096 alone): +6144 +0.0066 / +0.0020,
 * +8192 +0.0034 / +0.0019, +2048 +0.0032 / -0.0008, all four +0.0126 / +0.0022. On held-out
 * seeds 10-18 as landed (`npx tsx bench/quality-ab.ts --base 46d9699 --worlds 16,32,64,128
 * --seeds 9 --seed 10 [--network contention | --cluster ratio-5920]`, 108 batches each): fluid
 * +0.0055 ± 0.0018 / +0.0002 ± 0.0012, contention +0.0061 ± 0.0018 / +0.0014 ± 0.0015,
 * ratio-5920 +0.0008 ± 0.0010 / +0.0017 ± 0.0007 (docs/results.md, "Session 16").
 */
export const BLOCK_SIZE_CANDIDATES: readonly number[] = [4096, 6144, 8192, 2048];

/**
 * Measured planning time (ms) of one block size's tuned pipeline in mode (a) at 16 / 64 / 256 /
 * 1024 ranks: `npx tsx bench/planner.ts --worlds 16,64,256,1024 --reps 3` before the block size
 * was tuned (46d9699; column `best`, `longtail` seed 1, 2-core machine, 2026-12-05), the group
 * sizes the default budget buys included (two up to 128 ranks, one beyond). Mode (a)'s per-phase
 * exchanges (placement/phase-swaps.ts, up to 4 nodes) came later and add about 30 ms per block size
 * at 16 ranks; the whole tuned plan still took 173 ms there with four block sizes (session 23,
 * `npx tsx bench/planner.ts --worlds 16,32,64,256,1024,4096 --reps 3`; 157 ms at 32), so the model is left as
 * measured.
 */
const BLOCK_PIPELINE_MS: readonly [number, number, number, number] = [39, 43, 104, 772];
const BLOCK_PIPELINE_WORLDS = [16, 64, 256, 1024] as const;

/** Modelled planning time of one block size's tuned pipeline at `world` ranks (log-log between the measured points). */
export function blockPipelineMs(world: number): number {
  return logLogInterpolate(BLOCK_PIPELINE_WORLDS, BLOCK_PIPELINE_MS, world);
}

/**
 * How many of {@link BLOCK_SIZE_CANDIDATES} mode (a)'s self-tuner plans within `budgetMs` at
 * `world` ranks (at least one), each with `phasePairs` candidates of the two phases (the measured
 * pipeline planned as many of {@link DEFAULT_CANDIDATES} as the default budget buys; more, as with
 * `fanOut`, cost in proportion): a
 * size model of the world size, never the clock, so the same input and budget give a
 * byte-identical plan on any machine. The default budget (200 ms) buys all four up to 64 ranks,
 * two at 128 and one from 256 on.
 */
export function blockSizeCandidates(world: number, budgetMs: number, phasePairs?: number): number {
  const measured = tuneCandidates(world, DEFAULT_BUDGET_MS, DEFAULT_CANDIDATES.length);
  const perSize = (blockPipelineMs(world) * Math.max(1, phasePairs ?? measured)) / measured;
  const n = Math.floor(budgetMs / perSize);
  return Math.max(1, Math.min(BLOCK_SIZE_CANDIDATES.length, n));
}

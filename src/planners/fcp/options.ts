/**
 * Options of the FCP planner: defaults in one place, validated up front so that planning never
 * starts on an option it cannot honour. User mistakes become {@link FcpError}s with codes
 * `option.<name>` (every problem found is listed, not just the first).
 */
import { FcpError, type FcpIssue, issue } from '../../core/issues.ts';
import { limitIssue } from '../../core/limits.ts';
import type { Calibration } from '../../cost/calibration.ts';
import type { PlannerOptions } from '../types.ts';
import { LOADER_SEARCHES, type LoaderSearch } from './loader-search.ts';

/** What the distributor balances: modelled kernel time (default) or attended pairs (the paper's load). */
export type BalanceMode = 'time' | 'pairs';

/** Mode (b)'s token-swap variants of the loader layout ({@link FcpPlannerOptions.loaderSwaps}). */
export const LOADER_SWAPS = ['node', 'any', 'node-long', 'any-long'] as const;
/** One of {@link LOADER_SWAPS}. */
export type LoaderSwaps = (typeof LOADER_SWAPS)[number];

/** FCP-only knobs beyond the shared {@link PlannerOptions} bag (library callers, tests, benches). */
export interface FcpPlannerOptions extends PlannerOptions {
  /** Floor of the per-sequence block size refinement, in tokens (default 256, capped at blockSize). */
  minBlockSize?: number;
  /** No placement unit may carry more than this fraction of the per-rank average compute (default 1/16). */
  maxUnitShare?: number;
  /** Ablation: place every unit by plain LPT, without keeping a sequence's units together. */
  noAffinity?: boolean;
  /**
   * Experimental node packing (placement/distribute.ts; default false): a long sequence whose
   * nodes are full opens the node with the most room, and when no rank takes its unit under the
   * average it stays on a node it already uses. Simulated longtail: mode (b) +1.5-3% forward MFU at
   * 16-64 ranks, but -5% (a) / -13% (b) at 256 (more K/V bytes), hence off.
   */
  nodePacking?: boolean;
  /**
   * Mode (a): swaps of a sequence's blocks that spread the cross-node reshuffle over the ranks'
   * NICs (placement/nic-swaps.ts). Always on, over paired batches: +0.009 / +0.004 forward /
   * backward MFU at 32 ranks, none at 16 (magi loses), within noise at 64-256 (docs/results.md,
   * "Session 24"). Unset, the self-tuner plans its chosen candidate once more with them where its
   * budget buys two or more candidates, and keeps the lower estimate (tuner.ts; "Session 45");
   * true: always; false: never. The resolved options read unset as false.
   */
  nicSwaps?: boolean;
  /**
   * Ablation (default false): no two-hop `in` across nodes. By default, under PXN routing, a piece
   * of the reshuffle that crosses nodes may first go to a node mate of its home, which forwards it
   * over NVLink (transfers/relays.ts).
   */
  noInRelays?: boolean;
  /**
   * Ablation (default false): under PXN routing keep the rounds as placed, though two messages
   * across nodes may then leave by one rail NIC in a round (transfers/rail-rounds.ts splits them).
   */
  noRailRounds?: boolean;
  /**
   * Ablation (default false): no two-hop `out` across nodes. By default, under PXN routing, an
   * output (O forward, dQ,dK,dV backward) that crosses nodes on its way back to its user rank may
   * first go to a node mate of that rank, which forwards it over NVLink (transfers/relays.ts).
   */
  noOutRelays?: boolean;
  /** Upper bound on refinement steps after the greedy placement (default max(2048, 16 x world)). */
  refineSteps?: number;
  /**
   * Mode (a): exchanges that even the home layout phase by phase (placement/phase-swaps.ts); -1
   * (default): 32 up to 4 nodes, none beyond; 0: none; n: at most n at any scale.
   */
  phaseSwaps?: number;
  /**
   * Mode (b): which token swaps of the loader layout to keep (index.ts, planForLoaderLayout):
   * `node` (inside nodes, or to ranks that fetch the sequence already) or `any`, each with at most
   * 32 exchanges, or `node-long` / `any-long`, the same refinements carried on to 128. Unset: the
   * self-tuner plans `node` and `any` and, where one used all 32 exchanges, its long variant with
   * the candidate that one chose, and keeps the least estimate (with `tune: false`, the modelled
   * choice between `node` and `any`).
   * The choice is recorded in `meta.loaderLayout.swaps`, so a tuned plan can be planned again alone.
   */
  loaderSwaps?: LoaderSwaps;
  /**
   * Mode (b): pins the level of the layout search (loader-search.ts) instead of sizing it by the
   * budget; recorded in `meta.loaderLayout.search`, so a plan can be planned again alone (and the
   * levels timed: bench/loader-search.ts).
   */
  loaderSearch?: LoaderSearch['name'];
  /** Kernel calibration of the time model (default: the shipped H200 tables, loaded once). */
  calibration?: Calibration;
  /**
   * Two-hop K/V fan-out inside nodes (transfers/fetch.ts). Unset: direct fetches, except that in
   * mode (b) across nodes the self-tuner also tries one plan with relays (tuner.ts, loaderRelays);
   * true: the tuner tries relays with every group size (it may still choose direct fetches);
   * false: never relays.
   */
  fanOut?: boolean;
  /** Self-tuning of the group size (in mode (a) also of the block size unless `blockSize` is given; with `fanOut`, of relays) within `planBudgetMs` (tuner.ts; default true). */
  tune?: boolean;
  /**
   * Planning budget the self-tuner sizes its candidate count by, ms (default 200). Mode (b): when
   * given, it also sizes the layout search (loader-search.ts); unset, mode (b) runs its full search
   * (one token cap from 256 ranks, loader-search.ts ONE_CAP_FROM).
   */
  planBudgetMs?: number;
}

/** Fully resolved FCP options (every field set). */
export interface FcpOptions {
  /** Tokens per block of sequences that need no refinement. */
  readonly blockSize: number;
  /** Smallest block the refinement may cut (min(256, blockSize) by default). */
  readonly minBlockSize: number;
  /** Largest unit compute as a fraction of the per-rank average. */
  readonly maxUnitShare: number;
  /** Locality tie-break window: ranks within tolerance x (average per-rank compute) of the least load. */
  readonly tolerance: number;
  /** Rounds merged into one group (one compute op per rank per group). */
  readonly coalesce: number;
  /**
   * Rounds sharing one concurrent transfer call: a group's rounds run in chained comm groups of
   * this many rounds (1: at most one send and one receive in flight per rank and link class). >= coalesce: one
   * transfer call per group, no chains in the plan.
   */
  readonly commCoalesce: number;
  /**
   * Rounds a group of the backward's pushes past its last `kv` group may hold (at most
   * `commCoalesce`; not more than `coalesce` when chained): no op waits for those groups, so their
   * size paces no compute (backward.ts, PUSH_GROUPS).
   */
  readonly pushCoalesce: number;
  readonly noPipeline: boolean;
  readonly rounds: 'matching' | 'naive';
  readonly noReshuffleOverlap: boolean;
  /** Ablation: mode (a)'s backward keeps its pushes on the one comm stream (backward.ts, pushStream). */
  readonly noPushStream: boolean;
  readonly noLocality: boolean;
  readonly noAffinity: boolean;
  readonly nodePacking: boolean;
  readonly nicSwaps: boolean;
  readonly noInRelays: boolean;
  readonly noOutRelays: boolean;
  readonly noRailRounds: boolean;
  readonly fixedBlocks: boolean;
  readonly refineSteps: number;
  /** Mode (a)'s per-phase exchanges: -1 auto (placement/phase-swaps.ts), 0 none, n at most n. */
  readonly phaseSwaps: number;
  /** Largest square tile side for dense kernels (0: tasks are not tiled). */
  readonly tile: number;
  /** Smallest tile side for the remainder strips (<= tile). */
  readonly minTile: number;
  readonly balance: BalanceMode;
  /** Two-hop K/V: a range fetched over the NIC by one rank of a node is relayed to its node peers over NVLink. */
  readonly fanOut: boolean;
  /** Calibration of the time model; undefined: the default tables. */
  readonly calibration: Calibration | undefined;
}

/** Defaults (refineSteps: -1 means max(2048, 16 x world), resolved by the distributor). */
export const FCP_DEFAULTS: FcpOptions = Object.freeze({
  blockSize: 4096,
  minBlockSize: 512,
  maxUnitShare: 1,
  tolerance: 0.01,
  coalesce: 16,
  commCoalesce: 16,
  pushCoalesce: 16,
  noPipeline: false,
  rounds: 'matching',
  noReshuffleOverlap: false,
  noPushStream: false,
  noLocality: false,
  noAffinity: false,
  nodePacking: false,
  nicSwaps: false,
  noInRelays: false,
  noOutRelays: false,
  noRailRounds: false,
  fixedBlocks: false,
  refineSteps: -1,
  phaseSwaps: -1,
  tile: 4096,
  minTile: 1024,
  balance: 'time',
  fanOut: false,
  calibration: undefined,
});

/**
 * Most rounds a group size option (`coalesce`, `commCoalesce`, `pushCoalesce`) may ask for. The
 * planner's timeline keeps per-rank loads for every comm group of a group (coalesce / commCoalesce
 * of them), so `--coalesce 100000` took 10 s at 256 ranks and `--coalesce 99999999999` stopped
 * with an internal error (bench/fuzz-cli.ts, session 39); a phase at 256 ranks has about 400-1600
 * rounds, so this many in one group is already one group for nearly any plan.
 */
export const MAX_GROUP_ROUNDS = 4096;

const isPosInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1;
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';

/**
 * Fills defaults and validates. Throws FcpError listing every bad option
 * (`option.blockSize`, `option.tolerance`, `option.coalesce`, `option.rounds`, ...).
 */
export function resolveFcpOptions(o: FcpPlannerOptions = {}): FcpOptions {
  const issues: FcpIssue[] = [];
  const d = FCP_DEFAULTS;
  const blockSize = o.blockSize ?? d.blockSize;
  if (!isPosInt(blockSize) || blockSize > 1 << 30)
    issues.push(
      issue(
        'option.blockSize',
        `block size must be a positive integer of tokens (got ${blockSize}); try --block-size 4096`,
        'blockSize',
      ),
    );
  const minRaw = o.minBlockSize ?? d.minBlockSize;
  if (!isPosInt(minRaw))
    issues.push(
      issue(
        'option.minBlockSize',
        `minimum block size must be a positive integer (got ${minRaw})`,
        'minBlockSize',
      ),
    );
  const maxUnitShare = o.maxUnitShare ?? d.maxUnitShare;
  if (typeof maxUnitShare !== 'number' || !(maxUnitShare > 0 && maxUnitShare <= 1))
    issues.push(
      issue('option.maxUnitShare', `maxUnitShare must be in (0, 1] (got ${maxUnitShare})`, 'maxUnitShare'),
    );
  const tolerance = o.tolerance ?? d.tolerance;
  if (typeof tolerance !== 'number' || !(tolerance >= 0 && tolerance < 1))
    issues.push(
      issue(
        'option.tolerance',
        `tolerance must be a fraction in [0, 1) (got ${tolerance}); try --tolerance 0.01`,
        'tolerance',
      ),
    );
  /** A group size option (rounds): an integer in [1, MAX_GROUP_ROUNDS], else an issue naming its flag and a hint. */
  const rounds1 = (key: 'coalesce' | 'commCoalesce' | 'pushCoalesce', flag: string, hint: number): number => {
    const v = o[key] ?? d[key];
    if (!isPosInt(v) || v > MAX_GROUP_ROUNDS)
      issues.push(
        issue(
          `option.${key}`,
          `${flag} must be an integer from 1 to ${MAX_GROUP_ROUNDS} (got ${v}); try --${flag} ${hint}`,
          key,
        ),
      );
    return v;
  };
  const coalesce = rounds1('coalesce', 'coalesce', 16);
  const commCoalesce = rounds1('commCoalesce', 'comm-coalesce', 1);
  const pushCoalesce = rounds1('pushCoalesce', 'push-coalesce', 16);
  const rounds = o.rounds ?? d.rounds;
  if (rounds !== 'matching' && rounds !== 'naive')
    issues.push(issue('option.rounds', `rounds must be matching or naive (got ${String(rounds)})`, 'rounds'));
  const refineSteps = o.refineSteps ?? d.refineSteps;
  if (!(Number.isInteger(refineSteps) && refineSteps >= -1))
    issues.push(
      issue('option.refineSteps', `refineSteps must be an integer >= 0 (got ${refineSteps})`, 'refineSteps'),
    );
  const phaseSwaps = o.phaseSwaps ?? d.phaseSwaps;
  if (!(Number.isInteger(phaseSwaps) && phaseSwaps >= -1))
    issues.push(
      issue(
        'option.phaseSwaps',
        `phaseSwaps must be an integer >= 0, or -1 for the default (got ${phaseSwaps})`,
        'phaseSwaps',
      ),
    );
  // Upper bounds of the step counts (core/limits.ts `steps`): the loops end once no step helps, so
  // `refineSteps: 1e300` planned as usual, and only a bound makes such a typo visible.
  for (const [key, v] of [
    ['refineSteps', refineSteps],
    ['phaseSwaps', phaseSwaps],
  ] as const) {
    const many = typeof v === 'number' ? limitIssue('steps', v, key, key) : undefined;
    if (many !== undefined) issues.push(many);
  }
  const tile = o.tile ?? d.tile;
  if (!(Number.isInteger(tile) && tile >= 0))
    issues.push(
      issue('option.tile', `tile must be an integer >= 0 (got ${tile}); 0 disables tiling`, 'tile'),
    );
  const minTile = o.minTile ?? d.minTile;
  if (!(Number.isInteger(minTile) && minTile >= 1))
    issues.push(issue('option.minTile', `minTile must be a positive integer (got ${minTile})`, 'minTile'));
  const balance = o.balance ?? d.balance;
  if (balance !== 'time' && balance !== 'pairs')
    issues.push(issue('option.balance', `balance must be time or pairs (got ${String(balance)})`, 'balance'));
  const levels: string[] = LOADER_SEARCHES.map((l) => l.name);
  if (o.loaderSearch !== undefined && !levels.includes(o.loaderSearch))
    issues.push(
      issue(
        'option.loaderSearch',
        `loaderSearch must be one of ${levels.join(', ')} (got ${String(o.loaderSearch)})`,
        'loaderSearch',
      ),
    );
  if (o.loaderSwaps !== undefined && !LOADER_SWAPS.includes(o.loaderSwaps))
    issues.push(
      issue(
        'option.loaderSwaps',
        `loaderSwaps must be one of ${LOADER_SWAPS.join(', ')} (got ${String(o.loaderSwaps)})`,
        'loaderSwaps',
      ),
    );
  const flags = [
    'noPipeline',
    'noReshuffleOverlap',
    'noPushStream',
    'noLocality',
    'noAffinity',
    'nodePacking',
    'nicSwaps',
    'noInRelays',
    'noOutRelays',
    'noRailRounds',
    'fixedBlocks',
    'fanOut',
    'tune',
  ] as const;
  const budget = o.planBudgetMs;
  if (budget !== undefined && !(typeof budget === 'number' && budget >= 0 && Number.isFinite(budget)))
    issues.push(
      issue(
        'option.planBudgetMs',
        `plan budget must be a number of milliseconds >= 0 (got ${String(budget)}); try --plan-budget-ms 200`,
        'planBudgetMs',
      ),
    );
  for (const f of flags)
    if (o[f] !== undefined && !isBool(o[f]))
      issues.push(issue(`option.${f}`, `${f} must be true or false (got ${String(o[f])})`, f));
  if (issues.length > 0) throw new FcpError(issues);
  return {
    blockSize,
    minBlockSize: Math.min(minRaw, blockSize),
    maxUnitShare,
    tolerance,
    coalesce,
    commCoalesce,
    pushCoalesce,
    noPipeline: o.noPipeline ?? d.noPipeline,
    rounds,
    noReshuffleOverlap: o.noReshuffleOverlap ?? d.noReshuffleOverlap,
    noPushStream: o.noPushStream ?? d.noPushStream,
    noLocality: o.noLocality ?? d.noLocality,
    noAffinity: o.noAffinity ?? d.noAffinity,
    nodePacking: o.nodePacking ?? d.nodePacking,
    nicSwaps: o.nicSwaps ?? d.nicSwaps,
    noInRelays: o.noInRelays ?? d.noInRelays,
    noOutRelays: o.noOutRelays ?? d.noOutRelays,
    noRailRounds: o.noRailRounds ?? d.noRailRounds,
    fixedBlocks: o.fixedBlocks ?? d.fixedBlocks,
    refineSteps,
    phaseSwaps,
    tile,
    minTile: Math.min(minTile, Math.max(tile, 1)),
    balance,
    fanOut: o.fanOut ?? d.fanOut,
    calibration: o.calibration,
  };
}

/** The options as plain JSON (recorded in the plan's `meta`). */
export function optionsToJson(o: FcpOptions): Record<string, unknown> {
  const {
    calibration,
    commCoalesce,
    pushCoalesce,
    fanOut,
    phaseSwaps,
    nicSwaps,
    noInRelays,
    noOutRelays,
    noRailRounds,
    ...rest
  } = o;
  return {
    ...rest,
    // Recorded only when on (ablations), so plans without them keep their bytes.
    ...(noInRelays ? { noInRelays } : {}),
    ...(noOutRelays ? { noOutRelays } : {}),
    ...(noRailRounds ? { noRailRounds } : {}),
    // Recorded only when on (experimental), so plans without it keep their bytes.
    ...(nicSwaps ? { nicSwaps } : {}),
    // Recorded only when set, so plans made with the default keep their bytes.
    ...(phaseSwaps !== FCP_DEFAULTS.phaseSwaps ? { phaseSwaps } : {}),
    // Recorded only when on, so plans without it keep their bytes.
    ...(fanOut ? { fanOut } : {}),
    // Recorded only when it chains rounds, so plans without chains keep their bytes.
    ...(commCoalesce < o.coalesce ? { commCoalesce } : {}),
    // Recorded only when set, so plans made with the default keep their bytes.
    ...(pushCoalesce !== FCP_DEFAULTS.pushCoalesce ? { pushCoalesce } : {}),
    calibration: calibration ? calibration.sources.map((f) => f.split(/[\\/]/).pop()) : 'default',
  };
}

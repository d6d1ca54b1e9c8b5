/**
 * The FCP planner's command-line options, declared once (src/core/option-spec.ts): the flags of
 * `fcp plan`, `verify`, `compare`, ... and the option tables of README.md and docs/cli.md are
 * generated from this list; the defaults are read from {@link FCP_DEFAULTS}, the values
 * resolveFcpOptions fills in, so they cannot differ.
 */
import type { OptionSpec } from '../../core/option-spec.ts';
import { FCP_DEFAULTS as D } from './options.ts';

/** FCP's options in the order `--help` lists them. */
export const FCP_OPTION_SPECS: readonly OptionSpec[] = [
  {
    key: 'blockSize',
    owner: 'fcp',
    type: 'int',
    default: D.blockSize,
    passDefault: false,
    doc: 'tokens per block (the largest, before granularity refinement); unset, the self-tuner also tries 6144, 8192 and 2048 in mode (a) as its budget allows; given, it is pinned',
  },
  {
    key: 'tolerance',
    owner: 'fcp',
    type: 'number',
    default: D.tolerance,
    doc: 'load tolerance of the locality tie-break (fraction)',
  },
  {
    key: 'coalesce',
    owner: 'fcp',
    type: 'int',
    default: D.coalesce,
    doc: 'rounds merged into one group (one compute launch per rank), 1-4096',
  },
  {
    key: 'commCoalesce',
    owner: 'fcp',
    type: 'int',
    default: D.commCoalesce,
    doc: "rounds sharing one concurrent transfer call, 1-4096; a group's calls run one after another (1: congestion-free on the wire)",
  },
  {
    key: 'pushCoalesce',
    owner: 'fcp',
    type: 'int',
    default: D.pushCoalesce,
    doc: "rounds a group of the backward's pushes after its last fetch group may hold, 1-4096 (at most --comm-coalesce): no compute waits for those groups",
  },
  { key: 'noPipeline', owner: 'fcp', type: 'boolean', doc: 'ablation: all fetches before any compute' },
  {
    key: 'rounds',
    owner: 'fcp',
    type: 'enum',
    values: ['matching', 'naive'],
    default: D.rounds,
    doc: 'ablation: matching (congestion-free) or naive',
  },
  {
    key: 'noReshuffleOverlap',
    owner: 'fcp',
    type: 'boolean',
    doc: 'ablation: no compute while the reshuffle is in flight',
  },
  {
    key: 'noPushStream',
    owner: 'fcp',
    type: 'boolean',
    doc: "ablation: mode (a)'s backward runs its pushes (dK,dV partials, the out reshuffle) on the one comm stream instead of a second",
  },
  { key: 'noLocality', owner: 'fcp', type: 'boolean', doc: 'ablation: no locality-aware tie-break' },
  {
    key: 'nicSwaps',
    owner: 'fcp',
    type: 'boolean',
    doc: "mode (a): swaps of a sequence's blocks that spread the cross-node reshuffle over the ranks' NICs, always (unset: the self-tuner tries them on its chosen candidate where its budget buys two or more, and keeps them on a lower estimate)",
  },
  {
    key: 'noInRelays',
    owner: 'fcp',
    type: 'boolean',
    doc: 'ablation: no two-hop `in` across nodes (by default, under PXN routing, mode (a) may send a piece of its reshuffle to a node mate of its home, which forwards it over NVLink)',
  },
  {
    key: 'noOutRelays',
    owner: 'fcp',
    type: 'boolean',
    doc: 'ablation: no two-hop `out` across nodes (by default, under PXN routing, mode (a) may send an output back through a node mate of its user rank, which forwards it over NVLink)',
  },
  {
    key: 'noRailRounds',
    owner: 'fcp',
    type: 'boolean',
    doc: 'ablation: under PXN routing keep the rounds as placed (by default a round that would put two messages across nodes on one rail NIC is split within its group)',
  },
  {
    key: 'fixedBlocks',
    owner: 'fcp',
    type: 'boolean',
    doc: 'fixed-size blocks only, no granularity refinement',
  },
  {
    key: 'tile',
    owner: 'fcp',
    type: 'int',
    default: D.tile,
    passDefault: false,
    doc: 'square tile side for dense kernels (0: no tiling)',
  },
  {
    key: 'minTile',
    owner: 'fcp',
    type: 'int',
    default: D.minTile,
    passDefault: false,
    doc: 'smallest tile side for remainder strips',
  },
  {
    key: 'phaseSwaps',
    owner: 'fcp',
    type: 'int',
    default: D.phaseSwaps,
    passDefault: false,
    doc: 'mode (a): exchanges of pieces within nodes that even the home layout phase by phase (max forward + max backward); -1: 32 up to 4 nodes, none beyond; 0: none; n: at most n at any scale',
  },
  {
    key: 'loaderLayout',
    owner: 'fcp',
    type: 'boolean',
    doc: 'mode (b), the loader delivers a home layout with equal tokens per rank (within 1% of the mean) once per step; no reshuffle',
  },
  {
    key: 'balance',
    owner: 'fcp',
    type: 'enum',
    values: ['time', 'pairs'],
    default: D.balance,
    passDefault: false,
    doc: 'balance modelled kernel time (time) or attended pairs (pairs)',
  },
  {
    key: 'fanOut',
    owner: 'fcp',
    type: 'boolean',
    doc: 'two-hop K/V: a range one rank of a node fetched over the NIC is relayed to its node peers over NVLink; the self-tuner then also tries plans with relays and keeps the least estimate, at least the relay variant of its one candidate where the budget buys one (without this flag, across nodes: it tries one relay plan, the chosen candidate with relays, in mode (b) and in mode (a) where the budget buys two or more candidates; in mode (a) where it buys one, 256 ranks and more by default, that candidate uses relays)',
  },
  {
    key: 'planBudgetMs',
    owner: 'fcp',
    type: 'number',
    default: 200,
    passDefault: false,
    doc: 'planning budget of the self-tuner, ms: how many candidate plans (group sizes; with --fan-out also relays) it tries, by a size model of the world size (not the clock); 0: the default candidate only (across nodes in mode (a), with relays). With --loader-layout the budget, when given, also sizes the search for the layout (token caps, swap variants; docs/results.md, "Mode (b)\'s planning budget"); unset there: the full search, with one token cap from 256 ranks',
  },
];

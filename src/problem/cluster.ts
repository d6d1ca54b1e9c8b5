/**
 * Cluster specifications for the cost model: GPU peak, SMs reserved for communication, and the
 * network (NVLink inside a node and one NIC per GPU across nodes behind a non-blocking switch, or a
 * torus of neighbour links). Presets by name; every field overridable, validated in one place.
 */
import { FcpError, type FcpIssue, fail, issue } from '../core/issues.ts';

/** Network shape. `switch`: NVLink in a node, per-GPU NICs into a full-bisection fabric. `torus`: links to neighbours only. */
export type Topology = 'switch' | 'torus';

/**
 * How concurrent flows share a port. `fluid`: max-min fair shares of the full capacity, nothing
 * else. `contention`: a NIC port with k concurrent flows keeps only a fraction
 * 1 - contentionLoss * (1 - 1/k) of its bandwidth, and each flow pays contentionMsgUs per other
 * message its busiest NIC port carries in the same group (src/cost/contention.ts; the fit is
 * data/network/contention.json).
 */
export type NetworkModel = 'fluid' | 'contention';

/** The network models, in `--network` order. */
export const NETWORK_MODELS: readonly NetworkModel[] = ['fluid', 'contention'];

/**
 * Which NIC a message across nodes leaves by (switch topology). `direct`: the sender's own NIC
 * (NCCL with `NCCL_P2P_PXN_LEVEL=0`). `pxn`: NCCL's default for point-to-point (`P2P_PXN_LEVEL`
 * 2, "use PXN as much as possible to maximize aggregation", NVIDIA/nccl src/graph/search.cc,
 * `ncclTopoGetNetDev`): the NIC of the sender's node that sits on the receiver's rail (the NIC of
 * the local GPU with the receiver's local index), reached over NVLink through that GPU, which
 * proxies the send; the receiver takes it on its own NIC as before.
 */
export type Routing = 'direct' | 'pxn';

/** The routings, in `--routing` order. */
export const ROUTINGS: readonly Routing[] = ['direct', 'pxn'];

/**
 * Fitted contention parameters (data/network/contention.json; a test checks that they agree):
 * bandwidth lost by a NIC port as its concurrent flows grow, and the per-message cost.
 */
export const DEFAULT_CONTENTION = { contentionLoss: 0.06288, contentionMsgUs: 2.582 } as const;

/** Everything the simulator needs to know about the machine. Bandwidths are per direction. */
export interface ClusterSpec {
  readonly name: string;
  /** Dense bf16 peak per GPU, TFLOP/s (MFU denominator). */
  readonly peakTflops: number;
  /** SMs per GPU and SMs reserved for communication (compute runs on the rest). */
  readonly totalSms: number;
  readonly commSms: number;
  readonly topology: Topology;
  /** GPUs sharing NVLink (switch topology). */
  readonly gpusPerNode: number;
  /** Per-GPU NVLink bandwidth, GB/s. */
  readonly nvlinkGBps: number;
  /** Per-GPU NIC bandwidth across nodes, GB/s. */
  readonly nicGBps: number;
  /** Aggregate NIC bandwidth of a node, GB/s; 0 = no cap beyond the per-GPU NICs. */
  readonly nodeNicGBps: number;
  /** Per-message latency across nodes (switch) or base latency (torus), microseconds. */
  readonly latencyUs: number;
  /** Per-message latency inside a node, microseconds. */
  readonly nvlinkLatencyUs: number;
  /** Torus: bandwidth of each directed neighbour link, GB/s. */
  readonly linkGBps: number;
  /** Torus: latency added per hop, microseconds. */
  readonly hopUs: number;
  /** Torus dimensions (product = world); empty = the most square 2-D torus. */
  readonly torusDims: readonly number[];
  /** How concurrent flows share a port (default `fluid`). */
  readonly network: NetworkModel;
  /** Which NIC a message across nodes leaves by (default `direct`; see {@link Routing}). */
  readonly routing: Routing;
  /** Contention model: fraction of a NIC port's bandwidth lost as its concurrent flows grow, in [0, 1). */
  readonly contentionLoss: number;
  /** Contention model: cost of each further concurrent message on a NIC port, microseconds. */
  readonly contentionMsgUs: number;
}

const HOPPER: ClusterSpec = {
  name: 'hopper-ib',
  peakTflops: 989,
  totalSms: 132,
  commSms: 6,
  topology: 'switch',
  gpusPerNode: 8,
  nvlinkGBps: 400,
  nicGBps: 50,
  nodeNicGBps: 0,
  latencyUs: 10,
  nvlinkLatencyUs: 5,
  linkGBps: 50,
  hopUs: 1,
  torusDims: [],
  network: 'fluid',
  routing: 'direct',
  ...DEFAULT_CONTENTION,
};

/**
 * Presets. `ratio-N` keeps Hopper compute and sets the per-GPU inter-node bandwidth to peak / N
 * (N FLOP per byte: the paper's GPU-X is 5920, GPU-Y 2500); hopper-ib itself is 989e12 / 50e9 =
 * 19780 FLOP per byte. `torus`: a 2-D torus of 50 GB/s neighbour links, no NVLink and no switch.
 */
export const CLUSTER_PRESETS: Record<string, ClusterSpec> = {
  'hopper-ib': HOPPER,
  'ratio-5920': { ...HOPPER, name: 'ratio-5920', nicGBps: round3(989e12 / 5920 / 1e9) },
  'ratio-2500': { ...HOPPER, name: 'ratio-2500', nicGBps: round3(989e12 / 2500 / 1e9) },
  torus: {
    ...HOPPER,
    name: 'torus',
    topology: 'torus',
    gpusPerNode: 1,
    latencyUs: 5,
    linkGBps: 50,
    hopUs: 1,
  },
};

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** Names of the presets. */
export const CLUSTER_NAMES = Object.keys(CLUSTER_PRESETS);

/** Overridable numeric fields. */
export type ClusterOverrides = Partial<Omit<ClusterSpec, 'name'>>;

/** The preset `name` with `overrides` applied, validated. FcpError `cluster.unknown` or `option.<field>`. */
export function resolveCluster(name = 'hopper-ib', overrides: ClusterOverrides = {}): ClusterSpec {
  const base = CLUSTER_PRESETS[name];
  if (!base)
    fail(
      'cluster.unknown',
      `unknown cluster ${JSON.stringify(name)}; choose one of ${CLUSTER_NAMES.join(', ')}`,
      'cluster',
    );
  const c: ClusterSpec = { ...base, ...definedOnly(overrides) };
  const issues: FcpIssue[] = [];
  const pos = (k: keyof ClusterSpec): void => {
    const v = c[k] as number;
    if (!(typeof v === 'number' && Number.isFinite(v) && v > 0))
      issues.push(issue(`option.${k}`, `${k} must be a positive number (got ${v})`, k));
  };
  const nonneg = (k: keyof ClusterSpec): void => {
    const v = c[k] as number;
    if (!(typeof v === 'number' && Number.isFinite(v) && v >= 0))
      issues.push(issue(`option.${k}`, `${k} must be a non-negative number (got ${v})`, k));
  };
  for (const k of ['peakTflops', 'nvlinkGBps', 'nicGBps', 'linkGBps'] as const) pos(k);
  for (const k of ['nodeNicGBps', 'latencyUs', 'nvlinkLatencyUs', 'hopUs', 'contentionMsgUs'] as const)
    nonneg(k);
  if (!NETWORK_MODELS.includes(c.network))
    issues.push(
      issue(
        'option.network',
        `network model must be ${NETWORK_MODELS.join(' or ')} (got ${String(c.network)})`,
        'network',
      ),
    );
  if (!ROUTINGS.includes(c.routing))
    issues.push(
      issue(
        'option.routing',
        `routing must be ${ROUTINGS.join(' or ')} (got ${String(c.routing)})`,
        'routing',
      ),
    );
  if (!(Number.isFinite(c.contentionLoss) && c.contentionLoss >= 0 && c.contentionLoss < 1))
    issues.push(
      issue(
        'option.contentionLoss',
        `contentionLoss must be a number in [0, 1) (got ${c.contentionLoss})`,
        'contentionLoss',
      ),
    );
  if (!Number.isInteger(c.totalSms) || c.totalSms < 1)
    issues.push(
      issue('option.totalSms', `totalSms must be a positive integer (got ${c.totalSms})`, 'totalSms'),
    );
  if (!Number.isInteger(c.commSms) || c.commSms < 0 || c.commSms >= c.totalSms)
    issues.push(
      issue('option.commSms', `commSms must be an integer in [0, totalSms) (got ${c.commSms})`, 'commSms'),
    );
  if (!Number.isInteger(c.gpusPerNode) || c.gpusPerNode < 1)
    issues.push(
      issue(
        'option.gpusPerNode',
        `gpusPerNode must be a positive integer (got ${c.gpusPerNode})`,
        'gpusPerNode',
      ),
    );
  if (c.topology !== 'switch' && c.topology !== 'torus')
    issues.push(
      issue('option.topology', `topology must be switch or torus (got ${String(c.topology)})`, 'topology'),
    );
  if (!c.torusDims.every((d) => Number.isInteger(d) && d >= 1))
    issues.push(
      issue(
        'option.torusDims',
        `torus dimensions must be positive integers (got ${c.torusDims.join('x')})`,
        'torusDims',
      ),
    );
  if (issues.length > 0) throw new FcpError(issues);
  return c;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

/** Compute slowdown of the SMs left to compute: totalSms / (totalSms - commSms). */
export function computeSlowdown(c: ClusterSpec): number {
  return c.totalSms / (c.totalSms - c.commSms);
}

/**
 * Longest side over shortest beyond which {@link torusShapeNote} speaks: flows cross up to half the
 * long side in hops, and the simulator re-balances each of them on every link it crosses.
 */
const ELONGATED_TORUS = 16;

/**
 * A note for a torus that `world` ranks make long and thin (a prime world has no other 2-D shape
 * than 1 x world): its flows cross many hops, so a simulation is slow (`magi` at 232 ranks, 8 x 29:
 * 43 s; at 233, 1 x 233: over 15 minutes, bench/fuzz-sim.ts, session 39). Null for other clusters
 * and shapes.
 */
export function torusShapeNote(c: ClusterSpec, world: number): string | null {
  if (c.topology !== 'torus') return null;
  const dims = torusDimsFor(c, world);
  const long = Math.max(...dims);
  const short = Math.min(...dims);
  if (long < ELONGATED_TORUS * short) return null;
  return `the torus of ${world} ranks is ${dims.join(' x ')}: messages cross up to ${Math.floor(long / 2)} hops, and simulating it may take minutes${short === 1 ? ` (${world} has no other 2-D shape)` : '; --torus-dims gives another'}`;
}

/**
 * Torus dimensions for `world` ranks: the given ones (checked against world), else the most square
 * 2-D factorisation a x b (a <= b, a the largest divisor <= sqrt(world)).
 */
export function torusDimsFor(c: ClusterSpec, world: number): number[] {
  if (c.torusDims.length > 0) {
    const prod = c.torusDims.reduce((p, d) => p * d, 1);
    if (prod !== world)
      fail(
        'option.torusDims',
        `torus ${c.torusDims.join('x')} holds ${prod} ranks but the plan has ${world}`,
        'torusDims',
      );
    return [...c.torusDims];
  }
  let a = Math.floor(Math.sqrt(world));
  while (a > 1 && world % a !== 0) a--;
  return [a, world / a];
}

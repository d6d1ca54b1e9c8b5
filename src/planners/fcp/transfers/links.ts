/**
 * The links FCP plans for, read from the problem's cluster: how many ranks share the fast
 * intra-node links, what a byte costs on each link class, the per-group latency and how much
 * slower compute runs on the SMs left to it. The timeline estimate (timeline.ts), the sender choice
 * (fetch.ts) and the locality tie-break (placement/distribute.ts) read this, so a plan is made for the
 * network it will run on (a faster NIC shortens the estimated groups and moves pushes earlier).
 */
import { portEfficiency } from '../../../cost/contention.ts';
import { type ClusterSpec, computeSlowdown } from '../../../problem/cluster.ts';

/** GB/s to bytes per millisecond. */
const GBPS_TO_BYTES_PER_MS = 1e6;

/** Link classes and costs of one cluster, as the planner's estimates use them. */
export interface LinkModel {
  /** Ranks per node sharing the intra-node links (1 on a torus: every message uses the network). */
  readonly nodeSize: number;
  /** Per-rank intra-node bandwidth, bytes per ms (each direction). */
  readonly intraBytesPerMs: number;
  /** Per-rank inter-node bandwidth, bytes per ms (each direction). */
  readonly interBytesPerMs: number;
  /** Latency charged once per busy group, ms (one message across nodes). */
  readonly groupLatencyMs: number;
  /** Kernel time factor: compute runs on totalSms - commSms SMs. */
  readonly computeSlowdown: number;
  /**
   * Contention network model (cost/contention.ts; 0 and 0 under `fluid`): a NIC port with k
   * concurrent flows keeps 1 - loss (1 - 1/k) of its bandwidth and pays msgMs per further message.
   */
  readonly contentionLoss: number;
  readonly contentionMsgMs: number;
  /**
   * NCCL's PXN routing (ClusterSpec.routing): a message across nodes leaves by the sender-node GPU
   * on the receiver's rail, so the receiver also picks the sending NIC (relays.ts).
   */
  readonly pxn: boolean;
}

/** Time for one inter-node port to move `bytes` as `k` concurrent flows, ms (no latency). */
export function interPortMs(l: LinkModel, k: number, bytes: number): number {
  if (k <= 1 || l.contentionLoss === 0)
    return bytes / l.interBytesPerMs + (k > 1 ? (k - 1) * l.contentionMsgMs : 0);
  return bytes / (l.interBytesPerMs * portEfficiency(l.contentionLoss, k)) + (k - 1) * l.contentionMsgMs;
}

/**
 * The link model of `cluster` for a problem with `gpusPerNode` GPUs per node. Switch topology:
 * NVLink inside a node, the per-GPU NIC across. Torus: no node, every message on a neighbour link
 * (the estimate ignores multi-hop sharing; the simulator charges it).
 */
export function linkModel(cluster: ClusterSpec, gpusPerNode: number): LinkModel {
  const torus = cluster.topology === 'torus';
  const inter = (torus ? cluster.linkGBps : cluster.nicGBps) * GBPS_TO_BYTES_PER_MS;
  return {
    nodeSize: torus ? 1 : Math.max(1, gpusPerNode),
    intraBytesPerMs: torus ? inter : cluster.nvlinkGBps * GBPS_TO_BYTES_PER_MS,
    interBytesPerMs: inter,
    groupLatencyMs: cluster.latencyUs / 1000,
    computeSlowdown: computeSlowdown(cluster),
    contentionLoss: cluster.network === 'contention' ? cluster.contentionLoss : 0,
    contentionMsgMs: cluster.network === 'contention' ? cluster.contentionMsgUs / 1000 : 0,
    pxn: !torus && cluster.routing === 'pxn',
  };
}

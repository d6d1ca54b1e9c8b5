/**
 * NIC and NVLink-port congestion of one phase for the rule-6 report: the most messages across
 * nodes that leave by one NIC, or arrive at one, in one round, and the most messages into one GPU's
 * NVLink port in one round. Congestion (report-messages.ts) counts ranks; under
 * NCCL's PXN routing a message across nodes leaves by the NIC of the sender-node GPU on the
 * receiver's rail (its local index), not by the sender's own, so rounds that are matchings over
 * ranks may still put several messages on one NIC. Under direct routing every message leaves by
 * its sender's NIC, and this is at most the congestion.
 */

import { railRank, sameNode } from '../core/nodes.ts';
import { messageStats } from './report-messages.ts';

/** How messages across nodes reach the network: GPUs per node (NVLink domain) and NCCL's routing. */
export interface NicRoute {
  readonly gpusPerNode: number;
  readonly routing: 'direct' | 'pxn';
}

/**
 * The route a plan is reported under when none is given: the plan's `meta.gpusPerNode` (FCP
 * records one other than 8) else 8 GPUs per node (every preset's), and its `meta.routing` else direct.
 */
export function defaultNicRoute(meta: Record<string, unknown> | undefined): NicRoute {
  const g = meta?.gpusPerNode;
  return {
    gpusPerNode: typeof g === 'number' && Number.isInteger(g) && g >= 1 ? g : 8,
    routing: meta?.routing === 'pxn' ? 'pxn' : 'direct',
  };
}

/**
 * The GPU whose NIC a message from `src` to `dst` in another node leaves by under PXN: the one of
 * `src`'s node on `dst`'s rail (local index), or `src` itself when its node lacks that GPU (a
 * partial last node of `world` ranks). The simulator routes by it (cost/network.ts), the report
 * counts by it, and FCP plans for it (relays, rounds, timeline estimate).
 */
export function pxnNic(src: number, dst: number, gpusPerNode: number, world: number): number {
  const proxy = railRank(src, dst, gpusPerNode, world);
  return proxy >= 0 ? proxy : src;
}

/** The distinct keys of `keys`, sorted: what the message statistics build (report-messages.ts). */
function distinct(keys: Float64Array, W: number): Float64Array {
  return messageStats(keys, new Uint8Array(keys.length), W).unique;
}

/**
 * NIC and NVLink-port congestion of a phase from its distinct messages, `unique`: (round * W +
 * src) * W + dst keys, sorted and without duplicates (report-messages.ts hands them over). One
 * walk: per round, messages leaving by and arriving at each NIC (across nodes) and entering each
 * GPU's NVLink port (from a node mate, or under PXN to be forwarded for one), counted through
 * per-rank counters reset lazily when a new round first touches them (no sort: at 4096 ranks a
 * phase has about two million messages).
 */
export function linkCongestion(
  unique: Float64Array,
  W: number,
  route: NicRoute,
): { nic: number; nvlink: number } {
  const g = Math.max(1, Math.floor(route.gpusPerNode));
  const pxn = route.routing === 'pxn';
  const leave = new Int32Array(W);
  const arrive = new Int32Array(W);
  const port = new Int32Array(W);
  const stamp = new Float64Array(W).fill(-1); // round of each rank's counters
  const fresh = (r: number, round: number): void => {
    if (stamp[r] === round) return;
    stamp[r] = round;
    leave[r] = 0;
    arrive[r] = 0;
    port[r] = 0;
  };
  let nic = 0;
  let nvlink = 0;
  for (let i = 0; i < unique.length; i++) {
    const key = unique[i]!;
    const dst = key % W;
    const rs = (key - dst) / W;
    const src = rs % W;
    const round = (rs - src) / W;
    if (sameNode(src, dst, g)) {
      fresh(dst, round);
      nvlink = Math.max(nvlink, ++port[dst]!);
      continue;
    }
    // NIC ids are rank ids (a GPU's own NIC).
    const out = pxn ? pxnNic(src, dst, g, W) : src;
    fresh(out, round);
    fresh(dst, round);
    nic = Math.max(nic, ++leave[out]!, ++arrive[dst]!);
    if (pxn && out !== src) nvlink = Math.max(nvlink, ++port[out]!);
  }
  return { nic, nvlink };
}

/**
 * Most messages across nodes on one NIC in one round (0 when none crosses nodes). `keys`: the
 * phase's (round * W + src) * W + dst message keys, duplicates allowed (rows travelling together).
 */
export function nicCongestion(keys: Float64Array, W: number, route: NicRoute): number {
  return linkCongestion(distinct(keys, W), W, route).nic;
}

/**
 * Most messages into one GPU's NVLink port in one round: those it receives from node mates and,
 * under PXN, those across nodes it forwards for a node mate (they leave by its NIC, reached over
 * its NVLink port). Under direct routing this is at most the congestion. `keys` as for
 * {@link nicCongestion}.
 */
export function nvlinkCongestion(keys: Float64Array, W: number, route: NicRoute): number {
  return linkCongestion(distinct(keys, W), W, route).nvlink;
}

/**
 * Two-hop reshuffle across nodes (issue 15, deliverable 1: topology-aware transfers; mode (a)).
 * Which rank of the receiver's node first receives each message of the reshuffle that crosses
 * nodes: the receiver itself, or a node mate that forwards it over NVLink one group later. Used for
 * `in` (Q,K,V forward, dO backward: user -> home) and `out` (O forward, dQ,dK,dV backward: home ->
 * user).
 *
 * Why: the reshuffle's cross-node bytes sit on few NICs. Home-first placement moves the heavy late
 * blocks of long sequences, so a handful of ranks send and receive most of them (longtail, 16 and
 * 32 ranks, seeds 1-3: the busiest rank sends 3.3-5.3x and receives 2.3-3.6x the mean cross-node
 * `in` tokens, bench/reshuffle-nics.ts), while their node mates' NICs idle. Under NCCL's PXN routing a message across nodes
 * leaves by the sender-node GPU on the receiver's rail (docs/network.md), so the rank that first
 * receives a message picks both NICs it crosses: its own on the receiving side and its rail's on
 * the sending node. Choosing it per message to even both spreads the reshuffle over all NICs of
 * the two nodes.
 *
 * Greedy, longest message first (ties by index): the candidate (the receiver, then its node mates
 * in rank order) whose busier NIC after taking the message is least busy; the receiver wins ties,
 * so a message is relayed only when that lowers the busier NIC. Under direct routing the sender's
 * own NIC carries every message whichever rank receives it, and relays only even the receiving
 * side: measured no better for `in` (simulated, 16 and 32 ranks, 36 paired batches: -0.002 ±
 * 0.002 forward MFU), so none are chosen there.
 */
import { pxnNic } from '../../../plan/report-nic.ts';
import type { LinkModel } from './links.ts';

/**
 * Relay of every message `src[i] -> dst[i]` of `length[i]` tokens: the node mate of `dst[i]` that
 * receives it across nodes and forwards it, or -1 for a message sent straight (inside a node, under
 * direct routing, or when relaying would not lower the busier NIC).
 */
export function crossNodeRelays(
  src: Int32Array,
  dst: Int32Array,
  length: Int32Array,
  world: number,
  links: LinkModel,
): Int32Array {
  const n = src.length;
  const relay = new Int32Array(n).fill(-1);
  const ns = links.nodeSize;
  if (!links.pxn || ns <= 1) return relay;
  const node = (r: number): number => Math.floor(r / ns);
  const cross: number[] = [];
  for (let i = 0; i < n; i++) if (node(src[i]!) !== node(dst[i]!)) cross.push(i);
  cross.sort((a, b) => length[b]! - length[a]! || a - b);
  // Cross-node tokens each rank's NIC receives, and sends as the PXN proxy of its rail.
  const recv = new Float64Array(world);
  const send = new Float64Array(world);
  for (const i of cross) {
    const s = src[i]!;
    const d = dst[i]!;
    const len = length[i]!;
    const first = node(d) * ns;
    const last = Math.min(world, first + ns);
    // The NIC a message s -> t leaves by under PXN.
    const nicOf = (t: number): number => pxnNic(s, t, ns, world);
    const busier = (t: number): number => Math.max(recv[t]!, send[nicOf(t)]!);
    let pick = d;
    let best = busier(d);
    for (let t = first; t < last; t++) {
      const b = busier(t);
      if (b < best) {
        best = b;
        pick = t;
      }
    }
    recv[pick]! += len;
    send[nicOf(pick)]! += len;
    if (pick !== d) relay[i] = pick;
  }
  return relay;
}

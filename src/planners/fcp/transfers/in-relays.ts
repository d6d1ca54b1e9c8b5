/**
 * Two-hop `in` across nodes (issue 15, deliverable 1: topology-aware transfers; mode (a)'s
 * reshuffle). Which rank of the home's node first receives each piece of Q,K,V (forward) or dO
 * (backward) that crosses nodes: the home itself, or a node mate that forwards it to the home over
 * NVLink one group later.
 *
 * Why: the reshuffle's cross-node bytes sit on few NICs. Home-first placement moves the heavy late
 * blocks of long sequences, so a handful of ranks send and receive most of them (longtail, 16 and
 * 32 ranks, seeds 1-3: the busiest rank sends 3.3-5.3x and receives 2.3-3.6x the mean cross-node
 * `in` tokens), while their node mates' NICs idle. Under NCCL's PXN routing a message across nodes
 * leaves by the sender-node GPU on the receiver's rail (docs/network.md), so the rank that first
 * receives a piece picks both NICs it crosses: the relay's own on the receiving side and its rail's
 * on the sending node. Choosing it per piece to even both spreads the reshuffle over all NICs of
 * the two nodes.
 *
 * Greedy, heaviest piece first (ties by position in `moving`): the candidate (the home, then its
 * node mates in rank order) whose busier NIC after taking the piece is least busy; the home wins
 * ties, so a piece is relayed only when that lowers the busier NIC. Under direct routing the
 * sender's own NIC carries every piece whichever rank receives it, and relays only even the
 * receiving side: measured no better (simulated, 16 and 32 ranks, 36 paired batches: -0.002 ±
 * 0.002 forward MFU), so none are chosen there.
 */
import type { LinkModel } from './links.ts';
import type { Pieces } from './reshuffle.ts';

/**
 * Relay of every moving piece (index into `pieces.moving`): the node mate of the home that
 * receives it across nodes and forwards it, or -1 for a piece sent straight to its home (inside a
 * node, under direct routing, or when relaying would not lower the busier NIC).
 */
export function inRelays(pieces: Pieces, world: number, links: LinkModel): Int32Array {
  const m = pieces.moving;
  const relay = new Int32Array(m.length).fill(-1);
  const ns = links.nodeSize;
  if (!links.pxn || ns <= 1) return relay;
  const node = (r: number): number => Math.floor(r / ns);
  const cross: number[] = [];
  for (let i = 0; i < m.length; i++)
    if (node(pieces.user[m[i]!]!) !== node(pieces.home[m[i]!]!)) cross.push(i);
  cross.sort((a, b) => pieces.length[m[b]!]! - pieces.length[m[a]!]! || a - b);
  // Cross-node tokens each rank's NIC receives, and sends as the PXN proxy of its rail.
  const recv = new Float64Array(world);
  const send = new Float64Array(world);
  for (const i of cross) {
    const p = m[i]!;
    const h = pieces.home[p]!;
    const u = pieces.user[p]!;
    const len = pieces.length[p]!;
    const first = node(h) * ns;
    const last = Math.min(world, first + ns);
    // The NIC a message u -> t leaves by under PXN: the GPU of u's node on t's rail, or u's own
    // where u's node has no such GPU (src/cost/network.ts, route).
    const nicOf = (t: number): number => {
      const proxy = node(u) * ns + (t % ns);
      return proxy < world ? proxy : u;
    };
    const busier = (t: number): number => Math.max(recv[t]!, send[nicOf(t)]!);
    let pick = h;
    let best = busier(h);
    for (let t = first; t < last; t++) {
      const b = busier(t);
      if (b < best) {
        best = b;
        pick = t;
      }
    }
    recv[pick]! += len;
    send[nicOf(pick)]! += len;
    if (pick !== h) relay[i] = pick;
  }
  return relay;
}

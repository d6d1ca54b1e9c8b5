/**
 * Congestion-free rounds (DESIGN.md, component 2). The transfers of one kind form a bipartite
 * multigraph (senders left, receivers right); by König's edge-colouring theorem it splits into
 * exactly Δ matchings (Δ = the most transfers any rank sends or receives), each a round in which
 * every rank sends at most one message and receives at most one. The colouring itself is
 * `colorBipartiteEdges` (edge-coloring.ts: Euler partitions with Hopcroft-Karp matchings).
 *
 * Ablation `rounds: 'naive'`: no matching decomposition; each batch of transfers is issued at once
 * as one round, so a rank may send or receive many messages in it (the incast the rounds avoid).
 *
 * Rounds are then ordered for the pipeline and handed to the group placer (pipeline.ts).
 */
import { colorBipartiteEdges } from './edge-coloring.ts';
import type { GroupPlacer } from './pipeline.ts';

/** A split of edges into rounds (local round ids 0..rounds-1). */
export interface Colouring {
  readonly round: Int32Array;
  readonly rounds: number;
  /** Largest send or receive degree of the graph. */
  readonly delta: number;
}

/** Largest send or receive degree of the multigraph. */
export function degreeOf(src: Int32Array, dst: Int32Array, world: number): number {
  const out = new Int32Array(world);
  const inc = new Int32Array(world);
  let d = 0;
  for (let e = 0; e < src.length; e++) {
    d = Math.max(d, ++out[src[e]!]!, ++inc[dst[e]!]!);
  }
  return d;
}

/** Splits the edges into rounds: exactly Δ matchings (`matching`), or one round (`naive`). */
export function colourEdges(
  src: Int32Array,
  dst: Int32Array,
  world: number,
  mode: 'matching' | 'naive',
): Colouring {
  const delta = degreeOf(src, dst, world);
  if (src.length === 0) return { round: new Int32Array(0), rounds: 0, delta: 0 };
  if (mode === 'naive') return { round: new Int32Array(src.length), rounds: 1, delta };
  const { color, colors } = colorBipartiteEdges(src, dst, world);
  return { round: color, rounds: colors, delta };
}

/**
 * Placement order of the rounds of a colouring: by the earliest group their edges allow (`ready`,
 * per edge: the latest of its edges), then by descending `weight` summed over their edges, so that
 * the rounds that feed the most (and the hungriest) receivers go first. Returns the rounds in
 * order and each round's ready group.
 */
export function orderRounds(
  c: Colouring,
  ready: Int32Array | null,
  weight: Float64Array,
): { order: Int32Array; readyOf: Int32Array } {
  const readyOf = new Int32Array(c.rounds);
  const score = new Float64Array(c.rounds);
  for (let e = 0; e < c.round.length; e++) {
    const r = c.round[e]!;
    if (ready) readyOf[r] = Math.max(readyOf[r]!, ready[e]!);
    score[r]! += weight[e]!;
  }
  const order = new Int32Array(c.rounds);
  for (let r = 0; r < c.rounds; r++) order[r] = r;
  order.sort((a, b) => readyOf[a]! - readyOf[b]! || score[b]! - score[a]! || a - b);
  return { order, readyOf };
}

/** Places the rounds of a colouring in `order`; returns the placer slot of every edge. */
export function placeColouring(
  placer: GroupPlacer,
  c: Colouring,
  order: Int32Array,
  readyOf: Int32Array,
): Int32Array {
  const slotOfRound = new Int32Array(c.rounds);
  for (let i = 0; i < order.length; i++) {
    const r = order[i]!;
    slotOfRound[r] = placer.place(readyOf[r]!);
  }
  const slot = new Int32Array(c.round.length);
  for (let e = 0; e < slot.length; e++) slot[e] = slotOfRound[c.round[e]!]!;
  return slot;
}

/**
 * Places pushes (results that become ready at different times: `out`, `dkv`). One colouring of all
 * of them would make an early push wait for the latest push of its round, and a colouring per ready
 * group makes many sparse rounds; instead pushes are taken by ready group and each joins the first
 * push round, at its ready group or later, where its sender and receiver are both free (first-fit
 * greedy colouring: at most 2Δ-1 rounds, usually close to Δ), or opens a new round. Still one
 * message per rank and round. `naive`: one round per ready group. Returns each edge's slot and
 * the number of rounds.
 */
export function placePushes(
  placer: GroupPlacer,
  src: Int32Array,
  dst: Int32Array,
  ready: Int32Array,
  world: number,
  mode: 'matching' | 'naive',
): { slot: Int32Array; rounds: number; delta: number } {
  const n = src.length;
  const slot = new Int32Array(n);
  // Edges by ready group (stable counting sort).
  let maxReady = 0;
  for (let e = 0; e < n; e++) maxReady = Math.max(maxReady, ready[e]!);
  const first = new Int32Array(maxReady + 2);
  for (let e = 0; e < n; e++) first[ready[e]! + 1]!++;
  for (let g = 0; g <= maxReady; g++) first[g + 1]! += first[g]!;
  const order = new Int32Array(n);
  for (let e = 0; e < n; e++) order[first[ready[e]!]!++] = e;
  // Push rounds in creation order. Edges come in ready order and a group never regains room, so
  // the rounds open in non-decreasing group order: creation order is group order, and a rank's
  // first free round (from the current ready group on) only moves forward.
  const groupOf: number[] = [];
  const slotOf: number[] = [];
  let cap = 64;
  let sendBusy = new Uint8Array(cap * world);
  let recvBusy = new Uint8Array(cap * world);
  const sendFree = new Int32Array(world);
  const recvFree = new Int32Array(world);
  let lo = 0; // first round whose group is >= the current ready group
  let curReady = -1;
  for (let k = 0; k < n; k++) {
    const e = order[k]!;
    const g = ready[e]!;
    const s = src[e]!;
    const d = dst[e]!;
    if (g !== curReady) {
      curReady = g;
      while (lo < groupOf.length && groupOf[lo]! < g) lo++;
    }
    const R = groupOf.length;
    let c: number;
    if (mode === 'naive') c = lo;
    else {
      c = Math.max(lo, sendFree[s]!, recvFree[d]!);
      const sb = s * cap;
      const db = d * cap;
      while (c < R && (sendBusy[sb + c] === 1 || recvBusy[db + c] === 1)) c++;
    }
    if (c === R) {
      if (R === cap) {
        const c2 = cap * 2;
        const s2 = new Uint8Array(c2 * world);
        const r2 = new Uint8Array(c2 * world);
        for (let r = 0; r < world; r++) {
          s2.set(sendBusy.subarray(r * cap, (r + 1) * cap), r * c2);
          r2.set(recvBusy.subarray(r * cap, (r + 1) * cap), r * c2);
        }
        sendBusy = s2;
        recvBusy = r2;
        cap = c2;
      }
      const sl = placer.place(g);
      slotOf.push(sl);
      groupOf.push(placer.groupOf(sl));
    }
    sendBusy[s * cap + c] = 1;
    recvBusy[d * cap + c] = 1;
    slot[e] = slotOf[c]!;
    let fs = Math.max(sendFree[s]!, lo);
    while (fs < groupOf.length && sendBusy[s * cap + fs] === 1) fs++;
    sendFree[s] = fs;
    let fd = Math.max(recvFree[d]!, lo);
    while (fd < groupOf.length && recvBusy[d * cap + fd] === 1) fd++;
    recvFree[d] = fd;
  }
  return { slot, rounds: slotOf.length, delta: degreeOf(src, dst, world) };
}

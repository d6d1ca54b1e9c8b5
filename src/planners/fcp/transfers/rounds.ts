/**
 * Congestion-free rounds (docs/design.md, FCP's planner). The transfers of one kind form a bipartite
 * multigraph (senders left, receivers right); by König's edge-colouring theorem it splits into
 * exactly Δ matchings (Δ = the most transfers any rank sends or receives), each a round in which
 * every rank sends at most one message and receives at most one. The colouring itself is
 * `colorBipartiteEdges` (edge-coloring.ts: Euler partitions with Hopcroft-Karp matchings).
 *
 * Ablation `rounds: 'naive'`: no matching decomposition; every rank receives one transfer per round
 * in the order it needs them, and senders are not coordinated, so a rank may send many messages in
 * a round (the congestion the matchings avoid).
 *
 * Rounds are then ordered for the pipeline and handed to the group placer (groups.ts); single
 * transfers (pushes) fill the gaps the rounds leave.
 */
import { colorBipartiteEdges } from './edge-coloring.ts';
import type { GroupPlacer } from './groups.ts';

/** A split of edges into rounds (local round ids 0..rounds-1). */
export interface Colouring {
  readonly round: Int32Array;
  readonly rounds: number;
  /** Largest send or receive degree of the graph. */
  readonly delta: number;
  /** Two-hop `kv` (phase.ts, placeKv): rounds 0..firstRounds-1 carry the direct edges, the rest the relays. */
  readonly firstRounds?: number;
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

/**
 * Splits the edges into rounds: exactly Δ matchings (`matching`), or (`naive`) receiver order: in
 * round k every rank receives its k-th transfer, whoever sends it, so a sender may serve several
 * receivers in one round (rounds as many as the largest receive degree).
 */
export function colourEdges(
  src: Int32Array,
  dst: Int32Array,
  world: number,
  mode: 'matching' | 'naive',
): Colouring {
  const delta = degreeOf(src, dst, world);
  if (src.length === 0) return { round: new Int32Array(0), rounds: 0, delta: 0 };
  if (mode === 'naive') {
    const round = new Int32Array(src.length);
    const next = new Int32Array(world);
    let rounds = 0;
    for (let e = 0; e < src.length; e++) {
      round[e] = next[dst[e]!]!++;
      rounds = Math.max(rounds, round[e]! + 1);
    }
    return { round, rounds, delta };
  }
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
  src: Int32Array,
  dst: Int32Array,
): Int32Array {
  const slotOfRound = new Int32Array(c.rounds);
  for (let i = 0; i < order.length; i++) {
    const r = order[i]!;
    slotOfRound[r] = placer.place(readyOf[r]!);
  }
  const slot = new Int32Array(c.round.length);
  for (let e = 0; e < slot.length; e++) {
    slot[e] = slotOfRound[c.round[e]!]!;
    placer.mark(slot[e]!, src[e]!, dst[e]!);
  }
  return slot;
}

/**
 * Places pushes and other single transfers (results that become ready at different times: `out`,
 * `dkv`): taken by ready group, each joins the first round at its ready group or later where its
 * sender and receiver are both free, whatever kind that round carries, or opens a new round
 * (first-fit greedy colouring over the rounds already placed: still one message per rank and
 * round, and a push costs no extra round where the phase's other rounds leave a gap). `naive`:
 * only the receiver must be free. Returns each edge's slot, the number of rounds the pushes use
 * and their Δ.
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
  const naive = mode === 'naive';
  for (let k = 0; k < n; k++) {
    const e = order[k]!;
    slot[e] = placer.fill(src[e]!, dst[e]!, ready[e]!, naive);
  }
  return { slot, rounds: distinctSlots(slot, placer.slots), delta: degreeOf(src, dst, world) };
}

/**
 * Distinct slots in `slot` (each below `slots`): a mark per slot rather than a Set, over a million
 * pushes at 4096 ranks.
 */
export function distinctSlots(slot: Int32Array, slots: number): number {
  const used = new Uint8Array(slots);
  let n = 0;
  for (let e = 0; e < slot.length; e++) {
    if (used[slot[e]!] === 0) {
      used[slot[e]!] = 1;
      n++;
    }
  }
  return n;
}

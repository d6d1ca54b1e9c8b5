/**
 * Forwarding trees for hot K/V senders (issue 15: communication imbalance).
 *
 * Owner computes, so the rank holding an early block of a long sequence sends it to every later
 * holder of that sequence: such a rank sends many times the mean while most receivers send
 * little, and its sends set Δ (the most messages any rank sends or receives, hence the `kv`
 * rounds). A range that a hot sender sends to several ranks can instead be sent to a few of them
 * and forwarded by those, one group after they receive it (a received range is usable by sends of
 * later groups), so that no rank sends much more than the mean.
 *
 * Greedy, in bytes (sent plus received, what the imbalance counts): a sender is hot when its load
 * exceeds `(1 + slack)` times the mean. Its messages with several receivers are taken largest
 * first; within one, receivers keep the edge order (the first stays direct: it holds the range
 * soonest), and each later receiver is fed instead by the least loaded rank that already gets
 * the range from this message (directly or forwarded, at most `depth` hops from the sender, at
 * most `fan` forwards each), while the sender is still hot and the forwarder stays within the
 * target after the forward. A forward never adds a NIC crossing: a receiver the sender reached
 * over NVLink is fed only from its own node, and forwarders in the receiver's node come first.
 * Total bytes are unchanged (each receiver still gets the range once); only who sends moves.
 *
 * With `fanOut` only (fetch.ts): forwards wait a group, so the rounds exceed Δ like the relays'.
 * Measured on top of the relays (simulated, mode (b), longtail, seeds 1-3, untuned, groups of 4
 * rounds, 16/64/256 ranks, with same-slot.ts): fwd MFU relays alone 0.592/0.608/0.591 -> relays
 * and trees 0.592/0.612/0.590, fwd comm imbalance 46.9/37.9/63.8% -> 23.8/23.2/48.5%. Trees
 * without relays (forwards across nodes allowed then) reached 17.9/7.0/20.8% but fwd MFU
 * 0.588/0.608/0.583. The self-tuner's relay candidate (index.ts) still loses at 16-256 ranks
 * (seeds 1-3) and wins at 1024 (seed 1: fwd MFU 0.554 -> 0.578, comm imbalance 85.7% -> 34.0%).
 */
import { iota } from '../../../core/gather.ts';
import { radixSortBy } from '../../../core/radix-sort.ts';
import { LoadHeap } from './load-heap.ts';
import type { Pieces } from './reshuffle.ts';

/** The fields of fetch.ts's `KvEdges` the trees read and rewrite (no import: fetch.ts calls this). */
export interface TreeEdges {
  readonly src: Int32Array;
  readonly dst: Int32Array;
  readonly seq: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  readonly dep: Int32Array;
  readonly relay: Int32Array;
}

/**
 * Each rank's reshuffle traffic of the forward in K/V-token units (`inWeight` per token: Q,K,V
 * in, and O out, one less), at both ends, as the imbalance counts it.
 */
export function reshuffleLoad(pieces: Pieces, world: number, inWeight: number): Float64Array {
  const base = new Float64Array(world);
  for (let i = 0; i < pieces.moving.length; i++) {
    const p = pieces.moving[i]!;
    const w = (2 * inWeight - 1) * pieces.length[p]!;
    base[pieces.user[p]!]! += w;
    base[pieces.home[p]!]! += w;
  }
  return base;
}

/** Knobs of {@link forwardTrees}. */
export interface TreeOptions {
  /** A sender is hot above (1 + slack) times the mean load; forwarders stay within it. */
  readonly slack: number;
  /** Forwards per forwarder and message at most. */
  readonly fan: number;
  /** Hops from the sender at most (1: no forwarding). */
  readonly depth: number;
}

/** Default knobs (measured: see the report of the change that added them). */
export const TREE_DEFAULTS: TreeOptions = { slack: 0.05, fan: 2, depth: 3 };

/**
 * Hop count of every edge from its range's original holder: 1 for a direct edge, its feed's plus
 * one for a forwarded one (`relay` >= 0). Feeds may come later in edge order, so it follows the
 * chains (they are acyclic: a feed is always placed before what it feeds).
 */
export function hopLevels(relay: Int32Array): Int32Array {
  const n = relay.length;
  const level = new Int32Array(n);
  const stack: number[] = [];
  for (let e = 0; e < n; e++) {
    if (level[e] !== 0) continue;
    let x = e;
    while (relay[x]! >= 0 && level[x] === 0) {
      stack.push(x);
      x = relay[x]!;
    }
    if (level[x] === 0) level[x] = 1;
    let l = level[x]!;
    while (stack.length > 0) {
      const y = stack.pop()!;
      level[y] = ++l;
    }
  }
  return level;
}

/**
 * Rewrites the senders of a hot sender's repeated messages into forwarding trees (module comment).
 * `baseLoad`: each rank's other traffic of the phase in K/V-token units (the reshuffle), counted
 * in the loads. Returns new edges (same receivers, ranges and order; `src`, `dep`, `relay` change
 * for forwarded edges), or the input itself when nothing is hot.
 */
export function forwardTrees<E extends TreeEdges>(
  edges: E,
  world: number,
  gpusPerNode: number,
  baseLoad: Float64Array | null,
  o: TreeOptions = TREE_DEFAULTS,
): E {
  const n = edges.src.length;
  if (n === 0 || o.depth < 2 || o.fan < 1) return edges;
  const load = new Float64Array(world);
  let total = 0;
  for (let r = 0; r < world; r++) {
    load[r] = baseLoad ? baseLoad[r]! : 0;
    total += load[r]!;
  }
  for (let e = 0; e < n; e++) {
    load[edges.src[e]!]! += edges.length[e]!;
    load[edges.dst[e]!]! += edges.length[e]!;
    total += 2 * edges.length[e]!;
  }
  const mean = total / world;
  const target = (1 + o.slack) * mean;
  // Ranges: edges by (seq, start), longest first (an earlier edge of a range covers a later
  // one, so its receiver may forward it), then edge id.
  const { src: S, seq, start, length, dst } = edges;
  // Least significant key first, each pass stable over ascending ids (core/radix-sort.ts).
  let longest = 0;
  for (let e = 0; e < n; e++) if (length[e]! > longest) longest = length[e]!;
  const shorter = new Int32Array(n);
  for (let e = 0; e < n; e++) shorter[e] = longest - length[e]!;
  const cand = radixSortBy(radixSortBy(radixSortBy(iota(n), shorter), start), seq);
  const m = n;
  const idx = new Int32Array(n);
  for (let i = 0; i < m; i++) idx[cand[i]!] = i;
  // Per candidate: first index of its range in `cand`.
  const msgFirst = new Int32Array(m);
  for (let i = 0; i < m; i++) {
    const a = cand[i]!;
    const p = i > 0 ? cand[i - 1]! : -1;
    msgFirst[i] = p >= 0 && seq[p] === seq[a] && start[p] === start[a] ? msgFirst[i - 1]! : i;
  }
  const msgEnd = new Int32Array(m);
  for (let i = m - 1; i >= 0; i--)
    msgEnd[i] = i + 1 < m && msgFirst[i + 1] === msgFirst[i] ? msgEnd[i + 1]! : i + 1;
  // Scan order per sender: its edges from the last of each range to the second (the first
  // receiver of a range stays direct), ranges in `cand` order; a CSR by sender.
  const scanOff = new Int32Array(world + 1);
  for (let i = 0; i < m; i++) if (msgFirst[i] !== i) scanOff[S[cand[i]!]! + 1]!++;
  for (let r = 0; r < world; r++) scanOff[r + 1]! += scanOff[r]!;
  const scan = new Int32Array(scanOff[world]!);
  {
    const fill = scanOff.slice(0, world);
    for (let i = m - 1; i >= 0; i--) if (msgFirst[i] !== i) scan[fill[S[cand[i]!]!]!++] = i;
  }
  const ptr = scanOff.slice(0, world);
  const level = hopLevels(edges.relay);
  const lv = new Int32Array(m);
  for (let i = 0; i < m; i++) lv[i] = level[cand[i]!]!;
  // Forwards of each candidate's receiver (relays already fed by it count: a feed never moves).
  const forwards = new Int32Array(m);
  for (let e = 0; e < n; e++) if (edges.relay[e]! >= 0) forwards[idx[edges.relay[e]!]!]!++;
  const moved = new Uint8Array(m);
  const src = edges.src.slice();
  const dep = edges.dep.slice();
  const relay = edges.relay.slice();
  const g = Math.max(1, gpusPerNode);
  const heap = LoadHeap.above(load, target);
  for (;;) {
    const s = heap.popAbove(load, target);
    if (s < 0) break;
    // The busiest rank: move one of its direct sends to a holder of the same range, if any
    // leaves both below its load; else nothing lowers the maximum and the greedy stops.
    let done = false;
    for (; ptr[s]! < scanOff[s + 1]! && !done; ptr[s]!++) {
      const i = scan[ptr[s]!]!;
      if (moved[i] === 1 || forwards[i]! > 0 || src[cand[i]!] !== s) continue;
      const e = cand[i]!;
      const len = length[e]!;
      const dn = Math.floor(dst[e]! / g);
      const intra = Math.floor(s / g) === dn;
      let best = -1;
      let bestCost = Number.POSITIVE_INFINITY;
      for (let j = msgFirst[i]!; j < msgEnd[i]!; j++) {
        const f = dst[cand[j]!]!;
        // Any other receiver of a covering copy (i is a leaf: none descends from it).
        if (j === i || length[cand[j]!]! < len) continue;
        if (forwards[j]! >= o.fan || lv[j]! >= o.depth || load[f]! + len >= load[s]!) continue;
        const same = Math.floor(f / g) === dn;
        if (intra && !same) continue; // no new NIC crossing
        // Same node first (NVLink, no NIC crossing), then a receiver that could not move anyway
        // (the first of its range, a forwarded one, a forwarder already: a direct leaf used as a
        // feed can no longer be moved off its sender), then the least loaded.
        const leaf =
          j !== msgFirst[i] && moved[j] === 0 && forwards[j] === 0 && src[cand[j]!] === S[cand[j]!];
        const c = (same ? 0 : 4 * total) + (leaf ? 2 * total : 0) + load[f]!;
        if (c < bestCost) {
          bestCost = c;
          best = j;
        }
      }
      if (best < 0) continue;
      const fe = cand[best]!;
      const f = dst[fe]!;
      src[e] = f;
      dep[e] = -1;
      relay[e] = fe;
      lv[i] = lv[best]! + 1;
      forwards[best]!++;
      moved[i] = 1;
      load[s]! -= len;
      load[f]! += len;
      if (load[f]! > target) heap.push(load[f]!, f);
      done = true;
    }
    if (!done) {
      break;
    }
    heap.push(load[s]!, s);
  }
  return { ...edges, src, dep, relay };
}

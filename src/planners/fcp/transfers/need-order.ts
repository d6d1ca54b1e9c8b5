/**
 * Round order by need (issue 15, deliverable 4): which `kv` round goes into which group, so that
 * every rank gets K/V before it runs out of work.
 *
 * The colouring (rounds.ts) fixes which transfers share a round (a matching: congestion-free, and
 * exactly Δ rounds); the order of the rounds is free. Ordered by size alone, a rank that receives
 * few ranges but needs them for most of its compute (a rank of short sequences holding one block
 * of a long one) gets them spread over the whole phase and idles between arrivals, while a rank
 * with plenty of resident work gets its ranges first (simulated, mode (b), `magi` batch at 256
 * ranks: the critical rank idled 7.4-12.6 ms waiting for K/V while receiving half the maximum).
 *
 * So the rounds are placed group by group, greedily (an earliest-deadline rule over a fluid
 * model of each rank's work): a rank has, at any time, the work present from the start plus what
 * its arrived ranges unlock, consumed at the rate of its kernels; it runs dry at `avail[r]` ms.
 * Filling group g (ready rounds only, as many as the group has room for), the next round is the
 * one whose receivers would run dry soonest before the group after g arrives, summed over its
 * transfers; a receiver with work to spare counts for nothing, a tie keeps the old order (ready
 * group, then the base weight). A transfer arriving with group g moves its receiver's dry time to
 * max(avail, arrival) + the ms it unlocks.
 */
import type { Colouring } from './rounds.ts';

/** Inputs of {@link needOrder}: per transfer of the colouring (local ids), per rank and per group. */
export interface NeedInput {
  /** Ready group of each transfer (the round waits for its latest). */
  readonly ready: Int32Array;
  readonly dst: Int32Array;
  /** Compute (ms) each transfer unlocks on its receiver. */
  readonly unlockMs: Float64Array;
  /** Tie-break weight of each transfer (the old order: rounds by summed weight, descending). */
  readonly weight: Float64Array;
  /** Compute (ms) each rank has from the start. */
  readonly startMs: Float64Array;
  /** Estimated arrival (ms) of group g's data. */
  arrivalMs(g: number): number;
  /** Rounds group g still has room for before this colouring is placed. */
  room(g: number): number;
  /** Transfer visits the greedy may make (then the rest in the old order): bounds its cost. */
  readonly maxVisits: number;
}

/** Placement order of the rounds and each round's ready group (module comment). */
export function needOrder(c: Colouring, n: NeedInput): { order: Int32Array; readyOf: Int32Array } {
  const R = c.rounds;
  const E = c.round.length;
  const readyOf = new Int32Array(R);
  const base = new Float64Array(R);
  const off = new Int32Array(R + 1);
  for (let e = 0; e < E; e++) {
    const r = c.round[e]!;
    if (n.ready[e]! > readyOf[r]!) readyOf[r] = n.ready[e]!;
    base[r]! += n.weight[e]!;
    off[r + 1]!++;
  }
  for (let r = 0; r < R; r++) off[r + 1]! += off[r]!;
  const fill = off.slice(0, R);
  const byRound = new Int32Array(E);
  for (let e = 0; e < E; e++) byRound[fill[c.round[e]!]!++] = e;
  // Receivers in round order: the scoring below reads them in sequence, not through `byRound`.
  const dstByRound = new Int32Array(E);
  for (let j = 0; j < E; j++) dstByRound[j] = n.dst[byRound[j]!]!;
  // The old order: by ready group, then by summed weight (descending), then id.
  const fallback = new Int32Array(R);
  for (let r = 0; r < R; r++) fallback[r] = r;
  fallback.sort((a, b) => readyOf[a]! - readyOf[b]! || base[b]! - base[a]! || a - b);
  const rank = new Int32Array(R);
  for (let i = 0; i < R; i++) rank[fallback[i]!] = i;
  const order = new Int32Array(R);
  const taken = new Uint8Array(R);
  const avail = n.startMs.slice();
  const score = new Float64Array(R);
  let visits = 0;
  const scoreOf = (r: number, next: number): number => {
    let v = 0;
    for (let j = off[r]!; j < off[r + 1]!; j++) {
      const short = next - avail[dstByRound[j]!]!;
      if (short > 0) v += short;
    }
    visits += off[r + 1]! - off[r]!;
    return v;
  };
  // A max-heap of candidate rounds by (score, then the old order). Within a group a score only
  // falls (receivers gain work, the next arrival is fixed), so stored scores are upper bounds and
  // a popped round whose fresh score still beats the next stored one is the greedy's true pick
  // (lazy evaluation): each group costs one scoring pass, not one per pick.
  const heap = new Int32Array(R);
  let hn = 0;
  const above = (a: number, b: number): boolean =>
    score[a]! > score[b]! || (score[a] === score[b] && rank[a]! < rank[b]!);
  const sift = (i0: number): void => {
    let i = i0;
    const x = heap[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= hn) break;
      const c = l + 1 < hn && above(heap[l + 1]!, heap[l]!) ? l + 1 : l;
      if (!above(heap[c]!, x)) break;
      heap[i] = heap[c]!;
      i = c;
    }
    heap[i] = x;
  };
  let k = 0;
  let g = 0;
  let used = 0;
  let stale = true;
  while (k < R && visits < n.maxVisits) {
    if (used >= n.room(g)) {
      g++;
      used = 0;
      stale = true;
      continue;
    }
    const next = n.arrivalMs(g + 1);
    if (stale) {
      // (Re)build the candidates of group g: the untaken rounds ready by then.
      hn = 0;
      let minReady = Number.POSITIVE_INFINITY;
      for (let r = 0; r < R; r++) {
        if (taken[r] !== 0) continue;
        if (readyOf[r]! > g) {
          if (readyOf[r]! < minReady) minReady = readyOf[r]!;
          continue;
        }
        score[r] = scoreOf(r, next);
        heap[hn++] = r;
      }
      if (hn === 0) {
        // Nothing is ready yet in group g: the next ready round opens its group.
        g = minReady;
        used = 0;
        continue;
      }
      for (let i = (hn >> 1) - 1; i >= 0; i--) sift(i);
      stale = false;
    }
    if (hn === 0) {
      stale = true;
      g++;
      used = 0;
      continue;
    }
    const top = heap[0]!;
    score[top] = scoreOf(top, next);
    if (hn > 1) {
      const c = hn > 2 && above(heap[2]!, heap[1]!) ? 2 : 1;
      if (!above(top, heap[c]!)) {
        sift(0);
        continue;
      }
    }
    heap[0] = heap[--hn]!;
    if (hn > 0) sift(0);
    taken[top] = 1;
    order[k++] = top;
    used++;
    const at = n.arrivalMs(g);
    for (let j = off[top]!; j < off[top + 1]!; j++) {
      const e = byRound[j]!;
      const d = n.dst[e]!;
      avail[d] = Math.max(avail[d]!, at) + n.unlockMs[e]!;
    }
  }
  for (let i = 0; i < R; i++) if (taken[fallback[i]!] === 0) order[k++] = fallback[i]!;
  return { order, readyOf };
}

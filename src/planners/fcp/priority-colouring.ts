/**
 * Priority-aware exact edge colouring of a bipartite multigraph (senders left, receivers right):
 * still exactly Δ colours (König), but colour c tends to hold the edges that come c-th in priority
 * at their ends, so that taking the colours in order as rounds delivers every rank its most urgent
 * transfers first. The Euler-partition colouring (edge-coloring.ts) is faster but ignores order.
 *
 * Edges are coloured one at a time in priority order (ties by id), each with the lowest colour free
 * at both ends. When the two ends have no common free colour, a (the lowest free at the sender) and
 * b (the lowest free at the receiver) differ; if a < b, a is used at the receiver, and swapping a
 * and b along the a/b alternating path that starts there frees a at the receiver (the path cannot
 * reach the sender, which has a free: it alternates sides and would enter the sender by an a-edge);
 * symmetrically when b < a. This is the classical proof of König's theorem (Kőnig 1916; the
 * alternating-path recolouring as in Schrijver, "Combinatorial Optimization", 2003, Thm 20.1):
 * colours never exceed Δ - 1 because every vertex has fewer than Δ coloured edges while one of its
 * edges waits. Cost: O(E·Δ) to find free colours plus the swapped paths (short in practice).
 */
import { assert } from '../../core/assert.ts';

/** Colours edges src[e] -> dst[e] (ranks 0..n-1) in ascending `prio` (ties by id); returns colours and Δ. */
export function priorityColouring(
  src: Int32Array,
  dst: Int32Array,
  prio: Float64Array,
  n: number,
): { color: Int32Array; colors: number } {
  const E = src.length;
  const degS = new Int32Array(n);
  const degR = new Int32Array(n);
  let delta = 0;
  for (let e = 0; e < E; e++) delta = Math.max(delta, ++degS[src[e]!]!, ++degR[dst[e]!]!);
  const color = new Int32Array(E).fill(-1);
  if (E === 0) return { color, colors: 0 };
  // at[v * delta + c]: edge of colour c at sender v (S) or receiver v (R), or -1.
  const S = new Int32Array(n * delta).fill(-1);
  const R = new Int32Array(n * delta).fill(-1);
  const order = Int32Array.from({ length: E }, (_, e) => e).sort((x, y) => prio[x]! - prio[y]! || x - y);
  const path: number[] = [];
  const lowestFree = (tab: Int32Array, v: number): number => {
    const base = v * delta;
    for (let c = 0; c < delta; c++) if (tab[base + c] === -1) return c;
    assert(false, 'priority colouring: no free colour (degree above Δ)');
    return -1;
  };
  /** Swaps colours a and b along the alternating path that leaves `v` (on side `fromR`) by colour a. */
  const flip = (v: number, fromR: boolean, a: number, b: number): void => {
    path.length = 0;
    let onR = fromR;
    let x = v;
    let want = a;
    for (;;) {
      const e = (onR ? R : S)[x * delta + want]!;
      if (e < 0) break;
      path.push(e);
      x = onR ? src[e]! : dst[e]!;
      onR = !onR;
      want = want === a ? b : a;
    }
    for (const e of path) {
      S[src[e]! * delta + color[e]!] = -1;
      R[dst[e]! * delta + color[e]!] = -1;
    }
    for (const e of path) {
      const c = color[e] === a ? b : a;
      color[e] = c;
      S[src[e]! * delta + c] = e;
      R[dst[e]! * delta + c] = e;
    }
  };
  for (let k = 0; k < E; k++) {
    const e = order[k]!;
    const u = src[e]!;
    const v = dst[e]!;
    // Lowest colour free at both ends, if any.
    let c = -1;
    for (let x = 0; x < delta; x++)
      if (S[u * delta + x] === -1 && R[v * delta + x] === -1) {
        c = x;
        break;
      }
    if (c < 0) {
      const a = lowestFree(S, u);
      const b = lowestFree(R, v);
      if (a < b) {
        flip(v, true, a, b);
        c = a;
      } else {
        flip(u, false, b, a);
        c = b;
      }
    }
    color[e] = c;
    S[u * delta + c] = e;
    R[v * delta + c] = e;
  }
  return { color, colors: delta };
}

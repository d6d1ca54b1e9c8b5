/**
 * Congestion-free round decomposition: an exact Δ-edge-colouring of a bipartite multigraph.
 *
 * König (1916): the edges of a bipartite multigraph whose largest degree is Δ split into exactly Δ
 * matchings. Each matching is one round in which every rank sends at most one block and receives at
 * most one block. Construction (the Euler-partition divide and conquer of Gabow, "Using Euler
 * partitions to edge color bipartite multigraphs", 1976; also the skeleton of Cole-Ost-Schirra 2001
 * and Alon 2003):
 *
 *  1. Regularise. Merge the vertices of each side into bins whose degrees add up to at most Δ
 *     (next fit in vertex order). A proper colouring of the merged graph is a proper colouring of
 *     the original, since merging only adds constraints. Any two consecutive bins hold more than Δ
 *     edges, so a side has at most 2E/Δ + 1 bins. Pad both sides to the same bin count N and add
 *     dummy edges between bins of degree below Δ until every bin has degree exactly Δ: the padded
 *     graph is Δ-regular with N·Δ <= 2E + Δ edges.
 *  2. Colour a d-regular bipartite multigraph with d colours, recursively:
 *     - d even: Euler partition. Pair up the edges at every vertex; the pairs chain the edges into
 *       closed trails, which alternate sides (bipartite) and so have even length. Giving the trail's
 *       edges to halves 0,1,0,1,... puts the two edges of every pair into different halves: every
 *       vertex keeps d/2 edges in each half, two d/2-regular graphs with disjoint palettes.
 *     - d odd: a regular bipartite graph has a perfect matching (Hall); find it with Hopcroft-Karp
 *       (1973), give it one colour and recurse on the (d-1)-regular rest.
 *
 * Cost: O(E) per Euler level (log2 Δ levels) plus one Hopcroft-Karp over all edges of each level
 * whose degree is odd (at most log2 Δ of them; O(E·√N) worst case each, but a greedy start leaves
 * few augmentations in practice). Memory: about six 32-bit words per padded edge, no n·Δ tables.
 *
 * Layout: the subgraph of a recursion step is a segment [off, off+m) of its edges sorted by left bin
 * (stable, ties in edge-id order), holding each edge's id and right bin. Every bin has exactly d edges
 * in the segment, so bin u owns positions u·d .. u·d+d-1 (a CSR without offsets) and the Euler pairs
 * at the left ends are positions (2i, 2i+1). Pairs at the right ends come from one scan with a
 * per-bin "waiting edge" slot. Children are stable partitions of the segment, so they stay sorted by
 * left bin, and every index is segment-relative: deep levels touch only their own small segment.
 */
import { assert } from '../../../core/assert.ts';

/** Data of one colouring run over the padded Δ-regular graph; per-edge arrays are by position. */
interface Work {
  /** Bins per side (N). */
  readonly bins: number;
  /** Padded edge id at each position; originals keep their input ids, dummies follow. */
  readonly id: Int32Array;
  /** Right bin of the edge at each position. */
  readonly dst: Int32Array;
  /** Segment-relative position of the edge paired with this one at its right end (Euler split). */
  readonly pairR: Int32Array;
  /** Per position: Euler half (0/1; 2 = not yet walked) or 1 = in the matching. */
  readonly flag: Uint8Array;
  /** Partition scratch. */
  readonly tmpId: Int32Array;
  readonly tmpDst: Int32Array;
  /** Result: colour of each padded edge id. */
  readonly color: Int32Array;
  /** Per right bin: position of an edge still waiting for its right-end partner, or -1. */
  readonly waiting: Int32Array;
  /** Hopcroft-Karp scratch, one slot per bin; mates are segment-relative positions. */
  readonly mateL: Int32Array;
  readonly mateR: Int32Array;
  readonly dist: Int32Array;
  readonly iter: Int32Array;
  readonly queue: Int32Array;
  readonly stackU: Int32Array;
  readonly stackP: Int32Array;
}

function checkInput(src: Int32Array, dst: Int32Array, n: number): void {
  assert(src.length === dst.length, `edge colouring: ${src.length} sources but ${dst.length} destinations`);
  assert(Number.isInteger(n) && n >= 0, `edge colouring: bad vertex count ${n}`);
  for (let e = 0; e < src.length; e++) {
    const s = src[e]!;
    const d = dst[e]!;
    // Test first, format the message only on failure: this loop runs over every edge.
    if (s >= 0 && s < n && d >= 0 && d < n && s !== d) continue;
    assert(s !== d, `edge colouring: edge ${e} is a self-loop on rank ${s}`);
    assert(false, `edge colouring: edge ${e} (${s} -> ${d}) outside 0..${n - 1}`);
  }
}

function degrees(ends: Int32Array, n: number): Int32Array {
  const deg = new Int32Array(n);
  for (let e = 0; e < ends.length; e++) deg[ends[e]!]!++;
  return deg;
}

function maxOf(a: Int32Array): number {
  let best = 0;
  for (let i = 0; i < a.length; i++) if (a[i]! > best) best = a[i]!;
  return best;
}

/** Δ of the multigraph: the largest send or receive degree. */
export function maxDegree(src: Int32Array, dst: Int32Array, n: number): number {
  checkInput(src, dst, n);
  return Math.max(maxOf(degrees(src, n)), maxOf(degrees(dst, n)));
}

/**
 * Next-fit packing of vertex degrees into bins of capacity `cap`; writes each vertex's bin into
 * `bin` and returns the bin loads. Consecutive bins together exceed `cap` (a new bin opens only
 * when the next vertex does not fit), which bounds the bin count by 2E/cap + 1.
 */
function packBins(deg: Int32Array, cap: number, bin: Int32Array): Int32Array {
  const loads: number[] = [];
  let load = 0;
  for (let v = 0; v < deg.length; v++) {
    const d = deg[v]!;
    if (loads.length === 0 || load + d > cap) {
      if (loads.length > 0) loads[loads.length - 1] = load;
      loads.push(0);
      load = 0;
    }
    bin[v] = loads.length - 1;
    load += d;
  }
  if (loads.length > 0) loads[loads.length - 1] = load;
  return Int32Array.from(loads);
}

/** Counting sort of the edge ids by `key` (stable, so ids stay ascending within a bin). */
function sortByBin(key: Int32Array, bins: number, out: Int32Array): void {
  const start = new Int32Array(bins + 1);
  for (let e = 0; e < key.length; e++) start[key[e]! + 1]!++;
  for (let b = 0; b < bins; b++) start[b + 1]! += start[b]!;
  for (let e = 0; e < key.length; e++) out[start[key[e]!]!++] = e;
}

/** Builds the padded Δ-regular graph (step 1 of the module comment), sorted by left bin. */
function regularise(
  src: Int32Array,
  dst: Int32Array,
  degL: Int32Array,
  degR: Int32Array,
  delta: number,
): Work {
  const edges = src.length;
  const binOfL = new Int32Array(degL.length);
  const binOfR = new Int32Array(degR.length);
  const loadL0 = packBins(degL, delta, binOfL);
  const loadR0 = packBins(degR, delta, binOfR);
  const bins = Math.max(loadL0.length, loadR0.length);
  const loadL = new Int32Array(bins);
  const loadR = new Int32Array(bins);
  loadL.set(loadL0);
  loadR.set(loadR0);
  const total = bins * delta;
  const s = new Int32Array(total);
  const d = new Int32Array(total);
  for (let e = 0; e < edges; e++) {
    s[e] = binOfL[src[e]!]!;
    d[e] = binOfR[dst[e]!]!;
  }
  // Dummy edges: both sides miss the same number of edges (bins·Δ − E), so two pointers over the
  // deficient bins fill every deficit exactly.
  let e = edges;
  let i = 0;
  let j = 0;
  while (e < total) {
    while (loadL[i]! === delta) i++;
    while (loadR[j]! === delta) j++;
    assert(i < bins && j < bins, 'edge colouring: padding ran out of deficient bins');
    const k = Math.min(delta - loadL[i]!, delta - loadR[j]!);
    s.fill(i, e, e + k);
    d.fill(j, e, e + k);
    loadL[i]! += k;
    loadR[j]! += k;
    e += k;
  }
  const id = new Int32Array(total);
  sortByBin(s, bins, id);
  for (let p = 0; p < total; p++) s[p] = d[id[p]!]!; // s becomes the right bin by position
  return {
    bins,
    id,
    dst: s,
    pairR: new Int32Array(total),
    flag: new Uint8Array(total),
    tmpId: d,
    tmpDst: new Int32Array(total),
    color: new Int32Array(total),
    waiting: new Int32Array(bins).fill(-1),
    mateL: new Int32Array(bins),
    mateR: new Int32Array(bins),
    dist: new Int32Array(bins),
    iter: new Int32Array(bins),
    queue: new Int32Array(bins),
    stackU: new Int32Array(bins),
    stackP: new Int32Array(bins),
  };
}

/**
 * Stable partition of segment [off, off+m) by `flag`: positions with flag 0 move to the front
 * (there are m0 of them), the others follow. Both children stay sorted by left bin.
 */
function split(w: Work, off: number, m: number, m0: number): void {
  const { id, dst, flag, tmpId, tmpDst } = w;
  let a = off;
  let b = 0;
  for (let p = off, end = off + m; p < end; p++) {
    if (flag[p] === 0) {
      id[a] = id[p]!;
      dst[a++] = dst[p]!;
    } else {
      tmpId[b] = id[p]!;
      tmpDst[b++] = dst[p]!;
    }
  }
  assert(a === off + m0, 'edge colouring: unbalanced split');
  id.set(tmpId.subarray(0, b), a);
  dst.set(tmpDst.subarray(0, b), a);
}

/**
 * Euler partition of an even-regular segment into two d/2-regular halves, marked in `flag`
 * (0 or 1 per position).
 */
function eulerHalves(w: Work, off: number, m: number): void {
  const { dst, pairR, flag, waiting } = w;
  // Pair the edges at each right bin in position order; every bin has an even count, so every
  // waiting slot is empty again at the end.
  for (let p = 0; p < m; p++) {
    const v = dst[off + p]!;
    const q = waiting[v]!;
    if (q < 0) waiting[v] = p;
    else {
      pairR[off + p] = q;
      pairR[off + q] = p;
      waiting[v] = -1;
    }
  }
  flag.fill(2, off, off + m);
  for (let first = 0; first < m; first++) {
    if (flag[off + first] !== 2) continue;
    // Walk the closed trail: enter an edge at its left end, leave at its right end into the
    // right-paired edge (other half), leave that at its left end into its left partner.
    let p = first;
    do {
      flag[off + p] = 0;
      const partner = pairR[off + p]!;
      flag[off + partner] = 1;
      p = partner ^ 1;
    } while (p !== first);
  }
}

/**
 * Perfect matching of a d-regular segment (Hopcroft-Karp, 1973; greedy start, iterative DFS).
 * Left bin u owns positions u·d .. u·d+d-1. Leaves the matched position of bin u in mateL[u].
 */
function perfectMatching(w: Work, off: number, d: number): void {
  const { bins, mateL, mateR, dist, iter, queue, stackU, stackP } = w;
  const dst = w.dst.subarray(off, off + bins * d);
  mateL.fill(-1);
  mateR.fill(-1);
  let free = 0;
  for (let u = 0; u < bins; u++) {
    for (let p = u * d, end = p + d; p < end; p++) {
      const v = dst[p]!;
      if (mateR[v]! < 0) {
        mateL[u] = p;
        mateR[v] = p;
        break;
      }
    }
    if (mateL[u]! < 0) free++;
  }
  const unreached = 0x7fffffff;
  while (free > 0) {
    // BFS layers from the free left bins over alternating paths.
    let head = 0;
    let tail = 0;
    for (let u = 0; u < bins; u++) {
      if (mateL[u]! < 0) {
        dist[u] = 0;
        queue[tail++] = u;
      } else dist[u] = unreached;
    }
    let found = false;
    while (head < tail) {
      const u = queue[head++]!;
      for (let p = u * d, end = p + d; p < end; p++) {
        const m = mateR[dst[p]!]!;
        if (m < 0) found = true;
        else {
          const x = (m / d) | 0;
          if (dist[x] === unreached) {
            dist[x] = dist[u]! + 1;
            queue[tail++] = x;
          }
        }
      }
    }
    assert(found, 'edge colouring: regular bipartite graph without a perfect matching');
    // DFS along the layers; every augmentation matches one more left bin.
    for (let u = 0; u < bins; u++) iter[u] = u * d;
    for (let root = 0; root < bins; root++) {
      if (mateL[root]! >= 0) continue;
      let sp = 0;
      stackU[sp++] = root;
      while (sp > 0) {
        const u = stackU[sp - 1]!;
        if (iter[u] === u * d + d) {
          dist[u] = unreached; // dead end for the rest of this phase
          sp--;
          continue;
        }
        const p = iter[u]!++;
        stackP[sp - 1] = p;
        const m = mateR[dst[p]!]!;
        if (m < 0) {
          for (let k = sp - 1; k >= 0; k--) {
            const pk = stackP[k]!;
            mateL[stackU[k]!] = pk;
            mateR[dst[pk]!] = pk;
          }
          free--;
          break;
        }
        const x = (m / d) | 0;
        if (dist[x] === dist[u]! + 1) stackU[sp++] = x;
      }
    }
  }
}

/** Colours the d-regular segment [off, off+m) with colours base .. base+d-1. */
function colourRegular(w: Work, off: number, m: number, d: number, base: number): void {
  const { id, color, flag } = w;
  if (d === 0) return;
  if (d === 1) {
    for (let p = off, end = off + m; p < end; p++) color[id[p]!] = base;
    return;
  }
  if ((d & 1) === 1) {
    perfectMatching(w, off, d);
    flag.fill(0, off, off + m);
    for (let u = 0; u < w.bins; u++) {
      const p = off + w.mateL[u]!;
      flag[p] = 1;
      color[id[p]!] = base;
    }
    split(w, off, m, m - w.bins);
    colourRegular(w, off, m - w.bins, d - 1, base + 1);
    return;
  }
  eulerHalves(w, off, m);
  if (d === 2) {
    // The halves are perfect matchings: colour them directly instead of splitting.
    for (let p = off, end = off + m; p < end; p++) color[id[p]!] = base + flag[p]!;
    return;
  }
  const half = m >>> 1;
  split(w, off, m, half);
  colourRegular(w, off, half, d >>> 1, base);
  colourRegular(w, off + half, half, d >>> 1, base + (d >>> 1));
}

/**
 * Colours the edges of a bipartite multigraph (senders 0..n-1 on the left, receivers 0..n-1 on the right)
 * so that no two edges sharing a sender or sharing a receiver get the same colour, using exactly
 * Δ = max over ranks of (edges sent, edges received) colours. Deterministic.
 *
 * Edge e goes from sender `src[e]` to receiver `dst[e]`; parallel edges are allowed, self-loops
 * (src === dst) are a caller bug and fail an assertion. Every colour 0..Δ-1 is used (each colour
 * class is one perfect matching of the padded graph, and padding only adds dummy edges to bins
 * below degree Δ, so a bin holding a max-degree vertex has an original edge of every colour).
 */
export function colorBipartiteEdges(
  src: Int32Array,
  dst: Int32Array,
  n: number,
): { color: Int32Array; colors: number } {
  checkInput(src, dst, n);
  const degL = degrees(src, n);
  const degR = degrees(dst, n);
  const delta = Math.max(maxOf(degL), maxOf(degR));
  if (delta === 0) return { color: new Int32Array(0), colors: 0 };
  const w = regularise(src, dst, degL, degR, delta);
  colourRegular(w, 0, w.bins * delta, delta, 0);
  return { color: w.color.slice(0, src.length), colors: delta };
}

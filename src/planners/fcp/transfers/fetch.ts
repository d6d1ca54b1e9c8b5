/**
 * The fetch graph (docs/design.md, FCP's planner): who sends each K/V request (fetch-requests.ts:
 * the remote key ranges every rank's query runs attend, each fetched once per rank).
 *
 * Sender choice: the user ranks of a long sequence would send its K/V to every rank that computes
 * with it, on top of its whole reshuffle, while the homes hold those tokens in smaller runs spread
 * over more ranks. Requests are taken largest first, and each segment of a request (its part in one
 * home run) goes to whichever of its home and its user rank is less loaded: tokens sent plus a
 * per-message overhead, the user ranks starting with their forward `in` bytes, NIC and NVLink
 * counted apart (a transfer inside a node loads only NVLink, 8x faster). Ties go to the user rank
 * (available from time zero); consecutive user segments are one message.
 *
 * Two-hop fan-out (`fanOut`, beyond the paper; MagiAttention's native backend de-duplicates per node
 * the same way): requests of one range (same sequence and start) that several ranks of a node need
 * from other nodes cross the NIC once: one of those ranks, chosen to spread the NIC fetches over
 * the node (relayFeeds), fetches the longest and forwards it over NVLink to the others after it
 * arrives, one forward per message of its fetch (a range across several home runs arrives in
 * several). Long sequences
 * spread over many nodes are where this matters: every rank holding a zig-zag unit of a 512K
 * sequence needs almost all of its K/V, so without it each rank of a node pulls the same ranges
 * over its own NIC.
 *
 * With `fanOut` the forward's hot senders also get forwarding trees (forward-tree.ts).
 */
import { IntColumn } from '../../../core/int-column.ts';
import { sameNode } from '../../../core/nodes.ts';
import { TripleIds } from '../../../core/triple-ids.ts';
import { firstEndingAfter, type HomeRuns } from '../placement/layout.ts';
import type { FetchRequests } from './fetch-requests.ts';
import { forwardTrees, reshuffleLoad, TREE_DEFAULTS } from './forward-tree.ts';
import { type Pieces, pieceAt } from './reshuffle.ts';

/** K/V transfers chosen for the requests. */
export interface KvEdges {
  readonly src: Int32Array;
  readonly dst: Int32Array;
  readonly seq: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  /** RS of the receiver. */
  readonly rs: Int32Array;
  /** Piece whose `in` transfer must reach the sender first (forward, home senders), else -1. */
  readonly dep: Int32Array;
  /**
   * Two-hop fan-out: the K/V edge that brings this edge's range to its sender (a rank of the
   * receiver's node that fetched the same range over the NIC) and must arrive first, else -1.
   */
  readonly relay: Int32Array;
}

/** NVLink bandwidth over NIC bandwidth (400 over 50 GB/s on Hopper). */
const NVLINK_SPEEDUP = 8;

/** Per-message overhead in the sender choice, in tokens (a message's latency at link speed, roughly). */
const MESSAGE_TOKENS = 512;

/**
 * Sorts ids 0..n-1 by descending `len` (ties: ascending id) without a comparator: a counting sort
 * by length (lengths are at most one message, `chunk` tokens; one pass, no n log n), or, for
 * lengths far beyond the count, a numeric sort of packed keys.
 */
function byDescendingLength(len: Int32Array): Int32Array {
  const n = len.length;
  let max = 0;
  for (let i = 0; i < n; i++) max = Math.max(max, len[i]!);
  const out = new Int32Array(n);
  if (max <= 4 * n + 65536) {
    // Bucket b = max - len: longest first; ids ascend within a bucket (stable).
    const first = new Int32Array(max + 2);
    for (let i = 0; i < n; i++) first[max - len[i]! + 1]!++;
    for (let b = 0; b <= max; b++) first[b + 1]! += first[b]!;
    for (let i = 0; i < n; i++) out[first[max - len[i]!]!++] = i;
    return out;
  }
  const key = new Float64Array(n);
  for (let i = 0; i < n; i++) key[i] = (max - len[i]!) * n + i; // < 2^31 * 2^31: exact in a double
  key.sort();
  for (let i = 0; i < n; i++) out[i] = key[i]! % n;
  return out;
}

/**
 * Two-hop feeds (`fanOut`): for every range that several ranks of one node need from other nodes
 * (requests of the same sequence and start, none of whose home runs nor user rank is in the
 * receiver's node), one of them fetches it over the NIC and relays it to the others over NVLink.
 * Requests across several home runs count too: in mode (a) the prefix of a spread sequence lies in
 * many runs, and with one run only the forward moved 1.73x the distinct K/V tokens per pair of
 * nodes across them (`magi` 64 ranks seed 1, PXN, relays kept), 1.27x with them; simulated, B - A
 * forward MFU: PXN 64-256 +0.0028 ± 0.0014 (8 up, 3 down), direct 128-256 +0.0047 ± 0.0028 (6
 * up, 2 down); mode (b)'s plans do not change (docs/results.md, "Session 34").
 * The fetcher is the receiver of a longest such request (it must cover the others) with the least
 * link time so far: NIC tokens fetched plus NVLink tokens relayed over NVLINK_SPEEDUP (ties:
 * request order), ranges taken largest first: every rank of a node then pulls about 1/k of the
 * ranges its k peers share, a node-level all-gather. The previous rule took the first request of
 * a range in the sender order as its feed, so one rank per node fetched nearly everything and
 * relayed it seven times (simulated, longtail, 1024 ranks, mode (b), seed 1: busiest NIC receiver
 * 64.3 ms, `kv` Δ 1734 against 525 without relays). Counting relayed tokens in the cost, not only
 * as a tie-break, cut `kv` rounds and comm imbalance (simulated, mode (b), fluid, 3 batches, fwd
 * MFU / comm imbalance: longtail 1024 0.553 / 59.7% -> 0.559 / 53.9%, magi 256 0.515 / 63.3% ->
 * 0.530 / 55.6%, longtail 256 0.583 / 46.6% -> 0.577 / 47.8%). Returns, per request, the request
 * that relays it (-1: direct).
 */
function relayFeeds(
  req: FetchRequests,
  runs: HomeRuns,
  segOff: Int32Array,
  segRun: Int32Array,
  order: Int32Array,
  world: number,
  g: number,
): Int32Array {
  const n = req.rs.length;
  const relayReq = new Int32Array(n).fill(-1);
  const nicIn = new Float64Array(world);
  const nvlOut = new Float64Array(world);
  // Remote requests grouped by (sequence, start, receiver's node), groups numbered by first
  // request in the sender order and members kept in it (core/triple-ids.ts; a Map keyed by
  // template strings was half of this function at 256 ranks).
  const groupIds = new TripleIds(n);
  const groupOf = new Int32Array(n);
  const remoteOrder = new Int32Array(n);
  const sizeOf = new Int32Array(n + 1);
  let m = 0;
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    const v = runs.rsRank[req.rs[i]!]!;
    const vn = Math.floor(v / g);
    let remote = Math.floor(req.user[i]! / g) !== vn;
    for (let j = segOff[i]!; remote && j < segOff[i + 1]!; j++)
      if (Math.floor(runs.rank[segRun[j]!]! / g) === vn) remote = false;
    if (!remote) continue;
    const s = runs.rsSeq[req.rs[i]!]!;
    const a = req.start[i]!;
    const x = groupIds.intern(s, a, vn);
    groupOf[i] = x;
    sizeOf[x + 1]!++;
    remoteOrder[m++] = i;
  }
  const G = groupIds.size;
  for (let x = 0; x < G; x++) sizeOf[x + 1]! += sizeOf[x]!;
  const at = sizeOf.slice(0, G);
  const members = new Int32Array(m);
  for (let t = 0; t < m; t++) members[at[groupOf[remoteOrder[t]!]!]!++] = remoteOrder[t]!;
  // Requests fetched over the NIC anyway (alone in their node) count first.
  for (let x = 0; x < G; x++)
    if (sizeOf[x + 1]! - sizeOf[x]! === 1) {
      const i = members[sizeOf[x]!]!;
      nicIn[runs.rsRank[req.rs[i]!]!]! += req.length[i]!;
    }
  for (let x = 0; x < G; x++) {
    const lo = sizeOf[x]!;
    const hi = sizeOf[x + 1]!;
    if (hi - lo < 2) continue;
    // Longest first (the sender order), so the candidates are the leading requests of that length.
    const len = req.length[members[lo]!]!;
    let feed = members[lo]!;
    for (let j = lo + 1; j < hi && req.length[members[j]!] === len; j++) {
      const a = runs.rsRank[req.rs[members[j]!]!]!;
      const b = runs.rsRank[req.rs[feed]!]!;
      const ca = nicIn[a]! + nvlOut[a]! / NVLINK_SPEEDUP;
      const cb = nicIn[b]! + nvlOut[b]! / NVLINK_SPEEDUP;
      if (ca < cb) feed = members[j]!;
    }
    const f = runs.rsRank[req.rs[feed]!]!;
    nicIn[f]! += len;
    for (let j = lo; j < hi; j++) {
      const i = members[j]!;
      if (i === feed) continue;
      relayReq[i] = feed;
      nvlOut[f]! += req.length[i]!;
    }
  }
  return relayReq;
}

/**
 * Chooses a sender for every request (module comment). `homesReady`: the homes hold K/V from time
 * zero (backward); otherwise a home that is not the range's user rank depends on its `in` piece.
 */
export function chooseSenders(
  req: FetchRequests,
  runs: HomeRuns,
  pieces: Pieces,
  world: number,
  homesReady: boolean,
  inWeight = 0,
  gpusPerNode = world,
  fanOut = false,
): KvEdges {
  const n = req.rs.length;
  // Home segments of every request (CSR): the home runs it crosses, and the overlap lengths.
  const segOff = new Int32Array(n + 1);
  // Growable typed columns (number[] pushes were a third of this function at 4096 ranks).
  const segRunC = new IntColumn(Math.max(16, 2 * n));
  const segLenC = new IntColumn(Math.max(16, 2 * n));
  for (let i = 0; i < n; i++) {
    const s = runs.rsSeq[req.rs[i]!]!;
    const a = req.start[i]!;
    const b = a + req.length[i]!;
    const hi = runs.off[s + 1]!;
    for (let r = firstEndingAfter(runs.start, runs.length, runs.off[s]!, hi, a); r < hi; r++) {
      const ra = runs.start[r]!;
      if (ra >= b) break;
      segRunC.push(r);
      segLenC.push(Math.min(b, ra + runs.length[r]!) - Math.max(a, ra));
    }
    segOff[i + 1] = segRunC.length;
  }
  const segRun = segRunC.toArray();
  const segLen = segLenC.toArray();
  const order = byDescendingLength(req.length);
  // Sender load in K/V-token units, starting from the forward `in` each user rank must send
  // (Q,K,V: `inWeight` K/V tokens' worth per token), so that K/V leaves the user ranks of a long
  // sequence, already busy with its reshuffle, for its homes. NIC and NVLink are separate links:
  // a sender's load is the larger of its NIC tokens and its NVLink tokens over NVLINK_SPEEDUP, and
  // a transfer inside a node loads only the latter.
  const cost = new Float64Array(world);
  const nvl = new Float64Array(world);
  const g = Math.max(1, gpusPerNode);
  if (inWeight > 0)
    for (let i = 0; i < pieces.moving.length; i++) {
      const p = pieces.moving[i]!;
      const from = pieces.user[p]!;
      const w = inWeight * pieces.length[p]!;
      if (sameNode(from, pieces.home[p]!, g)) nvl[from]! += w;
      else cost[from]! += w;
    }
  // Per segment: sent by its home (1) or by the request's user rank (0). Each segment goes to the
  // less loaded of the two (ties: the user rank, which holds the data from time zero).
  const viaHome = new Uint8Array(segRun.length);
  // Fan-out: the request relaying each request (-1: fetched directly), chosen up front per node
  // (relayFeeds: one fetch over the NIC per range and node, spread over the node's receivers).
  const relayReq = fanOut && g > 1 ? relayFeeds(req, runs, segOff, segRun, order, world, g) : null;
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    const u = req.user[i]!;
    const vn = Math.floor(runs.rsRank[req.rs[i]!]! / g);
    const un = Math.floor(u / g) === vn;
    if (relayReq !== null && relayReq[i]! >= 0) {
      nvl[runs.rsRank[req.rs[relayReq[i]!]!]!]! += req.length[i]! + MESSAGE_TOKENS;
      continue;
    }
    for (let j = segOff[i]!; j < segOff[i + 1]!; j++) {
      const h = runs.rank[segRun[j]!]!;
      const add = segLen[j]! + MESSAGE_TOKENS;
      const hn = Math.floor(h / g) === vn;
      const viaH = hn
        ? Math.max(cost[h]!, (nvl[h]! + add) / NVLINK_SPEEDUP)
        : Math.max(cost[h]! + add, nvl[h]! / NVLINK_SPEEDUP);
      const viaU = un
        ? Math.max(cost[u]!, (nvl[u]! + add) / NVLINK_SPEEDUP)
        : Math.max(cost[u]! + add, nvl[u]! / NVLINK_SPEEDUP);
      if (h !== u && viaH < viaU) {
        viaHome[j] = 1;
        if (hn) nvl[h]! += add;
        else cost[h]! += add;
      } else {
        if (un) nvl[u]! += add;
        else cost[u]! += add;
      }
    }
  }
  /**
   * Visits the messages of request `i` in order, clipped to token `end`: its home segments and
   * its runs of consecutive user segments (merged into one message), as the edges below are
   * emitted; `seg` is the message's first segment.
   */
  const messagesOf = (
    i: number,
    end: number,
    visit: (from: number, x: number, len: number, seg: number) => void,
  ): void => {
    const a = req.start[i]!;
    const u = req.user[i]!;
    let from = -1;
    let x0 = 0;
    let len = 0;
    let seg = -1;
    for (let j = segOff[i]!; j < segOff[i + 1]!; j++) {
      const x = Math.max(a, runs.start[segRun[j]!]!);
      if (x >= end) break;
      const l = Math.min(segLen[j]!, end - x);
      if (viaHome[j] === 0 && seg >= 0 && viaHome[seg] === 0) {
        len += l;
        continue;
      }
      if (seg >= 0) visit(from, x0, len, seg);
      from = viaHome[j] === 1 ? runs.rank[segRun[j]!]! : u;
      x0 = x;
      len = l;
      seg = j;
    }
    if (seg >= 0) visit(from, x0, len, seg);
  };
  // One edge per message: of the request itself, or of its feed up to its own end when relayed.
  let edgeCount = 0;
  for (let i = 0; i < n; i++) {
    const f = relayReq !== null ? relayReq[i]! : -1;
    messagesOf(f >= 0 ? f : i, req.start[i]! + req.length[i]!, () => edgeCount++);
  }
  const src = new Int32Array(edgeCount);
  const dst = new Int32Array(edgeCount);
  const seq = new Int32Array(edgeCount);
  const start = new Int32Array(edgeCount);
  const length = new Int32Array(edgeCount);
  const rsCol = new Int32Array(edgeCount);
  const dep = new Int32Array(edgeCount);
  const relay = new Int32Array(edgeCount).fill(-1);
  const firstEdge = new Int32Array(n);
  let e = 0;
  for (let i = 0; i < n; i++) {
    const rs = req.rs[i]!;
    const h = runs.rsRank[rs]!;
    const s = runs.rsSeq[rs]!;
    const a = req.start[i]!;
    firstEdge[i] = e;
    // A relayed request: one edge per message of its feed, sent by the feed's receiver.
    const f = relayReq !== null ? relayReq[i]! : -1;
    const fr = f >= 0 ? runs.rsRank[req.rs[f]!]! : -1;
    let k = 0;
    messagesOf(f >= 0 ? f : i, a + req.length[i]!, (from, x, len, j) => {
      src[e] = f >= 0 ? fr : from;
      dst[e] = h;
      seq[e] = s;
      start[e] = x;
      length[e] = len;
      rsCol[e] = rs;
      // A home segment lies in one user row (the request's), so in one piece of the run.
      dep[e] = f >= 0 || viaHome[j] === 0 || homesReady ? -1 : pieceAt(pieces, segRun[j]!, x);
      // The feed's k-th message brings a relay's range (its edge index is known once all are emitted).
      if (f >= 0) relay[e] = k++;
      e++;
    });
  }
  // A relay edge waits for the feed's message that brings its range (edges are emitted in request
  // order, a request's messages in position order).
  if (relayReq !== null)
    for (let i = 0; i < n; i++) {
      const f = relayReq[i]!;
      if (f < 0) continue;
      for (let x = firstEdge[i]!, xe = i + 1 < n ? firstEdge[i + 1]! : e; x < xe; x++)
        relay[x] = firstEdge[f]! + relay[x]!;
    }
  const direct: KvEdges = { src, dst, seq, start, length, rs: rsCol, dep, relay };
  if (!fanOut || homesReady) return direct;
  // Forwarding trees for the forward's hot senders (forward-tree.ts).
  return forwardTrees(direct, world, g, reshuffleLoad(pieces, world, inWeight), TREE_DEFAULTS);
}

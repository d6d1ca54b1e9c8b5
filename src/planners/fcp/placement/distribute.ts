/**
 * Block distributor (docs/design.md, FCP's planner): multi-dimensional Longest-Processing-Time greedy
 * (Graham, 1969, for one dimension) over placement units, then refinement.
 *
 * Each unit has two loads, memory (tokens) and compute (its weight: modelled kernel time, or
 * attended pairs with `balance: 'pairs'`; weights.ts), each normalised by its batch total. Compute
 * must come out balanced (it is the attention time); memory is a hard limit.
 *
 * 1. Order. Memory-dominant units (normalised memory >= normalised compute: short and medium
 *    sequences) go first, by descending size; then compute-dominant units (long sequences)
 *    sequence by sequence, largest sequence first, each sequence's units in order. The
 *    compute-dominant units then close every rank's compute gap at little memory cost: done the
 *    other way round, memory-dense units placed last flood the least-loaded ranks' memory while
 *    barely raising their compute, and those ranks stay light (seen on `longtail` at 64 ranks:
 *    memory-full ranks at 60-70% of the mean compute).
 * 2. Choice. Each unit goes to the rank that minimises the larger of its two loads after the unit
 *    is added (the min-max rule of multi-dimensional LPT): compute over the per-rank average,
 *    memory over the memory-dominant units' per-rank mean (first phase: both balanced) or over the
 *    capacity (second phase: compute LPT, memory as the limit). Candidates are the few least
 *    compute-loaded (and, in the first phase, least memory-loaded) ranks with room, read off
 *    indexed heaps in O(log N); ranks that no remaining unit fits are retired from the heaps.
 * 3. Preferences override that choice, in this order (beyond the paper; none with `noLocality`
 *    except affinity):
 *    - Home stays home: a memory-dominant unit goes to the rank holding most of its tokens in the
 *      user layout while that rank has memory and stays under the average compute. Short
 *      sequences carry little compute, and a token that stays costs no reshuffle in either phase.
 *    - Sequence affinity: the next unit of a sequence goes to the rank that took its previous
 *      unit while that rank stays within the per-rank average compute (and, for memory-dominant
 *      units, 1.1x the first phase's mean memory). Plain LPT deals the equal units of a long
 *      sequence round-robin over every rank, so every rank would need that sequence's whole K/V.
 *    - Locality tie-break (docs/design.md): among candidates whose score is within `tolerance` (a
 *      fraction of the per-rank average) of the best, the rank that holds most of the unit's tokens
 *      in the user layout; then, for a long sequence, a user rank of the unit's blocks that takes
 *      it under the average (half the unit stays, and its work can start at once).
 *    - Topology: else a long sequence's unit goes to the least loaded rank of the nodes holding
 *      its tokens (or of its previous unit's node) that takes it under the average, so that its
 *      reshuffle and much of its K/V move over NVLink.
 *    - Node packing (opt-in, `nodePacking`; experimental): when those nodes are full, the node
 *      with the most compute room under the average; when no rank takes the unit under the
 *      average, the least loaded rank of a node the sequence already uses (within NODE_SLACK of
 *      the least loaded rank anywhere). Off by default: simulated on longtail it gains 1.5-3%
 *      forward MFU in mode (b) at 16-64 ranks but loses 5-13% at 256 (its plans fetch ~1.5x the
 *      K/V bytes: units land one per rank on more ranks).
 * 4. Refinement, over blocks (refine.ts): moves and swaps between the most and the least loaded
 *    ranks while they lower the maximum, preferring blocks that move anyway and the same node.
 *
 * With `packHeavyFirst` (mode (b), the loader layout: nothing is reshuffled, so the user layout's
 * locality is worth nothing) the compute-dominant units are first packed onto consecutive ranks,
 * sequence by sequence (heavy.ts), and keep those ranks; the memory-dominant units then fill
 * around them by the rules above, and refinement also caps each rank's send load (refine.ts):
 * communication becomes a placement dimension beside compute and memory.
 */
import { FcpError, issue } from '../../../core/issues.ts';
import type { FcpOptions } from '../options.ts';
import type { Blocks } from './blocks.ts';
import { packHeavyUnits } from './heavy.ts';
import { blockUserRanks, type SeqRows } from './layout.ts';
import { RankHeap } from './rank-heap.ts';
import { refine, refineStepBudget } from './refine.ts';
import type { Weights } from './weights.ts';

/** Where every unit lives, and the resulting loads. */
export interface Placement {
  /** Rank of each unit after the greedy. */
  readonly unitRank: Int32Array;
  /** Rank of each block after refinement (the home layout). */
  readonly blockRank: Int32Array;
  /** Attended pairs per rank. */
  readonly computeLoad: Float64Array;
  /** Home tokens per rank. */
  readonly memoryLoad: Float64Array;
  /** Compute imbalance (max/mean - 1) after the greedy, before refinement. */
  readonly greedyImbalance: number;
  /** Refinement steps applied. */
  readonly refineSteps: number;
}

/** Compute imbalance of a load vector: max/mean - 1 (0 for an empty batch). */
export function computeImbalance(load: Float64Array): number {
  let max = 0;
  let sum = 0;
  for (let i = 0; i < load.length; i++) {
    sum += load[i]!;
    if (load[i]! > max) max = load[i]!;
  }
  return sum > 0 ? (max * load.length) / sum - 1 : 0;
}

/** The placement that keeps every block on its user rank (for `userLayoutBlocks`, blocks.ts). */
export function userPlacement(blocks: Blocks, weights: Weights, userRows: SeqRows, world: number): Placement {
  const blockRank = blockUserRanks(blocks.seq, blocks.start, blocks.length, userRows);
  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  for (let b = 0; b < blockRank.length; b++) {
    load[blockRank[b]!]! += weights.block[b]!;
    mem[blockRank[b]!]! += blocks.length[b]!;
  }
  const unitRank = new Int32Array(blocks.unitSeq.length);
  for (let b = 0; b < blockRank.length; b++) unitRank[blocks.unit[b]!] = blockRank[b]!;
  const imb = computeImbalance(load);
  return { unitRank, blockRank, computeLoad: load, memoryLoad: mem, greedyImbalance: imb, refineSteps: 0 };
}

/** Candidates read off each heap per unit. */
const HEAP_CANDIDATES = 4;

/** Places every unit on a rank (see the module comment). Throws FcpError `plan.memory` when a unit fits nowhere. */
export function distributeUnits(
  blocks: Blocks,
  weights: Weights,
  userRows: SeqRows,
  world: number,
  memoryTokens: number,
  o: FcpOptions,
  gpusPerNode = world,
  packHeavyFirst = false,
): Placement {
  const U = blocks.unitSeq.length;
  const { unitTokens, unitSeq } = blocks;
  const unitPairs = weights.unit;
  const totalPairs = weights.total > 0 ? weights.total : 1;
  const totalTokens = blocks.totalTokens > 0 ? blocks.totalTokens : 1;
  const avg = totalPairs / world;
  // Memory-dominant units first (by normalised memory), then compute-dominant ones (by normalised
  // compute): see step 1 of the module comment.
  const computeDominant = new Uint8Array(U);
  const size = new Float64Array(U);
  let mdTokens = 0;
  for (let u = 0; u < U; u++) {
    const nm = unitTokens[u]! / totalTokens;
    const nc = unitPairs[u]! / totalPairs;
    computeDominant[u] = nc > nm ? 1 : 0;
    size[u] = Math.max(nm, nc);
    if (nc <= nm) mdTokens += unitTokens[u]!;
  }
  // Memory-dominant units balance memory against their own per-rank mean, so that every rank keeps
  // the same room for the compute-dominant units that must then close its compute gap.
  const mdMean = Math.max(mdTokens / world, 1);
  const order = new Int32Array(U);
  for (let u = 0; u < U; u++) order[u] = u;
  // Compute-dominant units go sequence by sequence (largest sequence first, its units in order), so
  // that with affinity each long sequence fills a few ranks in turn instead of plugging the gaps of
  // many partly filled ranks (each of which would then need its whole K/V).
  const seqPairs = new Float64Array(blocks.seqUnits.length - 1);
  for (let u = 0; u < U; u++) if (computeDominant[u] === 1) seqPairs[unitSeq[u]!]! += unitPairs[u]!;
  order.sort((a, b) => {
    const da = computeDominant[a]!;
    const d = da - computeDominant[b]!;
    if (d !== 0) return d;
    if (da === 0) return size[b]! - size[a]! || a - b;
    const sa = unitSeq[a]!;
    const sb = unitSeq[b]!;
    return seqPairs[sb]! - seqPairs[sa]! || sa - sb || a - b;
  });
  // Heavy packing (heavy.ts): the compute-dominant units, in the order above, dealt onto ranks in
  // rank order before anything else; they then lead the order and keep their ranks.
  const preset = packHeavyFirst
    ? packHeavyUnits(
        order,
        computeDominant,
        unitSeq,
        unitTokens,
        unitPairs,
        totalPairs,
        totalTokens,
        world,
        memoryTokens,
      )
    : null;
  if (preset !== null) {
    const first: number[] = [];
    const rest: number[] = [];
    for (let i = 0; i < U; i++) (preset[order[i]!]! >= 0 ? first : rest).push(order[i]!);
    order.set(first, 0);
    order.set(rest, first.length);
  }
  // Smallest unit still to come, to retire ranks whose memory cannot take any of them.
  const minTokAfter = new Int32Array(U + 1).fill(0x7fffffff);
  for (let i = U - 1; i >= 0; i--) minTokAfter[i] = Math.min(minTokAfter[i + 1]!, unitTokens[order[i]!]!);

  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  const cKey = new Float64Array(world);
  const mKey = new Float64Array(world);
  const cHeap = new RankHeap(cKey, world);
  const mHeap = new RankHeap(mKey, world);
  const unitRank = new Int32Array(U).fill(-1);
  const lastRank = new Int32Array(blocks.seqUnits.length - 1).fill(-1);
  const cands: number[] = [];
  const userRank: number[] = [];
  const userTok: number[] = [];
  const addOverlap = (block: number): void => {
    if (block < 0) return;
    const s = blocks.seq[block]!;
    const a = blocks.start[block]!;
    const b = a + blocks.length[block]!;
    for (let i = userRows.off[s]!, e = userRows.off[s + 1]!; i < e; i++) {
      const ra = userRows.start[i]!;
      const rb = ra + userRows.length[i]!;
      if (rb <= a) continue;
      if (ra >= b) break;
      const r = userRows.rank[i]!;
      const k = userRank.indexOf(r);
      const ov = Math.min(b, rb) - Math.max(a, ra);
      if (k >= 0) userTok[k]! += ov;
      else {
        userRank.push(r);
        userTok.push(ov);
      }
    }
  };

  /** The rank among the unit's user ranks holding most of its tokens for which `ok` holds (ties: lower rank), or `none`. */
  const mostOverlap = (none: number, ok: (r: number) => boolean): number => {
    let pick = none;
    let bestTok = 0;
    for (let k = 0; k < userRank.length; k++) {
      const r = userRank[k]!;
      const t = userTok[k]!;
      if ((t > bestTok || (t === bestTok && pick >= 0 && r < pick)) && ok(r)) {
        pick = r;
        bestTok = t;
      }
    }
    return pick;
  };
  /** The least loaded of `best` and the ranks of node `n` that take the unit under the average compute (-1: none). */
  const leastInNode = (n: number, best: number): number => {
    let pick = best;
    for (let r = n * gpusPerNode, e = Math.min(world, (n + 1) * gpusPerNode); r < e; r++)
      if (room(r) && load[r]! + pairs <= avg && (pick < 0 || load[r]! < load[pick]!)) pick = r;
    return pick;
  };
  // Compute room left under the average per node (sum over its ranks of max(0, avg - load)), kept
  // up to date as units land: a long sequence that has filled its nodes opens the node with the
  // most room, so that its units fill whole nodes in turn (a bin-packing of its compute onto nodes,
  // then ranks within the node) instead of plugging the least loaded rank of every node.
  const nodes = Math.ceil(world / gpusPerNode);
  const nodeRoom = new Float64Array(nodes);
  for (let r = 0; r < world; r++) nodeRoom[Math.floor(r / gpusPerNode)]! += avg;
  /** The node with the most room that is not `skip` (ties: the first after `after`, cyclically, so a sequence's nodes stay contiguous). */
  const widestNode = (after: number, skip: number): number => {
    let pick = -1;
    for (let k = 1; k <= nodes; k++) {
      const n = (after + k) % nodes;
      if (n !== skip && (pick < 0 || nodeRoom[n]! > nodeRoom[pick]!)) pick = n;
    }
    return pick;
  };
  // Nodes holding units of the compute-dominant sequence being placed (they come sequence by sequence).
  const seqNodes: number[] = [];
  let seqOfNodes = -1;
  // The unit being placed (read by `room` and `score`, created once: no closures in the loop).
  let tok = 0;
  let pairs = 0;
  let mNorm = mdMean;
  const room = (r: number): boolean => mem[r]! + tok <= memoryTokens;
  const score = (r: number): number => Math.max((load[r]! + pairs) / avg, (mem[r]! + tok) / mNorm);
  for (let i = 0; i < U; i++) {
    const u = order[i]!;
    const dense = computeDominant[u] === 1;
    // Memory-dominant phase: balance both loads against their means. Compute-dominant phase: LPT
    // on compute, memory only as the capacity limit (mNorm below).
    tok = unitTokens[u]!;
    pairs = unitPairs[u]!;
    mNorm = dense ? memoryTokens : mdMean;
    const s = unitSeq[u]!;
    let pick = preset !== null ? preset[u]! : -1;
    if (pick < 0 && !o.noLocality) {
      userRank.length = 0;
      userTok.length = 0;
      addOverlap(blocks.unitBlockA[u]!);
      addOverlap(blocks.unitBlockB[u]!);
      // Memory-dominant units (short sequences) stay where the user layout has them while that
      // rank has memory and stays under the average compute: they carry little compute, and a
      // token that stays home costs no reshuffle in either phase (Q,K,V,O forward, dO,dQ,dK,dV
      // backward: 56 KB per token with the default model).
      if (!dense) pick = mostOverlap(-1, (r) => room(r) && load[r]! + pairs <= avg);
    }
    if (pick < 0) {
      cands.length = 0;
      cHeap.smallest(HEAP_CANDIDATES, room, cands);
      if (!dense) mHeap.smallest(HEAP_CANDIDATES, room, cands);
      if (cands.length === 0)
        throw new FcpError(
          issue(
            'plan.memory',
            `no rank has memory for a unit of ${tok} tokens of sequence ${s} (capacity ${memoryTokens} tokens per rank); raise --memory-tokens or lower --block-size`,
            'memoryTokens',
          ),
        );
      let best = cands[0]!;
      let bestScore = score(best);
      for (let k = 1; k < cands.length; k++) {
        const r = cands[k]!;
        const sc = score(r);
        if (
          sc < bestScore ||
          (sc === bestScore && (load[r]! < load[best]! || (load[r] === load[best] && r < best)))
        ) {
          best = r;
          bestScore = sc;
        }
      }
      const prev = lastRank[s]!;
      if (
        !o.noAffinity &&
        prev >= 0 &&
        prev !== best &&
        room(prev) &&
        load[prev]! + pairs <= avg &&
        (dense || mem[prev]! + tok <= AFFINITY_MEMORY * mdMean)
      )
        pick = prev;
      // Locality tie-break among ranks whose score is within the tolerance of the best.
      const within = bestScore + o.tolerance;
      if (pick < 0 && !o.noLocality) pick = mostOverlap(-1, (r) => room(r) && score(r) <= within);
      // A long sequence's unit stays on the user rank of one of its blocks while that rank takes it
      // under the average: half its tokens then need no reshuffle, and their work can start at once.
      if (pick < 0 && dense && !o.noLocality)
        pick = mostOverlap(-1, (r) => room(r) && load[r]! + pairs <= avg);
      // Topology: a long sequence's next rank from the nodes holding the unit's tokens, else from
      // the node of its previous units, while such a rank takes it under the average: its
      // reshuffle and much of its K/V then move over NVLink instead of the NIC.
      if (pick < 0 && dense && !o.noLocality && gpusPerNode < world) {
        for (let k = 0; k < userRank.length; k++)
          pick = leastInNode(Math.floor(userRank[k]! / gpusPerNode), pick);
        const prevNode = prev >= 0 ? Math.floor(prev / gpusPerNode) : nodes - 1;
        if (pick < 0 && prev >= 0) pick = leastInNode(prevNode, -1);
        // Then the node with the most room (a rank of it that takes the unit under the average).
        if (pick < 0 && o.nodePacking)
          pick = leastInNode(widestNode(prevNode, prev >= 0 ? prevNode : -1), -1);
      }
      // No rank takes the unit under the average (units are coarse: up to a rank's share): rather
      // than the least loaded rank anywhere (often a new node for the sequence), the least loaded
      // rank of a node the sequence already uses, while it is within NODE_SLACK of the average
      // above that rank (refinement, block by block, evens the rest).
      if (pick < 0 && dense && !o.noLocality && o.nodePacking && gpusPerNode < world) {
        for (let k = 0; k < seqNodes.length; k++) {
          for (let r = seqNodes[k]! * gpusPerNode, e = Math.min(world, r + gpusPerNode); r < e; r++)
            if (room(r) && load[r]! <= load[best]! + NODE_SLACK * avg && (pick < 0 || load[r]! < load[pick]!))
              pick = r;
        }
      }
      if (pick < 0) pick = best;
    }
    unitRank[u] = pick;
    // Node packing's bookkeeping, kept only when it is on (nothing else reads it).
    if (o.nodePacking) {
      if (dense) {
        if (s !== seqOfNodes) {
          seqOfNodes = s;
          seqNodes.length = 0;
        }
        const n = Math.floor(pick / gpusPerNode);
        if (!seqNodes.includes(n)) seqNodes.push(n);
      }
      nodeRoom[Math.floor(pick / gpusPerNode)]! -=
        Math.max(0, avg - load[pick]!) - Math.max(0, avg - load[pick]! - pairs);
    }
    load[pick]! += pairs;
    mem[pick]! += tok;
    lastRank[s] = pick;
    const retired = mem[pick]! + minTokAfter[i + 1]! > memoryTokens;
    cKey[pick] = retired ? Number.POSITIVE_INFINITY : load[pick]!;
    mKey[pick] = retired ? Number.POSITIVE_INFINITY : mem[pick]!;
    cHeap.increased(pick);
    mHeap.increased(pick);
  }
  const greedyImbalance = computeImbalance(load);
  const maxSteps = refineStepBudget(o.refineSteps, world);
  const userOf = blockUserRanks(blocks.seq, blocks.start, blocks.length, userRows);
  const { blockRank, steps } = refine(
    { blocks, weights, userOf, unitRank, load, mem, world },
    // The send cap goes with the packing (mode (b)): in mode (a) it cost 0.418 -> 0.392 forward MFU at
    // 16 ranks and 0.397 -> 0.362 at 256 (simulated, longtail, 3 batches), its moves being the
    // reshuffle-saving ones.
    { memoryTokens, maxSteps, gpusPerNode, capSend: packHeavyFirst },
  );
  return { unitRank, blockRank, computeLoad: load, memoryLoad: mem, greedyImbalance, refineSteps: steps };
}

/** A long sequence's unit may go to a rank of a node it already uses when that rank is at most this far (fraction of the average compute) above the least loaded rank, rather than open a new node. */
const NODE_SLACK = 0.05;

/** Affinity keeps a memory-dominant sequence on one rank up to this multiple of the phase's mean memory. */
const AFFINITY_MEMORY = 1.1;

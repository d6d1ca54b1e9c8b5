/**
 * Inputs of the `kv` need order (transfers/need-order.ts) from a phase's context, and where it is
 * used (issue 15, deliverable 4).
 */

import { gatherInt32 } from '../../core/gather.ts';
import { sameNode } from '../../core/nodes.ts';
import type { Direction } from '../../cost/kernel.ts';
import { attendedPairs, kvBytesPerToken } from '../../model/attention.ts';
import type { PhaseContext } from './context.ts';
import type { KvEdges } from './transfers/fetch.ts';
import type { GroupPlacer } from './transfers/groups.ts';
import type { NeedInput } from './transfers/need-order.ts';
import type { Colouring } from './transfers/rounds.ts';
import { estimateGroups, type TimelineContext } from './transfers/timeline.ts';
import type { TransferList } from './transfers/transfer-list.ts';

/**
 * Whether a phase orders its direct `kv` rounds by their receivers' need (transfers/need-order.ts)
 * rather than by size: every forward. In a loader layout (mode (b)) every rank's work present
 * from the start is known exactly. Simulated, 3 batches (`npx tsx bench/fcp-timeline.ts --batch B
 * --loader-layout --worlds 64,128,256 --seeds 1,2,3`), forward MFU: magi 0.577/0.530/0.483 ->
 * 0.577/0.553/0.504, longtail 0.607/0.591/0.566 -> 0.607/0.600/0.596. In mode (a) the work
 * present from the start is estimated (the resident share of home tokens, {@link needInput}), and
 * since session 16 its forward is need-ordered as well (it had been left off because the `kv`
 * groups then follow the links, and with them the tasks' tile merges, which a test asserted equal
 * across switch clusters; the test now asserts equal work per rank): `npx tsx bench/quality-ab.ts
 * --base <before> --worlds 16,32,64,128,256 --seeds 9 [--seed 10] [--network contention]`, 135
 * batches each, forward / backward MFU: seeds 1-9 +0.0017 ± 0.0007 / -0.0004 ± 0.0006, held-out
 * seeds 10-18 +0.0019 ± 0.0007 / -0.0001 ± 0.0002 (256 ranks +0.0067 ± 0.0023 forward; 16 and 32
 * -0.0004 / -0.0014 there, +0.0019 / +0.0019 on seeds 1-9), held-out under contention +0.0023 ±
 * 0.0007 / +0.0009 ± 0.0005. Left off where it lost: the backward
 * of mode (b) (magi 128: 0.448 -> 0.445) and the same order for `in` rounds (mode (a) longtail at
 * 16 ranks 0.438 -> 0.427 forward).
 */
export function needOrdered(dir: Direction): boolean {
  return dir === 'forward';
}

/**
 * Transfer visits the need order's greedy may make (a scoring pass per group, lazy re-scores;
 * then the rest in the old order). 4e6 keeps the whole gain at 256 ranks (mode (b) forward MFU,
 * 3 batches: longtail 0.596 as with no bound, 0.577 at 1e6; magi 0.504 either way) at about
 * 50 ms per forward on the loaded 2-core machine (unbounded: 130 ms).
 */
const NEED_BUDGET = 4e6;

/**
 * What the need order reads (transfers/need-order.ts) for the direct `kv` edges `ids`: the
 * compute each edge unlocks on its receiver (attended pairs of the receiving rank-sequence's
 * queries against the edge's keys, at a 4K square's kernel rate), each rank's compute present
 * from the start (its pairs not behind a `kv` edge, scaled by the share of its home tokens that
 * are resident), and the groups' arrival times: the groups placed so far as the timeline estimate
 * sees them, then one group per `coalesce` rounds of the edges' busiest rank.
 */
export function needInput(
  ctx: PhaseContext,
  tctx: TimelineContext,
  placer: GroupPlacer,
  list: TransferList,
  edges: KvEdges,
  ids: Int32Array,
  c: Colouring,
  ready: Int32Array,
  weight: Float64Array,
): NeedInput {
  const { runs, pieces, world, links, sequences } = ctx;
  const causal = ctx.mask === 'causal';
  const side = 4096;
  const msPerPair = (ctx.kernel.pieceMs(tctx.dir, side, side, false) / (side * side)) * links.computeSlowdown;
  const unlockMs = new Float64Array(ids.length);
  const kvPairs = new Float64Array(world);
  const kvb = kvBytesPerToken(ctx.model);
  const port = new Float64Array(4 * world);
  for (let k = 0; k < ids.length; k++) {
    const e = ids[k]!;
    const rs = edges.rs[e]!;
    const ka = edges.start[e]!;
    const kb = ka + edges.length[e]!;
    let pairs = 0;
    for (let p = runs.rsOff[rs]!; p < runs.rsOff[rs + 1]!; p++) {
      const run = runs.byRank[p]!;
      pairs += attendedPairs(causal, runs.start[run]!, runs.length[run]!, ka, kb - ka);
    }
    const d = edges.dst[e]!;
    const s = edges.src[e]!;
    unlockMs[k] = pairs * msPerPair;
    kvPairs[d]! += pairs;
    const intra = sameNode(s, d, links.nodeSize) ? 2 : 0;
    port[4 * s + intra]! += edges.length[e]! * kvb;
    port[4 * d + intra + 1]! += edges.length[e]! * kvb;
  }
  const total = new Float64Array(world);
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    const L = sequences[runs.rsSeq[rs]!]!;
    for (let p = runs.rsOff[rs]!; p < runs.rsOff[rs + 1]!; p++) {
      const run = runs.byRank[p]!;
      const a = runs.start[run]!;
      const b = a + runs.length[run]!;
      total[runs.rsRank[rs]!]! += attendedPairs(causal, a, b - a, 0, causal ? b : L);
    }
  }
  const home = new Float64Array(world);
  const stay = new Float64Array(world);
  for (let p = 0; p < pieces.seq.length; p++) {
    home[pieces.home[p]!]! += pieces.length[p]!;
    if (pieces.user[p] === pieces.home[p]) stay[pieces.home[p]!]! += pieces.length[p]!;
  }
  const startMs = new Float64Array(world);
  let commMs = 0;
  for (let r = 0; r < world; r++) {
    const frac = home[r]! > 0 ? stay[r]! / home[r]! : 1;
    startMs[r] = Math.max(0, total[r]! - kvPairs[r]!) * frac * msPerPair;
    const inter = Math.max(port[4 * r]!, port[4 * r + 1]!) / links.interBytesPerMs;
    const intra = Math.max(port[4 * r + 2]!, port[4 * r + 3]!) / links.intraBytesPerMs;
    commMs = Math.max(commMs, inter, intra);
  }
  const groupMs = commMs / Math.max(1, Math.ceil(c.rounds / placer.coalesce)) + links.groupLatencyMs;
  const { groupEnd, groups: G0 } = estimateGroups(tctx, placer, list);
  const placed = new Float64Array(G0);
  for (let g = 0; g < G0; g++) {
    let sum = 0;
    for (let r = 0; r < world; r++) sum += groupEnd[g * world + r]!;
    placed[g] = sum / world;
  }
  const last = G0 > 0 ? placed[G0 - 1]! : 0;
  return {
    ready,
    dst: gatherInt32(edges.dst, ids),
    unlockMs,
    weight,
    startMs,
    arrivalMs: (g) => (g < G0 ? placed[g]! + groupMs : last + (g - G0 + 1) * groupMs),
    room: (g) => placer.room(g),
    maxVisits: NEED_BUDGET,
  };
}

/**
 * The backward phase (semantics in the brief). Start state: user ranks hold Q,K,V,dO of their
 * tokens; homes hold Q,K,V,O,LSE of theirs (K/V fetched in the forward are not kept).
 *
 * 1. `in` rounds: dO user -> home (the same moving pieces as the forward, same colouring).
 * 2. `kv` rounds, exactly Δ: the forward's transfers and colouring (the sender choice does not
 *    depend on readiness), but no round waits for the reshuffle: homes hold K/V from the start.
 * 3. Compute: the forward's tasks, ready when their dO and K/V are present, ordered per rank by
 *    order.ts (keys in position order, so that partials complete progressively; local work at the
 *    ends).
 * 4. `dkv` pushes: a rank that computed with keys it is not home for pushes its accumulated dK,dV
 *    partial of each such range to the range's home (one push per home run it crosses; where
 *    several ranks of one node push partials of one run across nodes, they are summed on the
 *    node's rank on the home's rail first, transfers/dkv-node.ts), after the
 *    last op using those keys (`sendAfter`), in the first group the rank is expected to enter
 *    after that op ends (transfers/timeline.ts: earlier, the push would hold the group, and every rank it
 *    exchanges with, until the op ends). Pushes fill the gaps of the rounds already placed
 *    (first-fit, congestion-free); groups opened for them hold up to `pushCoalesce` rounds (PUSH_GROUPS below).
 * 5. `out` pushes: dQ,dK,dV of each moving piece home -> user, after the last op touching the
 *    piece (as queries or keys) and after every `dkv` into it has arrived.
 */
import { IntColumn } from '../../core/int-column.ts';
import type { Phase } from '../../plan/types.ts';
import { Kind } from '../../plan/types.ts';
import type { PhaseContext } from './context.ts';
import { type ForwardResult, IN_WEIGHT } from './forward.ts';
import {
  firstHops,
  groupCount,
  hunger,
  lastGroup,
  outRelays,
  type PhaseStats,
  placeIn,
  placeKv,
  placeSecondHops,
  railRoundsNodeSize,
  relayCount,
  relayStats,
  timelineContext,
} from './phase.ts';
import { applyAblations, buildPhaseOps, lastWriter } from './phase-ops.ts';
import { firstEndingAfter, subtractInto } from './placement/layout.ts';
import { edgesByRs, keySpanEnd, type TaskContext, type Tasks, taskReady } from './tasks.ts';
import { type DkvRows, dkvRoutes, placeDkvRoutes } from './transfers/dkv-node.ts';
import { chooseSenders } from './transfers/fetch.ts';
import { addOutPushes, finishPhase, GroupPlacer } from './transfers/groups.ts';
import { placePushes } from './transfers/rounds.ts';
import { estimateTimeline, phaseEstimateMs, pushGroup, taskTimes } from './transfers/timeline.ts';
import { TransferList } from './transfers/transfer-list.ts';

/*
 * PUSH_GROUPS. Groups opened for the pushes after the last `kv` group hold up to `pushCoalesce`
 * rounds (16 by default, at most `commCoalesce`) instead of the candidate's group size. With 4 or
 * 8 rounds there (the self-tuner's smaller group sizes, chosen for the fetches), a rank that
 * completes many `dkv` partials in one op pushes them 4 per group, and each of those groups also
 * holds ranks whose own pushes wait for a later op: a convoy that ends the phase well after the
 * compute. Simulated, mode (b), `longtail` 64 ranks seed 2 (`--coalesce 4` chosen): rank 0's 24
 * pushes of one op ending at 240.9 ms went out in groups 70-75, which it completed at 283.4 ms;
 * its last push ended at 324.2 ms against 309.9 ms of compute, and every rank idled 9.6 ms at the
 * end on average. Measured: docs/results.md, "Session 30".
 */

/**
 * Key ranges each RS computes with but is not home for, cut at the homes' runs: per pushing RS,
 * sorted by start (RS-major).
 */
function dkvPushes(ctx: TaskContext, tasks: Tasks, opOfTask: Int32Array): DkvRows {
  const { runs } = ctx;
  const RS = runs.rsRank.length;
  const own: number[] = [];
  const rest: number[] = [];
  const src = new IntColumn();
  const dst = new IntColumn();
  const seq = new IntColumn();
  const start = new IntColumn();
  const length = new IntColumn();
  const run = new IntColumn();
  const rsOff = new Int32Array(RS + 1);
  for (let rs = 0; rs < RS; rs++) {
    const h = runs.rsRank[rs]!;
    const s = runs.rsSeq[rs]!;
    own.length = 0;
    for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
      const r = runs.byRank[p]!;
      own.push(runs.start[r]!, runs.start[r]! + runs.length[r]!);
    }
    rest.length = 0;
    subtractInto(0, keySpanEnd(ctx, rs), own, rest);
    const lo = runs.off[s]!;
    const hi = runs.off[s + 1]!;
    for (let k = 0; k < rest.length; k += 2) {
      const a = rest[k]!;
      const b = rest[k + 1]!;
      for (let r = firstEndingAfter(runs.start, runs.length, lo, hi, a); r < hi && runs.start[r]! < b; r++) {
        const x = Math.max(a, runs.start[r]!);
        src.push(h);
        dst.push(runs.rank[r]!);
        seq.push(s);
        start.push(x);
        length.push(Math.min(b, runs.start[r]! + runs.length[r]!) - x);
        run.push(r);
      }
    }
    rsOff[rs + 1] = src.length;
  }
  const out = {
    src: src.toArray(),
    dst: dst.toArray(),
    seq: seq.toArray(),
    start: start.toArray(),
    length: length.toArray(),
    run: run.toArray(),
    op: new Int32Array(src.length).fill(-1),
  };
  // Last op of the sender using keys of each push (binary search among its RS's pushes).
  const t = tasks.table;
  for (let rs = 0; rs < RS; rs++) {
    const first = rsOff[rs]!;
    const last = rsOff[rs + 1]!;
    if (last === first) continue;
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const ka = t.kvStart[i]!;
      const kb = ka + t.kvLength[i]!;
      let j = first;
      let jh = last;
      while (j < jh) {
        const mid = (j + jh) >>> 1;
        if (out.start[mid]! + out.length[mid]! <= ka) j = mid + 1;
        else jh = mid;
      }
      const op = opOfTask[i]!;
      for (; j < last && out.start[j]! < kb; j++) if (out.op[j]! < op) out.op[j] = op;
    }
  }
  return out;
}

/** Result of {@link planBackward}. */
export interface BackwardResult {
  readonly phase: Phase;
  readonly stats: PhaseStats;
  /** The planner's own estimate of the phase's makespan, ms (transfers/timeline.ts). */
  readonly estimateMs: number;
}

/** Plans the backward phase over the forward's tasks, `kv` transfers and colourings. */
export function planBackward(forward: ForwardResult, ctx: PhaseContext): BackwardResult {
  const { runs, pieces, world, o } = ctx;
  const { tasks, inColouring } = forward;
  // Relays (fanOut) serve the forward only: here the homes hold K/V from the start, the longer
  // backward compute hides direct fetches, and a relay would wait one group for its feed. The
  // sender choice does not depend on readiness, so these are the forward's direct edges.
  const relayed = forward.kvEdges.relay.some((r) => r >= 0);
  const edges = relayed
    ? ctx.memo.senderChoice(true, false, () =>
        chooseSenders(ctx.requests, runs, pieces, world, true, IN_WEIGHT, ctx.links.nodeSize, false),
      )
    : forward.kvEdges;
  const kvColouring = relayed ? undefined : forward.kvColouring;
  const placer = new GroupPlacer(o.coalesce, world, o.commCoalesce, ctx.links.nodeSize);
  const list = new TransferList();
  const pieceGroup = placeIn(placer, list, ctx, inColouring);
  const kv = placeKv(
    placer,
    list,
    edges,
    new Int32Array(edges.src.length),
    hunger(ctx),
    ctx,
    'backward',
    kvColouring,
  );
  const byRs = edgesByRs(edges, runs.rsRank.length);
  const ready = taskReady(ctx, tasks, pieceGroup, null, edges, byRs, kv.group);
  const after = applyAblations(ready, pieceGroup, placer.groups - 1, o);
  const tctx = timelineContext(ctx, 'backward');
  const ms = taskTimes(tctx, tasks.table);
  const { compute, opOfTask } = buildPhaseOps(ctx, tasks, after, ms, true, tctx, placer, list);
  const sendAfter = { transfer: new IntColumn(), compute: new IntColumn() };

  const d = dkvPushes(ctx, tasks, opOfTask);
  const nd = d.src.length;
  const tl = estimateTimeline(tctx, placer, list, compute, ms);
  const slice = tl.meanOpMs;
  // Without a reshuffle (mode (b)) a push joins the first group the rank is expected to enter one
  // mean op after its producer ends, not at once: ranks reach groups earlier than estimated (past
  // the estimated groups new ones are counted in mean-op slices, and a rank passes quickly through
  // groups where it has little to send: `longtail` 64 ranks seed 2, rank 0 entered group 70 at
  // 207.4 ms, its producer op ending at 240.9), and a push in a group entered before its op ends
  // holds that group, and every rank exchanging in it, until then. Most of the gain is in the `kv`
  // groups, where such a push also holds K/V that other ranks' ops wait for: the margin only past
  // the estimated groups gave back -0.0005 ± 0.0002 backward (1 up, 11 down). Simulated, mode (b),
  // B - A of MFU, forward / backward / together (`npx tsx bench/quality-ab.ts --loader-layout`,
  // docs/results.md "Session 30"): hopper-ib 16-256 seeds 1-3 +0.0001 ± 0.0002 / +0.0005 ± 0.0002
  // / +0.0004 ± 0.0002 (10 up, 2 down), held-out seeds 4-6 +0.0004 ± 0.0003 together (8 up, 3
  // down), PXN contention 32-256 +0.0009 ± 0.0003 (14 up, 4 down), ratio-5920 +0.0001 ± 0.0001 (4
  // up, 0 down). In mode (a) the `out` pushes follow the `dkv` ones into each piece, and the same
  // margin cost -0.0028 ± 0.0005 backward, -0.0020 ± 0.0004 together (PXN, 32 of 45 batches down
  // backward).
  const margin = ctx.pieces.moving.length === 0 ? slice : 0;
  const dReady = new Int32Array(nd);
  for (let e = 0; e < nd; e++) {
    const op = d.op[e]!;
    dReady[e] = pushGroup(tl, d.src[e]!, tl.opEnd[op]! + margin, tl.afterUpTo[op]! + 1, slice);
  }
  // Groups opened from here on carry only pushes (no op waits for them): they hold up to
  // `pushCoalesce` rounds whatever the candidate's group size (PUSH_GROUPS; groups.ts, widenFrom).
  placer.widenFrom(placer.groups, o.pushCoalesce);
  // Partials of one home run from several ranks of a node are summed there first (dkv-node.ts).
  const routed = dkvRoutes(d, dReady, ctx.links, world);
  const dkv = placeDkvRoutes(placer, routed, world, o.rounds);
  // Latest dkv arrival into each piece, for `out` (pushes land inside one home run).
  const dkvInto = new Int32Array(pieces.seq.length).fill(-1);
  for (let e = 0; e < routed.src.length; e++) {
    const id = list.add(
      dkv.slot[e]!,
      routed.src[e]!,
      routed.dst[e]!,
      Kind.dkv,
      routed.seq[e]!,
      routed.start[e]!,
      routed.length[e]!,
    );
    if (routed.op[e]! >= 0) {
      sendAfter.transfer.push(id);
      sendAfter.compute.push(routed.op[e]!);
    }
    if (routed.into[e]! >= 0) continue; // its partial reaches home with the aggregator's push
    const g = placer.groupOf(dkv.slot[e]!);
    const a = routed.start[e]!;
    const b = a + routed.length[e]!;
    for (let j = pieces.runOff[routed.run[e]!]!, je = pieces.runOff[routed.run[e]! + 1]!; j < je; j++)
      if (pieces.start[j]! < b && pieces.start[j]! + pieces.length[j]! > a && dkvInto[j]! < g) dkvInto[j] = g;
  }

  const lastOp = lastWriter(ctx, tasks, opOfTask, true);
  const m = pieces.moving;
  const outSrc = Int32Array.from(m, (p) => pieces.home[p]!);
  // First hops: to the user rank, or to the node mate of it that relays (transfers/relays.ts).
  const outRelay = outRelays(ctx);
  const outDst = firstHops(pieces, outRelay, pieces.user);
  // Not in a `kv` group, as in the forward (forward.ts): a push there holds the K/V its
  // receiver waits for (measured, mode (a) longtail 16 ranks: backward MFU 0.429 -> 0.434).
  const afterKv = lastGroup(kv.group) + 1;
  const outReady = new Int32Array(m.length);
  for (let i = 0; i < m.length; i++) {
    const p = m[i]!;
    const op = lastOp[p]!;
    outReady[i] = Math.max(
      pushGroup(tl, outSrc[i]!, tl.opEnd[op]!, tl.afterUpTo[op]! + 1, slice),
      dkvInto[p]! + 1,
      afterKv,
    );
  }
  const out = placePushes(placer, outSrc, outDst, outReady, world, o.rounds);
  addOutPushes(list, out.slot, pieces, lastOp, sendAfter, outDst);
  placeSecondHops(placer, list, pieces, Kind.out, outRelay, out.slot, pieces.user);
  const estimateMs = phaseEstimateMs(estimateTimeline(tctx, placer, list, compute, ms));
  const phase = finishPhase(placer, list, compute, sendAfter, railRoundsNodeSize(ctx));
  // Mode (a): the pushes run on a second comm stream (Phase.pushStream), so a `dkv` or `out` push
  // held by its op no longer holds the K/V its receiver's next ops wait for (the groups stay in
  // lockstep per stream). Simulated, mode (a), B - A of backward MFU over paired batches (the same
  // plans, one stream against two): 1024 ranks, `longtail`, direct +0.0148 ± 0.0005 (3 of 3 up);
  // PXN, 3 batches x 3 kinds, +0.0105 ± 0.0026 (8 up, 1 down), contention +0.0109 ± 0.0022 (9 up);
  // ratio-5920 +0.0004 ± 0.0002; 64-256 ranks +0.0007 ± 0.0005, 16-32 +0.0003 ± 0.0003. Mode (b)
  // keeps one stream (-0.0003 ± 0.0003 at 16-256, -0.0001 at 1024), and so does the forward: its
  // `out` pushes on a second stream compete with the `kv` fetches (-0.0038 ± 0.0021 forward at
  // 16-32). docs/results.md, "Session 46".
  if (pieces.moving.length > 0 && !o.noPushStream) phase.pushStream = true;
  return {
    phase,
    estimateMs,
    stats: {
      rounds: { in: inColouring.rounds, kv: kv.colouring.rounds, dkv: dkv.rounds, out: out.rounds },
      delta: { in: inColouring.delta, kv: kv.colouring.delta, dkv: dkv.delta, out: out.delta },
      transfers: {
        in: m.length + relayCount(inColouring.relay),
        kv: edges.src.length,
        dkv: routed.src.length,
        out: m.length + relayCount(outRelay),
      },
      groups: groupCount(phase.groupOfRound),
      ops: compute.rank.length,
      ...relayStats(relayCount(inColouring.relay), relayCount(outRelay)),
    },
  };
}

/**
 * The forward phase: `in` reshuffle rounds, `kv` fetch rounds, the tasks and their compute ops,
 * and the `out` pushes of O back to the user ranks.
 *
 * Order of placement (transfers/groups.ts places each round in the earliest group it may join):
 * 1. `in` rounds (Q,K,V user -> home), ready at once.
 * 2. `kv` rounds, exactly Δ of them (one colouring of the whole direct kv graph; same-slot
 *    hand-overs keep them, transfers/same-slot.ts). A round is ready when its senders hold their
 *    ranges: at once for user-rank senders, one group after the `in` that brings the range to a
 *    home sender. Rounds are ordered by that, then by how many receivers with
 *    little local work they feed (every rank should get work early).
 * 3. Compute: the grid tiles (grid-tasks.ts), each ready after the group that completes its data,
 *    ordered per rank by order.ts: local work while the first data is on its way, exporting work
 *    as it arrives (queries in position order) in short ops, local work at the end. Ablations:
 *    `noReshuffleOverlap` holds every op until the last `in` group; `noPipeline` makes one op per
 *    rank after the last `in`/`kv` group.
 * 4. `out` pushes (O home -> user), each after the last op writing its rows (`sendAfter`), in the
 *    first group its rank is expected to enter after that op ends (transfers/timeline.ts) and after
 *    the last `kv` group, filling gaps of the rounds already placed.
 */

import { IntColumn } from '../../core/int-column.ts';
import { Kind, type Phase } from '../../plan/types.ts';
import type { PhaseContext } from './context.ts';
import { buildGridTasks } from './grid-tasks.ts';
import {
  colourIn,
  firstHops,
  groupCount,
  hunger,
  type InColouring,
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
import { buildTasks, edgesByRs, type Tasks } from './tasks.ts';
import { chooseSenders, type KvEdges } from './transfers/fetch.ts';
import { addOutPushes, finishPhase, GroupPlacer } from './transfers/groups.ts';
import { type Colouring, placePushes } from './transfers/rounds.ts';
import { estimateTimeline, phaseEstimateMs, pushGroup, taskTimes } from './transfers/timeline.ts';
import { TransferList } from './transfers/transfer-list.ts';

/** Result of {@link planForward}: the phase, and what the backward reuses (tasks, colourings, K/V edges). */
export interface ForwardResult {
  readonly phase: Phase;
  readonly tasks: Tasks;
  readonly inColouring: InColouring;
  readonly kvEdges: KvEdges;
  readonly kvColouring: Colouring;
  readonly stats: PhaseStats;
  /** The planner's own estimate of the phase's makespan, ms (transfers/timeline.ts). */
  readonly estimateMs: number;
}

/** Bytes of a forward `in` token (Q,K,V) over those of a `kv` token (K,V), for the default model. */
export const IN_WEIGHT = 5;

/** Plans the forward phase. */
export function planForward(ctx: PhaseContext): ForwardResult {
  const { runs, pieces, world, o } = ctx;
  const placer = new GroupPlacer(o.coalesce, world, o.commCoalesce, ctx.links.nodeSize);
  const list = new TransferList();
  const inColouring = colourIn(ctx);
  const pieceGroup = placeIn(placer, list, ctx, inColouring);
  const edges = ctx.memo.senderChoice(false, o.fanOut, () =>
    chooseSenders(ctx.requests, runs, pieces, world, false, IN_WEIGHT, ctx.links.nodeSize, o.fanOut),
  );
  const ready = new Int32Array(edges.dep.length);
  for (let e = 0; e < ready.length; e++) ready[e] = edges.dep[e]! >= 0 ? pieceGroup[edges.dep[e]!]! + 1 : 0;
  const kv = placeKv(placer, list, edges, ready, hunger(ctx), ctx, 'forward');
  const byRs = edgesByRs(edges, runs.rsRank.length);
  const tasks = ctx.grid
    ? buildGridTasks(ctx, ctx.blockSize, ctx.grid, ctx.kernel, pieceGroup, edges, byRs, kv.group)
    : buildTasks(ctx, pieceGroup, edges, byRs, kv.group);
  const after = applyAblations(tasks.ready, pieceGroup, placer.groups - 1, o);
  const tctx = timelineContext(ctx, 'forward');
  const ms = taskTimes(tctx, tasks.table);
  const { compute, opOfTask } = buildPhaseOps(ctx, tasks, after, ms, false, tctx, placer, list);

  // `out`: O of each moving piece after the last op writing its rows (binary search among the
  // pieces of the task's RS, which are in position order), and never in a `kv` group: a push
  // holds its group on both ranks until its op ends (lockstep groups), so in a `kv` group it
  // delays the K/V its receiver's next ops wait for (measured, mode (a), 16-64 ranks: longtail
  // forward MFU 0.418/0.450/0.504 -> 0.424/0.456/0.508, simulated, `fcp compare --strategies fcp
  // --world 16,32,64 --batch longtail --batches 3`).
  const lastOp = lastWriter(ctx, tasks, opOfTask);
  const afterKv = lastGroup(kv.group) + 1;
  const m = pieces.moving;
  const outSrc = Int32Array.from(m, (p) => pieces.home[p]!);
  // First hops: to the user rank, or to the node mate of it that relays (transfers/relays.ts).
  const outRelay = outRelays(ctx);
  const outDst = firstHops(pieces, outRelay, pieces.user);
  const tl = estimateTimeline(tctx, placer, list, compute, ms);
  const outReady = Int32Array.from(m, (p) => {
    const op = lastOp[p]!;
    return Math.max(
      afterKv,
      pushGroup(tl, pieces.home[p]!, tl.opEnd[op]!, tl.afterUpTo[op]! + 1, tl.meanOpMs),
    );
  });
  const out = placePushes(placer, outSrc, outDst, outReady, world, o.rounds);
  const sendAfter = { transfer: new IntColumn(), compute: new IntColumn() };
  addOutPushes(list, out.slot, pieces, lastOp, sendAfter, outDst);
  placeSecondHops(placer, list, pieces, Kind.out, outRelay, out.slot, pieces.user);
  const estimateMs = phaseEstimateMs(estimateTimeline(tctx, placer, list, compute, ms));
  const phase = finishPhase(placer, list, compute, sendAfter, railRoundsNodeSize(ctx));
  return {
    phase,
    estimateMs,
    tasks,
    inColouring,
    kvEdges: edges,
    kvColouring: kv.colouring,
    stats: {
      rounds: { in: inColouring.rounds, kv: kv.colouring.rounds, out: out.rounds },
      delta: { in: inColouring.delta, kv: kv.colouring.delta, out: out.delta },
      transfers: {
        in: m.length + relayCount(inColouring.relay),
        kv: edges.src.length,
        out: m.length + relayCount(outRelay),
      },
      groups: groupCount(phase.groupOfRound),
      ops: compute.rank.length,
      ...relayStats(relayCount(inColouring.relay), relayCount(outRelay)),
    },
  };
}

/**
 * The backward phase (semantics in the brief). Start state: user ranks hold Q,K,V,dO of their
 * tokens; homes hold Q,K,V,O,LSE of theirs (K/V fetched in the forward are not kept).
 *
 * 1. `in` rounds: dO user -> home (the same moving pieces as the forward, same colouring).
 * 2. `kv` rounds, exactly Δ: the same requests as the forward, senders chosen again (homes hold
 *    K/V from the start now, so no round waits for the reshuffle).
 * 3. Compute: the forward's tasks, grouped into ops by when their dO and K/V are present.
 * 4. `dkv` pushes: a rank that computed with keys it is not home for pushes its accumulated dK,dV
 *    partial of each such range to the range's home (one push per home run it crosses), after the
 *    last op using those keys (`sendAfter`), one group after that op or later so that the push
 *    overlaps the next op. Pushes are coloured per ready group, in congestion-free rounds.
 * 5. `out` pushes: dQ,dK,dV of each moving piece home -> user, after the last op touching the
 *    piece (as queries or keys) and after every `dkv` into it has arrived.
 */
import { IntColumn } from '../../core/int-column.ts';
import { Kind } from '../../plan/types.ts';
import type { Phase } from '../../plan/types.ts';
import { chooseSenders, type FetchRequests } from './fetch.ts';
import { applyAblations, hunger, type PhaseStats, PUSH_SLACK, placeIn, placeKv } from './forward.ts';
import { firstEndingAfter, subtractInto } from './layout.ts';
import type { FcpOptions } from './options.ts';
import { buildOps, finishPhase, GroupPlacer, TransferList } from './pipeline.ts';
import { type Colouring, placePushes } from './rounds.ts';
import { edgesByRs, keySpanEnd, type TaskContext, type Tasks, taskReady } from './tasks.ts';

/** Plans the backward phase over the forward's tasks. */
export function planBackward(
  ctx: TaskContext,
  req: FetchRequests,
  tasks: Tasks,
  inColouring: Colouring,
  world: number,
  o: FcpOptions,
): { phase: Phase; stats: PhaseStats } {
  const { runs, pieces } = ctx;
  const placer = new GroupPlacer(o.coalesce);
  const list = new TransferList();
  const pieceGroup = placeIn(placer, list, ctx, inColouring);
  const edges = chooseSenders(req, runs, pieces, world, true);
  const kv = placeKv(placer, list, edges, new Int32Array(edges.src.length), hunger(ctx, world), world, o);
  const byRs = edgesByRs(edges, runs.rsRank.length);
  const ready = taskReady(ctx, tasks, pieceGroup, null, edges, byRs, kv.group);
  const after = applyAblations(ready, pieceGroup, placer.groups - 1, o);
  const { compute, opOfTask } = buildOps(tasks.table.rank, after, world);
  const t = tasks.table;
  const sendAfter = { transfer: new IntColumn(), compute: new IntColumn() };

  // dkv: per RS, the key span minus its own runs, cut at the other ranks' runs.
  const dSrc: number[] = [];
  const dDst: number[] = [];
  const dSeq: number[] = [];
  const dStart: number[] = [];
  const dLen: number[] = [];
  const dRun: number[] = [];
  const dOp: number[] = [];
  const own: number[] = [];
  const rest: number[] = [];
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    const h = runs.rsRank[rs]!;
    const s = runs.rsSeq[rs]!;
    own.length = 0;
    for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
      const run = runs.byRank[p]!;
      own.push(runs.start[run]!, runs.start[run]! + runs.length[run]!);
    }
    rest.length = 0;
    subtractInto(0, keySpanEnd(ctx, rs), own, rest);
    const first = dSrc.length;
    const lo = runs.off[s]!;
    const hi = runs.off[s + 1]!;
    for (let k = 0; k < rest.length; k += 2) {
      const a = rest[k]!;
      const b = rest[k + 1]!;
      for (let r = firstEndingAfter(runs.start, runs.length, lo, hi, a); r < hi && runs.start[r]! < b; r++) {
        const x = Math.max(a, runs.start[r]!);
        dSrc.push(h);
        dDst.push(runs.rank[r]!);
        dSeq.push(s);
        dStart.push(x);
        dLen.push(Math.min(b, runs.start[r]! + runs.length[r]!) - x);
        dRun.push(r);
        dOp.push(-1);
      }
    }
    // Last op of h using keys of each push (pushes of this RS are sorted by start).
    const last = dSrc.length;
    if (last === first) continue;
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const ka = t.kvStart[i]!;
      const kb = ka + t.kvLength[i]!;
      let j = first;
      let jh = last;
      while (j < jh) {
        const mid = (j + jh) >>> 1;
        if (dStart[mid]! + dLen[mid]! <= ka) j = mid + 1;
        else jh = mid;
      }
      const op = opOfTask[i]!;
      for (; j < last && dStart[j]! < kb; j++) if (dOp[j]! < op) dOp[j] = op;
    }
  }
  const nd = dSrc.length;
  const dReady = new Int32Array(nd);
  for (let e = 0; e < nd; e++) dReady[e] = compute.after[dOp[e]!]! + 1 + PUSH_SLACK;
  const dkv = placePushes(placer, Int32Array.from(dSrc), Int32Array.from(dDst), dReady, world, o.rounds);
  // dkv arrivals grouped by the receiving run, for the `out` check below.
  const dkvGroup = new Int32Array(nd);
  const dkvByRun = new Int32Array(runs.rank.length + 1);
  for (let e = 0; e < nd; e++) {
    const id = list.add(dkv.slot[e]!, dSrc[e]!, dDst[e]!, Kind.dkv, dSeq[e]!, dStart[e]!, dLen[e]!);
    sendAfter.transfer.push(id);
    sendAfter.compute.push(dOp[e]!);
    dkvGroup[e] = placer.groupOf(dkv.slot[e]!);
    dkvByRun[dRun[e]! + 1]!++;
  }
  for (let r = 0; r < runs.rank.length; r++) dkvByRun[r + 1]! += dkvByRun[r]!;
  const fill = dkvByRun.slice(0, runs.rank.length);
  const dkvIds = new Int32Array(nd);
  for (let e = 0; e < nd; e++) dkvIds[fill[dRun[e]!]!++] = e;

  // out: after the last op touching the piece (queries or keys) and after the dkv into it. The
  // pieces of an RS, in position order, are a contiguous list per run; binary search per task.
  const lastOp = new Int32Array(pieces.seq.length).fill(-1);
  const rsPieces: number[] = [];
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    rsPieces.length = 0;
    for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
      const run = runs.byRank[p]!;
      for (let j = pieces.runOff[run]!, je = pieces.runOff[run + 1]!; j < je; j++) rsPieces.push(j);
    }
    const np = rsPieces.length;
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const op = opOfTask[i]!;
      for (let side = 0; side < 2; side++) {
        const a = side === 0 ? t.qStart[i]! : t.kvStart[i]!;
        const b = a + (side === 0 ? t.qLength[i]! : t.kvLength[i]!);
        let lo = 0;
        let hi = np;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          const pm = rsPieces[mid]!;
          if (pieces.start[pm]! + pieces.length[pm]! <= a) lo = mid + 1;
          else hi = mid;
        }
        for (let k = lo; k < np && pieces.start[rsPieces[k]!]! < b; k++) {
          const pk = rsPieces[k]!;
          if (lastOp[pk]! < op) lastOp[pk] = op;
        }
      }
    }
  }
  const m = pieces.moving;
  const outSrc = Int32Array.from(m, (p) => pieces.home[p]!);
  const outDst = Int32Array.from(m, (p) => pieces.user[p]!);
  const outReady = new Int32Array(m.length);
  for (let i = 0; i < m.length; i++) {
    const p = m[i]!;
    let g = compute.after[lastOp[p]!]! + 1 + PUSH_SLACK;
    const a = pieces.start[p]!;
    const b = a + pieces.length[p]!;
    const run = pieces.run[p]!;
    for (let k = dkvByRun[run]!, ke = dkvByRun[run + 1]!; k < ke; k++) {
      const e = dkvIds[k]!;
      if (dStart[e]! < b && dStart[e]! + dLen[e]! > a) g = Math.max(g, dkvGroup[e]! + 1);
    }
    outReady[i] = g;
  }
  const out = placePushes(placer, outSrc, outDst, outReady, world, o.rounds);
  for (let i = 0; i < m.length; i++) {
    const p = m[i]!;
    const id = list.add(out.slot[i]!, outSrc[i]!, outDst[i]!, Kind.out, pieces.seq[p]!, pieces.start[p]!, pieces.length[p]!);
    sendAfter.transfer.push(id);
    sendAfter.compute.push(lastOp[p]!);
  }
  const phase = finishPhase(placer, list, compute, sendAfter);
  return {
    phase,
    stats: {
      rounds: { in: inColouring.rounds, kv: kv.colouring.rounds, dkv: dkv.rounds, out: out.rounds },
      delta: { in: inColouring.delta, kv: kv.colouring.delta, dkv: dkv.delta, out: out.delta },
      transfers: { in: m.length, kv: edges.src.length, dkv: nd, out: m.length },
      groups: phase.groupOfRound.length > 0 ? phase.groupOfRound[phase.groupOfRound.length - 1]! + 1 : 0,
      ops: compute.rank.length,
    },
  };
}

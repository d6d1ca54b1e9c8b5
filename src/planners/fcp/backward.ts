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
import { type Colouring, placeBucketed } from './rounds.ts';
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
  const dSrc = new IntColumn();
  const dDst = new IntColumn();
  const dSeq = new IntColumn();
  const dStart = new IntColumn();
  const dLen = new IntColumn();
  const dRun = new IntColumn();
  const dOp = new IntColumn();
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
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie && last > first; i++) {
      const ka = t.kvStart[i]!;
      const kb = ka + t.kvLength[i]!;
      let j = first;
      let jh = last;
      while (j < jh) {
        const mid = (j + jh) >>> 1;
        if (dStart.get(mid) + dLen.get(mid) <= ka) j = mid + 1;
        else jh = mid;
      }
      for (; j < last && dStart.get(j) < kb; j++) dOp.set(j, Math.max(dOp.get(j), opOfTask[i]!));
    }
  }
  const nd = dSrc.length;
  const dReady = new Int32Array(nd);
  for (let e = 0; e < nd; e++) dReady[e] = compute.after[dOp.get(e)]! + 1 + PUSH_SLACK;
  const dkv = placeBucketed(placer, dSrc.toArray(), dDst.toArray(), dReady, world, o.rounds);
  // Latest dkv arrival per run, per position range: kept per push for the `out` check below.
  const dkvGroup = new Int32Array(nd);
  const dkvByRun = new Int32Array(runs.rank.length + 1);
  for (let e = 0; e < nd; e++) {
    const id = list.add(dkv.slot[e]!, dSrc.get(e), dDst.get(e), Kind.dkv, dSeq.get(e), dStart.get(e), dLen.get(e));
    sendAfter.transfer.push(id);
    sendAfter.compute.push(dOp.get(e));
    dkvGroup[e] = placer.groupOf(dkv.slot[e]!);
    dkvByRun[dRun.get(e) + 1]!++;
  }
  for (let r = 0; r < runs.rank.length; r++) dkvByRun[r + 1]! += dkvByRun[r]!;
  const fill = dkvByRun.slice(0, runs.rank.length);
  const dkvIds = new Int32Array(nd);
  for (let e = 0; e < nd; e++) dkvIds[fill[dRun.get(e)]!++] = e;

  // out: after the last op touching the piece (queries or keys) and after the dkv into it.
  const lastOp = new Int32Array(pieces.seq.length).fill(-1);
  for (let rs = 0; rs < runs.rsRank.length; rs++) {
    for (let i = tasks.rsOff[rs]!, ie = tasks.rsOff[rs + 1]!; i < ie; i++) {
      const qa = t.qStart[i]!;
      const qb = qa + t.qLength[i]!;
      const ka = t.kvStart[i]!;
      const kb = ka + t.kvLength[i]!;
      for (let p = runs.rsOff[rs]!, pe = runs.rsOff[rs + 1]!; p < pe; p++) {
        const run = runs.byRank[p]!;
        for (let j = pieces.runOff[run]!, je = pieces.runOff[run + 1]!; j < je; j++) {
          const a = pieces.start[j]!;
          const b = a + pieces.length[j]!;
          if ((a < qb && b > qa) || (a < kb && b > ka)) lastOp[j] = Math.max(lastOp[j]!, opOfTask[i]!);
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
      if (dStart.get(e) < b && dStart.get(e) + dLen.get(e) > a) g = Math.max(g, dkvGroup[e]! + 1);
    }
    outReady[i] = g;
  }
  const out = placeBucketed(placer, outSrc, outDst, outReady, world, o.rounds);
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

/**
 * Rule 4: outputs complete. Forward: O of every token is final at its home once every task with
 * those queries ran, then reaches the user rank by `out`. Backward: every task's dK/dV partial
 * reaches the key's home exactly once, and final dQ, dK, dV reach the user rank.
 *
 * Semantics of `dkv` (BRIEF "Plan semantics"): a `dkv` of group g from rank r with `sendAfter` op S
 * moves r's whole pending partial of its range: contributions of r's ops up to S (in table order)
 * and partials r received in groups < g, not moved before. What arrives in group g is added when g
 * completes. So a contribution follows one path and can only be duplicated by two concurrent
 * pushes of the same sender (same group), and lost by never reaching the home. An op after S on r
 * that may run before the push (its `after` < g) races with it.
 *
 * The check sweeps each sequence's elementary intervals (cut at every boundary of the layouts,
 * tasks, `dkv` and `out` rows): inside one, every row applies wholly or not at all, so the flow of
 * partials is simulated once per interval with counts, not per token.
 */
import { Kind } from './types.ts';
import type { FlatPhase, FlatPlan } from './validate-expand.ts';
import { ActiveSweep, bucketBySeq, type SeqBuckets, sortedUnique } from './validate-index.ts';
import { type IssueSink, whereOf } from './validate-issues.ts';
import { OwnerWalk } from './validate-layout.ts';

interface Ctx {
  flat: FlatPlan;
  ph: FlatPhase;
  sink: IssueSink;
  trPath: string;
  chunkPath: string;
}

/** Rows of `tr` of one kind, bucketed by sequence and sorted by start. */
function kindBuckets(flat: FlatPlan, ph: FlatPhase, kind: number): SeqBuckets {
  const tr = ph.transfers;
  const seq = new Int32Array(tr.n).fill(-1);
  // Rows of other kinds go to a dummy bucket past the last sequence.
  const nSeq = flat.seqLen.length;
  for (let i = 0; i < tr.n; i++) seq[i] = tr.kind[i] === kind ? tr.seq[i]! : nSeq;
  return bucketBySeq(nSeq + 1, seq, tr.n, tr.start);
}

/** Checks rule 4 for one phase. */
export function checkOutputs(
  flat: FlatPlan,
  ph: FlatPhase,
  userB: SeqBuckets,
  homeB: SeqBuckets,
  taskB: { byQuery: SeqBuckets; byKey: SeqBuckets },
  sink: IssueSink,
): void {
  const t = flat.tasks;
  const tr = ph.transfers;
  const nSeq = flat.seqLen.length;
  const bwd = ph.name === 'backward';
  const qB = taskB.byQuery;
  // Keys a task attends: under a causal mask, keys below its last query + 1.
  const kae = new Int32Array(t.n);
  for (let i = 0; i < t.n; i++) kae[i] = flat.causal ? Math.min(t.ke[i]!, t.qe[i]!) : t.ke[i]!;
  const kB = bwd ? taskB.byKey : undefined;
  const outB = kindBuckets(flat, ph, Kind.out);
  const dkvB = bwd ? kindBuckets(flat, ph, Kind.dkv) : undefined;
  const ctx: Ctx = {
    flat,
    ph,
    sink,
    trPath: `${ph.name}.transfers`,
    chunkPath: `${ph.name}.chunkTransfers`,
  };
  for (let s = 0; s < nSeq; s++) {
    if (!flat.active[s]) continue;
    const L = flat.seqLen[s]!;
    const homeW = new OwnerWalk(flat.home, homeB, s);
    const userW = new OwnerWalk(flat.user, userB, s);
    const qS = new ActiveSweep(qB.order, qB.offsets[s]!, qB.offsets[s + 1]!, t.qs, t.qe);
    const kS = kB ? new ActiveSweep(kB.order, kB.offsets[s]!, kB.offsets[s + 1]!, t.ks, kae) : undefined;
    const outS = new ActiveSweep(outB.order, outB.offsets[s]!, outB.offsets[s + 1]!, tr.start, tr.end);
    const dkvS = dkvB
      ? new ActiveSweep(dkvB.order, dkvB.offsets[s]!, dkvB.offsets[s + 1]!, tr.start, tr.end)
      : undefined;
    const cuts: number[] = [0, L];
    for (const [l, b] of [
      [flat.home, homeB],
      [flat.user, userB],
    ] as const)
      for (let i = b.offsets[s]!; i < b.offsets[s + 1]!; i++)
        cuts.push(l.start[b.order[i]!]!, l.end[b.order[i]!]!);
    qS.boundaries(cuts);
    kS?.boundaries(cuts);
    outS.boundaries(cuts);
    dkvS?.boundaries(cuts);
    const xs = sortedUnique(cuts);
    let missingDone = false;
    for (let k = 0; k + 1 < xs.length; k++) {
      const a = xs[k]!;
      const e = xs[k + 1]!;
      if (a >= L) break;
      qS.advance(a);
      kS?.advance(a);
      outS.advance(a);
      dkvS?.advance(a);
      const h = homeW.at(a);
      const u = userW.at(a);
      if (h < 0 || u < 0) continue; // rule 1 reports it
      let lastLocal = -1;
      for (const row of qS.active) {
        const op = ph.opOfTask[row]!;
        if (op >= 0 && ph.opRank[op] === h && op > lastLocal) lastLocal = op;
      }
      let lastArrival = -1;
      if (kS && dkvS) {
        let remote = dkvS.active.length > 0;
        for (const row of kS.active) {
          const op = ph.opOfTask[row]!;
          if (op < 0) continue;
          if (ph.opRank[op] !== h) remote = true;
          else if (op > lastLocal) lastLocal = op;
        }
        if (remote) lastArrival = simulatePartials(ctx, s, a, e, h, kS.active, dkvS.active);
      }
      if (checkOut(ctx, s, a, e, h, u, lastLocal, lastArrival, outS.active, missingDone)) missingDone = true;
    }
  }
}

/**
 * Checks the `out` rows over [a, e); returns true when it reported a missing out. An out goes from
 * the home `h` to the user rank `u`, directly or through one relay (FCP's two-hop `out` across
 * nodes): the home sends it to a rank that sends it on to `u` (rule 3 checks that the relay
 * received it in an earlier group). Exactly one row delivers it to `u`; the home's row waits for
 * the data to be final.
 */
function checkOut(
  ctx: Ctx,
  s: number,
  a: number,
  e: number,
  h: number,
  u: number,
  lastLocal: number,
  lastArrival: number,
  outs: number[],
  missingDone: boolean,
): boolean {
  const { ph, sink } = ctx;
  const tr = ph.transfers;
  const what = ph.name === 'forward' ? 'O' : 'dQ,dK,dV';
  let valid = 0;
  for (const o of outs) {
    const w = whereOf(tr.origin[o]!, ctx.trPath, ctx.chunkPath);
    const fromHome = tr.src[o] === h;
    if (tr.dst[o] !== u) {
      // Only the home's row may go to a relay, which must send it on to the user rank.
      const relay = tr.dst[o]!;
      if (!fromHome || !outs.some((x) => tr.src[x] === relay && tr.dst[x] === u)) {
        sink.addOnce(
          'plan.rule4.outNotUser',
          `out of tokens [${a}, ${e}) of sequence ${s} goes to rank ${relay}, not to their user rank ${u}${fromHome ? ' nor to a relay that sends it on' : ''}`,
          w.path,
          w.row,
        );
        continue;
      }
    } else if (++valid === 2) {
      sink.addOnce(
        'plan.rule4.outDuplicate',
        `${what} of tokens [${a}, ${e}) of sequence ${s} is sent to rank ${u} twice`,
        w.path,
        w.row,
      );
      continue;
    }
    // A relay's hop follows the home's (rule 3 checks that the relay received it first).
    if (!fromHome) continue;
    if (tr.sendAfter[o]! < lastLocal || tr.group[o]! <= lastArrival) {
      const why =
        tr.sendAfter[o]! < lastLocal
          ? `op ${lastLocal} still writes it but the out waits only for ${tr.sendAfter[o]! < 0 ? 'no op' : `op ${tr.sendAfter[o]}`}`
          : `a dK/dV partial arrives in group ${lastArrival}, not before the out's group ${tr.group[o]}`;
      sink.addOnce(
        'plan.rule4.outEarly',
        `${what} of tokens [${a}, ${e}) of sequence ${s} is sent before it is final: ${why}`,
        w.path,
        w.row,
      );
    }
  }
  if (u !== h && valid === 0 && !missingDone) {
    sink.add(
      'plan.rule4.outMissing',
      `${what} of tokens [${a}, ${e}) of sequence ${s} stays on home rank ${h}; its user rank is ${u}`,
      ctx.trPath,
    );
    return true;
  }
  return false;
}

interface RankState {
  ops: number[];
  rows: number[];
  taken: number;
}

/**
 * Follows the dK/dV partials of one elementary key interval through the `dkv` rows; reports lost,
 * duplicated and racing pushes; returns the last group in which a partial reached home h (-1).
 */
function simulatePartials(
  ctx: Ctx,
  s: number,
  a: number,
  e: number,
  h: number,
  contribRows: number[],
  dkvRows: number[],
): number {
  const { ph, sink, flat } = ctx;
  const tr = ph.transfers;
  const byRank = new Map<number, RankState>();
  const pairs: [number, number][] = [];
  for (const row of contribRows) {
    const op = ph.opOfTask[row]!;
    if (op >= 0) pairs.push([op, row]);
  }
  pairs.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  for (const [op, row] of pairs) {
    const r = ph.opRank[op]!;
    let st = byRank.get(r);
    if (!st) {
      st = { ops: [], rows: [], taken: -1 };
      byRank.set(r, st);
    }
    st.ops.push(op);
    st.rows.push(row);
  }
  const dkvs = [...dkvRows].sort((x, y) => tr.group[x]! - tr.group[y]! || x - y);
  const arrivals = new Map<number, { group: number; count: number; row: number; taken: boolean }[]>();
  const lastSendGroup = new Map<number, number>();
  for (const d of dkvs) {
    const r = tr.src[d]!;
    const g = tr.group[d]!;
    const S = tr.sendAfter[d]!;
    const w = whereOf(tr.origin[d]!, ctx.trPath, ctx.chunkPath);
    if (lastSendGroup.get(r) === g)
      sink.addOnce(
        'plan.rule4.dkvDuplicate',
        `rank ${r} pushes its dK/dV partial of tokens [${a}, ${e}) of sequence ${s} twice in group ${g}`,
        w.path,
        w.row,
      );
    lastSendGroup.set(r, g);
    let carried = 0;
    const st = byRank.get(r);
    if (st) {
      for (let i = 0; i < st.ops.length; i++) {
        const op = st.ops[i]!;
        if (op <= st.taken) continue;
        if (op <= S) carried++;
        else if (ph.opAfter[op]! < g)
          sink.addOnce(
            'plan.rule4.dkvRace',
            `rank ${r}'s op ${op} may add to the dK/dV partial of tokens [${a}, ${e}) of sequence ${s} while the push of group ${g} reads it (the push waits for ${S < 0 ? 'no op' : `op ${S}`}, the op only for group ${ph.opAfter[op]})`,
            w.path,
            w.row,
          );
      }
      st.taken = Math.max(st.taken, S);
    }
    for (const arr of arrivals.get(r) ?? [])
      if (!arr.taken && arr.group < g) {
        arr.taken = true;
        carried += arr.count;
      }
    if (carried > 0) {
      const dst = tr.dst[d]!;
      let list = arrivals.get(dst);
      if (!list) {
        list = [];
        arrivals.set(dst, list);
      }
      list.push({ group: g, count: carried, row: d, taken: false });
    }
  }
  for (const [r, st] of byRank) {
    if (r === h) continue;
    for (let i = 0; i < st.ops.length; i++)
      if (st.ops[i]! > st.taken) {
        const o = flat.tasks.origin[st.rows[i]!]!;
        const w = whereOf(o, 'tasks', 'chunkTasks');
        sink.addOnce(
          'plan.rule4.dkvLost',
          `the dK/dV contribution of this task to tokens [${a}, ${e}) of sequence ${s} stays on rank ${r}; no dkv pushes it toward home rank ${h}`,
          w.path,
          w.row,
        );
        break;
      }
  }
  let lastArrival = -1;
  for (const [r, list] of arrivals)
    for (const arr of list) {
      if (arr.taken) continue;
      if (r === h) lastArrival = Math.max(lastArrival, arr.group);
      else {
        const w = whereOf(tr.origin[arr.row]!, ctx.trPath, ctx.chunkPath);
        sink.addOnce(
          'plan.rule4.dkvLost',
          `this dkv leaves the dK/dV partial of tokens [${a}, ${e}) of sequence ${s} on rank ${r}, which is not its home ${h} and never pushes it on`,
          w.path,
          w.row,
        );
      }
    }
  return lastArrival;
}

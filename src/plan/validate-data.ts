/**
 * Rule 3: data is present before use (semantics: BRIEF "Plan semantics").
 *
 * Forward: rank r holds Q,K,V of its user tokens from the start; `in` brings Q,K,V to the home;
 * `kv` brings K,V. Backward: user ranks hold Q,K,V,dO of their tokens, home ranks Q,K,V,O,LSE of
 * theirs; `in` brings dO, `kv` brings K,V (forward fetches are not kept). Tokens received in group
 * g are usable by ops with `after >= g` and by sends of groups > g.
 *
 * Checks: a task's query side (forward Q, backward dO) and its whole key range (K,V) are on the
 * op's rank by group `after`; an `in` is sent by the user rank, or by a relay that received it in an
 * earlier group, to the home rank or to a relay that sends it on; a `kv` sender
 * holds K,V before its group; an `out` is sent by the home rank, or by a relay that received it as
 * `out` in an earlier group. A `dkv` moves whatever partial the
 * sender has (rule 4 follows it).
 */
import { Kind } from './types.ts';
import type { FlatLayout, FlatPhase, FlatPlan, FlatTransfers } from './validate-expand.ts';
import { type Holding, RangeIndex } from './validate-index.ts';
import { type IssueSink, whereOf } from './validate-issues.ts';

const FOREVER = 0x7fffffff;

/** Layout rows as holdings available from the start. */
export function layoutHolding(l: FlatLayout): Holding {
  return { seq: l.seq, rank: l.rank, start: l.start, end: l.end, avail: -1, n: l.n };
}

/** Receptions of transfers of the given kinds, usable after their group (`sent`: the senders' side, from the start). */
function arrivals(tr: FlatTransfers, kinds: number[], sent = false): Holding {
  let n = 0;
  for (let i = 0; i < tr.n; i++) if (kinds.includes(tr.kind[i]!)) n++;
  const h = {
    seq: new Int32Array(n),
    rank: new Int32Array(n),
    start: new Int32Array(n),
    end: new Int32Array(n),
    avail: new Int32Array(n),
    n,
  };
  let k = 0;
  for (let i = 0; i < tr.n; i++)
    if (kinds.includes(tr.kind[i]!)) {
      h.seq[k] = tr.seq[i]!;
      h.rank[k] = sent ? tr.src[i]! : tr.dst[i]!;
      h.start[k] = tr.start[i]!;
      h.end[k] = tr.end[i]!;
      h.avail[k++] = sent ? -1 : tr.group[i]!;
    }
  return h;
}

/**
 * Checks rule 3 for one phase. `kvOrigin` (the phase's direct senders, already checked for shape by
 * validate-origin.ts): each `kv` row's direct sender must hold the range before the row's group as
 * well (hand-overs change only who sends, so the receivers' holdings are the direct plan's).
 */
export function checkDataPresence(
  flat: FlatPlan,
  ph: FlatPhase,
  home: RangeIndex,
  sink: IssueSink,
  kvOrigin?: Int32Array,
): void {
  const nSeq = flat.seqLen.length;
  const fwd = ph.name === 'forward';
  const tr = ph.transfers;
  const ins = arrivals(tr, [Kind.in]);
  const qSide = new RangeIndex(nSeq, [layoutHolding(flat.user), ins]);
  const kvSide = new RangeIndex(
    nSeq,
    fwd
      ? [layoutHolding(flat.user), ins, arrivals(tr, [Kind.kv])]
      : [layoutHolding(flat.user), layoutHolding(flat.home), arrivals(tr, [Kind.kv])],
  );
  // Ranges each rank sends on as `in`: a relay (an `in` receiver that is not the home) must.
  const inSent = new RangeIndex(nSeq, [arrivals(tr, [Kind.in], true)]);
  // Outputs a relay received as `out` (FCP's two-hop `out`; rule 4 follows them to the user rank).
  const outGot = new RangeIndex(nSeq, [arrivals(tr, [Kind.out])]);
  const qName = fwd ? 'Q' : 'dO';
  const t = flat.tasks;
  for (let i = 0; i < t.n; i++) {
    const op = ph.opOfTask[i]!;
    if (op < 0) continue;
    const r = ph.opRank[op]!;
    const after = ph.opAfter[op]!;
    const s = t.seq[i]!;
    const o = t.origin[i]!;
    if (!qSide.covers(s, r, t.qs[i]!, t.qe[i]!, after)) {
      const w = whereOf(o, 'tasks', 'chunkTasks');
      sink.addOnce(
        'plan.rule3.qMissing',
        `${ph.name} op ${op} on rank ${r} (after group ${after}) needs ${qName} of tokens [${t.qs[i]}, ${t.qe[i]}) of sequence ${s}, not there by then`,
        w.path,
        w.row,
      );
    }
    if (!kvSide.covers(s, r, t.ks[i]!, t.ke[i]!, after)) {
      const w = whereOf(o, 'tasks', 'chunkTasks');
      sink.addOnce(
        'plan.rule3.kvMissing',
        `${ph.name} op ${op} on rank ${r} (after group ${after}) needs K/V of tokens [${t.ks[i]}, ${t.ke[i]}) of sequence ${s}, not there by then`,
        w.path,
        w.row,
      );
    }
  }
  const path = `${ph.name}.transfers`;
  const chunkPath = `${ph.name}.chunkTransfers`;
  for (let i = 0; i < tr.n; i++) {
    const s = tr.seq[i]!;
    const a = tr.start[i]!;
    const b = tr.end[i]!;
    const src = tr.src[i]!;
    const kind = tr.kind[i]!;
    let held = true;
    let what = '';
    if (kind === Kind.in) {
      // From the user layout, or relayed: received as `in` in an earlier group.
      held = qSide.covers(s, src, a, b, tr.group[i]! - 1);
      what = fwd ? 'Q,K,V (user layout or an earlier in)' : 'dO (user layout or an earlier in)';
      const dst = tr.dst[i]!;
      if (!home.covers(s, dst, a, b, FOREVER) && !inSent.covers(s, dst, a, b, FOREVER)) {
        const w = whereOf(tr.origin[i]!, path, chunkPath);
        sink.addOnce(
          'plan.rule3.inNotHome',
          `in of tokens [${a}, ${b}) of sequence ${s} goes to rank ${dst}, which is not their home and does not relay them`,
          w.path,
          w.row,
        );
      }
    } else if (kind === Kind.kv) {
      held = kvSide.covers(s, src, a, b, tr.group[i]! - 1);
      what = `K/V before group ${tr.group[i]}`;
      const row = tr.origin[i]!;
      const o = kvOrigin !== undefined && row >= 0 ? kvOrigin[row]! : src;
      if (o !== src && !kvSide.covers(s, o, a, b, tr.group[i]! - 1))
        sink.addOnce(
          'plan.kvOrigin',
          `${ph.name}.kvOrigin[${row}] is rank ${o}, which does not hold K/V of tokens [${a}, ${b}) of sequence ${s} before group ${tr.group[i]}`,
          `${ph.name}.kvOrigin`,
          row,
        );
    } else if (kind === Kind.out) {
      held = home.covers(s, src, a, b, FOREVER) || outGot.covers(s, src, a, b, tr.group[i]! - 1);
      what = fwd ? 'O (home layout or an earlier out)' : 'dQ,dK,dV (home layout or an earlier out)';
    }
    if (!held) {
      const w = whereOf(tr.origin[i]!, path, chunkPath);
      sink.addOnce(
        'plan.rule3.senderMissing',
        `rank ${src} sends tokens [${a}, ${b}) of sequence ${s} but does not hold their ${what}`,
        w.path,
        w.row,
      );
    }
  }
}

/**
 * Rule 2: tasks cover every attended (query, key) pair exactly once; no task is entirely masked;
 * a task's query range lies in its rank's home ranges; every task (and chunk task) runs in exactly
 * one compute op of each phase, on its own rank.
 *
 * Pair coverage is a 2D problem solved by a sweep along the query axis: cut it at every task's
 * query boundary; on each elementary query interval [a, b) the same tasks are active, and the
 * pairs are covered exactly once iff their key ranges, clipped to the attended keys ([0, b) under a
 * causal mask: a key below b is attended by the queries just below b; [0, L) under a full mask),
 * partition that range.
 */
import { attendedPairs } from '../model/attention.ts';
import type { Phase, Plan } from './types.ts';
import { chunkLiveness, type FlatPlan } from './validate-expand.ts';
import { ActiveSweep, type RangeIndex, type SeqBuckets, sortedUnique } from './validate-index.ts';
import { type IssueSink, whereOf } from './validate-issues.ts';

/**
 * Op of every task row (and chunk task row) in one phase: -1 unless it runs exactly once.
 * Reports tasks that never run, run twice, or run in an op of another rank.
 */
export function opMembership(
  plan: Plan,
  ph: Phase,
  name: string,
  sink: IssueSink,
): { tasks: Int32Array; chunkTasks: Int32Array } {
  const c = ph.compute;
  const live = chunkLiveness(plan);
  const ct = plan.chunkTasks;
  // A chunk task whose parts are empty for every sequence of its set stands for no task.
  const empty = (t: number): boolean =>
    ct !== undefined && Math.max(ct.qPart[t]!, ct.kvPart[t]!) >= live(ct.set[t]!, ct.parts[t]!);
  const one = (
    n: number,
    offsets: Int32Array | undefined,
    ids: Int32Array | undefined,
    rankOf: Int32Array,
    path: string,
    what: string,
    skip: (t: number) => boolean,
  ): Int32Array => {
    const op = new Int32Array(n).fill(-1);
    const count = new Int32Array(n);
    if (offsets && ids)
      for (let o = 0; o + 1 < offsets.length; o++)
        for (let k: number = offsets[o]!; k < offsets[o + 1]!; k++) {
          const t = ids[k]!;
          count[t]!++;
          op[t] = o;
          if (rankOf[t] !== c.rank[o] && !skip(t))
            sink.add(
              'plan.rule2.opRank',
              `${what} ${t} of rank ${rankOf[t]} runs in ${name} op ${o} of rank ${c.rank[o]}`,
              `${name}.compute`,
              o,
            );
        }
    for (let t = 0; t < n; t++) {
      if (skip(t)) continue;
      if (count[t] === 0)
        sink.add('plan.rule2.taskNotRun', `${what} ${t} runs in no ${name} compute op`, path, t);
      else if (count[t]! > 1)
        sink.add(
          'plan.rule2.taskRunTwice',
          `${what} ${t} runs ${count[t]} times in the ${name} phase`,
          path,
          t,
        );
      if (count[t] !== 1) op[t] = -1;
    }
    return op;
  };
  return {
    tasks: one(
      plan.tasks.rank.length,
      c.taskOffsets,
      c.taskIds,
      plan.tasks.rank,
      'tasks',
      'task',
      () => false,
    ),
    chunkTasks: one(
      ct ? ct.rank.length : 0,
      c.chunkTaskOffsets,
      c.chunkTaskIds,
      ct ? ct.rank : new Int32Array(0),
      'chunkTasks',
      'chunk task',
      empty,
    ),
  };
}

/** Masked tasks, query ranges outside the rank's home, and exact pair coverage. */
export function checkTasks(flat: FlatPlan, home: RangeIndex, byQuery: SeqBuckets, sink: IssueSink): void {
  const t = flat.tasks;
  for (let i = 0; i < t.n; i++) {
    const pairs = attendedPairs(flat.causal, t.qs[i]!, t.qe[i]! - t.qs[i]!, t.ks[i]!, t.ke[i]! - t.ks[i]!);
    const w = whereOf(t.origin[i]!, 'tasks', 'chunkTasks');
    if (pairs === 0)
      sink.addOnce(
        'plan.rule2.masked',
        `queries [${t.qs[i]}, ${t.qe[i]}) attend no key of [${t.ks[i]}, ${t.ke[i]}) of sequence ${t.seq[i]}`,
        w.path,
        w.row,
      );
    if (!home.covers(t.seq[i]!, t.rank[i]!, t.qs[i]!, t.qe[i]!, 0x7fffffff))
      sink.addOnce(
        'plan.rule2.notHome',
        `queries [${t.qs[i]}, ${t.qe[i]}) of sequence ${t.seq[i]} are not all home on rank ${t.rank[i]}, which computes them`,
        w.path,
        w.row,
      );
  }
  checkPairCoverage(flat, byQuery, sink);
}

function checkPairCoverage(flat: FlatPlan, b: SeqBuckets, sink: IssueSink): void {
  const t = flat.tasks;
  const nSeq = flat.seqLen.length;
  const lo: number[] = [];
  const hi: number[] = [];
  const idx: number[] = [];
  const rows: number[] = [];
  for (let s = 0; s < nSeq; s++) {
    if (!flat.active[s]) continue;
    const L = flat.seqLen[s]!;
    const sweep = new ActiveSweep(b.order, b.offsets[s]!, b.offsets[s + 1]!, t.qs, t.qe);
    const cuts: number[] = [0, L];
    sweep.boundaries(cuts);
    const xs = sortedUnique(cuts);
    let missingDone = false;
    let overlapDone = false;
    for (let k = 0; k + 1 < xs.length; k++) {
      const a = xs[k]!;
      const e = xs[k + 1]!;
      sweep.advance(a);
      const lim = flat.causal ? e : L;
      lo.length = 0;
      hi.length = 0;
      idx.length = 0;
      rows.length = 0;
      for (const row of sweep.active) {
        const h = Math.min(t.ke[row]!, lim);
        if (h > t.ks[row]!) {
          idx.push(idx.length);
          rows.push(row);
          lo.push(t.ks[row]!);
          hi.push(h);
        }
      }
      idx.sort((x, y) => lo[x]! - lo[y]! || hi[x]! - hi[y]!);
      let reach = 0;
      for (const j of idx) {
        if (lo[j]! > reach && !missingDone) {
          missingDone = true;
          reportMissing(sink, s, a, e, reach, lo[j]!, flat.causal);
        } else if (lo[j]! < reach && !overlapDone) {
          overlapDone = true;
          const w = whereOf(t.origin[rows[j]!]!, 'tasks', 'chunkTasks');
          sink.add(
            'plan.rule2.pairOverlap',
            `queries [${a}, ${e}) of sequence ${s} meet keys [${lo[j]}, ${Math.min(reach, hi[j]!)}) in two tasks`,
            w.path,
            w.row,
          );
        }
        reach = Math.max(reach, hi[j]!);
      }
      if (reach < lim && !missingDone) {
        missingDone = true;
        reportMissing(sink, s, a, e, reach, lim, flat.causal);
      }
      if (missingDone && overlapDone) break;
    }
  }
}

function reportMissing(
  sink: IssueSink,
  s: number,
  a: number,
  e: number,
  k0: number,
  k1: number,
  causal: boolean,
): void {
  sink.add(
    'plan.rule2.pairMissing',
    `no task computes queries [${a}, ${e}) of sequence ${s} against keys [${k0}, ${k1})${causal ? ' (causal)' : ''}`,
    'tasks',
  );
}

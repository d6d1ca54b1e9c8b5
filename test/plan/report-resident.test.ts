/**
 * residentKvPeak (src/plan/report-resident.ts) against a brute-force reading of its documented
 * model: every `kv` reception is held from its arrival group to its last use on that rank (an op
 * with `after` >= arrival reading an overlapping range, or a later `kv` send of it), and the peak
 * is the largest per-group sum of held tokens. Real plans of every planner (explicit rows: fcp,
 * magi; chunk rows: ring, wlb), so both halves of the function are covered, plus a hand-made case
 * whose answer is known.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { partLength } from '../../src/plan/parts.ts';
import { residentKvPeak } from '../../src/plan/report-resident.ts';
import { Kind, type Phase, type Plan } from '../../src/plan/types.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const tokensOf =
  (plan: Plan) =>
  (set: number, parts: number, part: number): number => {
    const s = plan.seqSets!;
    let t = 0;
    for (let j = s.offsets[set]!; j < s.offsets[set + 1]!; j++)
      t += partLength(plan.sequences[s.seqs[j]!]!, parts, part);
    return t;
  };

/** The model, quadratically: one held interval per reception, then a sum per (rank, group). */
function reference(plan: Plan, ph: Phase): Float64Array {
  const g = ph.groupOfRound;
  const c = ph.compute;
  const tok = tokensOf(plan);
  const held: { rank: number; from: number; to: number; tok: number }[] = [];
  const tr = ph.transfers;
  for (let i = 0; i < tr.round.length; i++) {
    if (tr.kind[i] !== Kind.kv) continue;
    const [rank, seq, a, b, arr] = [
      tr.dst[i]!,
      tr.seq[i]!,
      tr.start[i]!,
      tr.start[i]! + tr.length[i]!,
      g[tr.round[i]!]!,
    ];
    let to = arr;
    for (let o = 0; o < c.rank.length; o++) {
      if (c.rank[o] !== rank || c.after[o]! < arr) continue;
      for (let k = c.taskOffsets[o]!; k < c.taskOffsets[o + 1]!; k++) {
        const id = c.taskIds[k]!;
        const s = plan.tasks.kvStart[id]!;
        if (plan.tasks.seq[id] === seq && s < b && s + plan.tasks.kvLength[id]! > a)
          to = Math.max(to, c.after[o]!);
      }
    }
    for (let j = 0; j < tr.round.length; j++) {
      const gj = g[tr.round[j]!]!;
      if (tr.kind[j] !== Kind.kv || tr.src[j] !== rank || tr.seq[j] !== seq || gj - 1 < arr) continue;
      if (tr.start[j]! < b && tr.start[j]! + tr.length[j]! > a) to = Math.max(to, gj);
    }
    held.push({ rank, from: arr, to, tok: b - a });
  }
  const ctr = ph.chunkTransfers;
  const ct = plan.chunkTasks;
  if (ctr)
    for (let i = 0; i < ctr.round.length; i++) {
      if (ctr.kind[i] !== Kind.kv) continue;
      const [rank, set, parts, part, arr] = [
        ctr.dst[i]!,
        ctr.set[i]!,
        ctr.parts[i]!,
        ctr.part[i]!,
        g[ctr.round[i]!]!,
      ];
      let to = arr;
      if (ct && c.chunkTaskOffsets && c.chunkTaskIds)
        for (let o = 0; o < c.rank.length; o++) {
          if (c.rank[o] !== rank || c.after[o]! < arr) continue;
          for (let k: number = c.chunkTaskOffsets[o]!; k < c.chunkTaskOffsets[o + 1]!; k++) {
            const id = c.chunkTaskIds[k]!;
            if (ct.set[id] === set && ct.parts[id] === parts && ct.kvPart[id] === part)
              to = Math.max(to, c.after[o]!);
          }
        }
      for (let j = 0; j < ctr.round.length; j++) {
        const gj = g[ctr.round[j]!]!;
        if (ctr.kind[j] !== Kind.kv || ctr.src[j] !== rank || gj - 1 < arr) continue;
        if (ctr.set[j] === set && ctr.parts[j] === parts && ctr.part[j] === part) to = Math.max(to, gj);
      }
      held.push({ rank, from: arr, to, tok: tok(set, parts, part) });
    }
  const peak = new Float64Array(plan.world);
  const last = held.reduce((m, h) => Math.max(m, h.to), 0);
  for (let r = 0; r < plan.world; r++)
    for (let t = 0; t <= last; t++) {
      let sum = 0;
      for (const h of held) if (h.rank === r && h.from <= t && t <= h.to) sum += h.tok;
      peak[r] = Math.max(peak[r]!, sum);
    }
  return peak;
}

const CASES: [string, Record<string, unknown>][] = [
  ['fcp', {}],
  ['ring', {}],
  ['ring', { ringVariant: 'a2a+p2p', a2aDegree: 4 }],
  ['ring', { ringVariant: 'all_gather' }],
  ['wlb', {}],
  ['magi', {}],
  ['magi', { magiBackend: 'native', overlapDegree: 3 }],
];

test('residentKvPeak matches the brute-force model on every planner (8 ranks, 2 batches)', () => {
  let chunkRows = 0;
  let explicitRows = 0;
  for (const batch of ['longtail', 'bimodal'])
    for (const [name, cfg] of CASES) {
      const p = resolveProblem({
        batch,
        world: 8,
        seed: 2,
        tokensPerRank: 8192,
        mask: 'causal',
        gpusPerNode: 8,
      });
      const plan = getPlanner(name).plan(p, cfg);
      for (const ph of [plan.forward, plan.backward]) {
        chunkRows += ph.chunkTransfers?.round.length ?? 0;
        explicitRows += ph.transfers.round.length;
        const got = residentKvPeak(plan, ph, tokensOf(plan));
        assert.deepEqual(
          Array.from(got),
          Array.from(reference(plan, ph)),
          `${name} ${JSON.stringify(cfg)} ${batch}`,
        );
      }
    }
  // Both halves of the function were exercised.
  assert.ok(chunkRows > 0 && explicitRows > 0);
});

test('residentKvPeak: a range used in a later group is held until then, one freed is not', () => {
  const plan = getPlanner('ring').plan(
    resolveProblem({
      batch: 'uniform',
      world: 4,
      seed: 1,
      tokensPerRank: 4096,
      mask: 'causal',
      gpusPerNode: 4,
    }),
    {},
  );
  const ph = plan.forward;
  const peak = residentKvPeak(plan, ph, tokensOf(plan));
  assert.deepEqual(Array.from(peak), Array.from(reference(plan, ph)));
  // The ring passes every chunk on: each rank holds more than one reception at once.
  const ctr = ph.chunkTransfers!;
  const one = tokensOf(plan)(ctr.set[0]!, ctr.parts[0]!, ctr.part[0]!);
  assert.ok(peak.every((x) => x > one));
});

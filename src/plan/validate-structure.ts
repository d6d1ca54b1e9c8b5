/**
 * Structural checks of a plan: ids in range, ranges inside their sequences, CSR offsets monotone,
 * equal-length columns, kinds allowed in their phase. The rule checks (validate-*.ts) index arrays
 * with these values, so they run only on a structurally sound plan.
 *
 * Codes: `plan.structure.<what>`, except layout rows whose token range leaves the sequence, which
 * break rule 1 (`plan.rule1.range`).
 */

import { LIMITS } from '../core/limits.ts';
import type { ChunkLayout, Layout, Phase, Plan } from './types.ts';
import { Kind } from './types.ts';
import type { IssueSink } from './validate-issues.ts';

/** Number of groups of a phase: 1 + the largest group index (0 without rounds). */
export function groupCount(groupOfRound: Int32Array): number {
  let g = -1;
  for (let i = 0; i < groupOfRound.length; i++) if (groupOfRound[i]! > g) g = groupOfRound[i]!;
  return g + 1;
}

/** Checks structure; returns false when rule checks cannot run safely. */
export function checkStructure(plan: Plan, sink: IssueSink): boolean {
  const before = sink.count;
  const S = 'plan.structure';
  const world = plan.world;
  if (!Number.isInteger(world) || world < 1) {
    sink.add(`${S}.world`, `world must be a positive integer (got ${world})`, 'world');
    return false;
  }
  // Sizes first: every later check (and every executor) allocates by world, heads and lengths, so
  // an absurd value must stop here, before any of them runs.
  if (!checkSizes(plan, sink)) return false;
  if (plan.mask !== 'causal' && plan.mask !== 'full')
    sink.add(`${S}.mask`, `mask must be causal or full`, 'mask');
  const seqs = plan.sequences;
  const nSeq = seqs.length;
  for (let i = 0; i < nSeq; i++)
    if (seqs[i]! <= 0)
      sink.add(
        `${S}.seqLength`,
        `sequence ${i} has length ${seqs[i]}; lengths must be positive`,
        'sequences',
        i,
      );

  const sameLength = (table: object, path: string): number => {
    let n = -1;
    for (const [k, v] of Object.entries(table)) {
      if (
        !ArrayBuffer.isView(v) ||
        k.endsWith('Offsets') ||
        k.endsWith('Ids') ||
        k === 'padTo' ||
        k === 'offsets'
      )
        continue;
      if (k === 'seqs' || k.startsWith('chunk')) continue;
      const len = (v as Int32Array).length;
      if (n >= 0 && len !== n) {
        sink.add(`${S}.columns`, `${path}.${k} has ${len} rows, expected ${n}`, `${path}.${k}`);
        return -1;
      }
      n = Math.max(n, len);
    }
    return Math.max(n, 0);
  };
  const rankOk = (r: number): boolean => r >= 0 && r < world;
  const seqOk = (s: number): boolean => s >= 0 && s < nSeq;
  const rangeOk = (s: number, start: number, length: number): boolean =>
    start >= 0 && length > 0 && start + length <= seqs[s]!;

  const layout = (l: Layout, path: string): void => {
    const n = sameLength(l, path);
    for (let i = 0; i < n; i++) {
      if (!rankOk(l.rank[i]!)) sink.add(`${S}.rank`, `rank ${l.rank[i]} is not in [0, ${world})`, path, i);
      if (!seqOk(l.seq[i]!)) sink.add(`${S}.seq`, `sequence ${l.seq[i]} does not exist`, path, i);
      else if (!rangeOk(l.seq[i]!, l.start[i]!, l.length[i]!))
        sink.add(
          'plan.rule1.range',
          `tokens [${l.start[i]}, +${l.length[i]}) are not a non-empty range of sequence ${l.seq[i]} (length ${seqs[l.seq[i]!]})`,
          path,
          i,
        );
    }
  };
  layout(plan.userLayout, 'userLayout');
  layout(plan.homeLayout, 'homeLayout');

  const t = plan.tasks;
  const nTasks = sameLength(t, 'tasks');
  for (let i = 0; i < nTasks; i++) {
    if (!rankOk(t.rank[i]!)) sink.add(`${S}.rank`, `rank ${t.rank[i]} is not in [0, ${world})`, 'tasks', i);
    if (!seqOk(t.seq[i]!)) sink.add(`${S}.seq`, `sequence ${t.seq[i]} does not exist`, 'tasks', i);
    else if (
      !rangeOk(t.seq[i]!, t.qStart[i]!, t.qLength[i]!) ||
      !rangeOk(t.seq[i]!, t.kvStart[i]!, t.kvLength[i]!)
    )
      sink.add(`${S}.range`, `query or key range leaves sequence ${t.seq[i]} or is empty`, 'tasks', i);
  }

  // Sequence sets and chunk rows.
  let nSets = 0;
  const ss = plan.seqSets;
  if (ss) {
    const o = ss.offsets;
    nSets = Math.max(0, o.length - 1);
    if (o.length === 0 || o[0] !== 0 || o[o.length - 1] !== ss.seqs.length)
      sink.add(`${S}.offsets`, `seqSets.offsets must start at 0 and end at seqs.length`, 'seqSets.offsets');
    for (let i = 1; i < o.length; i++)
      if (o[i]! < o[i - 1]!) sink.add(`${S}.offsets`, `seqSets.offsets decreases`, 'seqSets.offsets', i);
    for (let i = 0; i < ss.seqs.length; i++)
      if (!seqOk(ss.seqs[i]!))
        sink.add(`${S}.seq`, `sequence ${ss.seqs[i]} does not exist`, 'seqSets.seqs', i);
    if (ss.padTo && ss.padTo.length !== nSets)
      sink.add(`${S}.columns`, `seqSets.padTo must have one entry per set`, 'seqSets.padTo');
    if (ss.padTo)
      for (let i = 0; i < ss.padTo.length; i++)
        if (ss.padTo[i]! < 0 || ss.padTo[i]! > LIMITS.sequenceLength.max)
          sink.add(
            `${S}.padTo`,
            `padTo ${ss.padTo[i]} is not in [0, ${LIMITS.sequenceLength.max}]`,
            'seqSets.padTo',
            i,
          );
  }
  const setOk = (s: number): boolean => s >= 0 && s < nSets;
  const chunkCommon = (
    rank: Int32Array,
    set: Int32Array,
    parts: Int32Array,
    i: number,
    path: string,
  ): boolean => {
    if (!rankOk(rank[i]!)) sink.add(`${S}.rank`, `rank ${rank[i]} is not in [0, ${world})`, path, i);
    if (!setOk(set[i]!))
      sink.add(`${S}.set`, `sequence set ${set[i]} does not exist (seqSets has ${nSets})`, path, i);
    if (parts[i]! < 1 || parts[i]! > LIMITS.parts.max) {
      sink.add(`${S}.part`, `parts must be in [1, ${LIMITS.parts.max}] (got ${parts[i]})`, path, i);
      return false;
    }
    return true;
  };
  const partOk = (p: number, parts: number): boolean => p >= 0 && p < parts;
  const chunkLayout = (l: ChunkLayout | undefined, path: string): void => {
    if (!l) return;
    const n = sameLength(l, path);
    for (let i = 0; i < n; i++)
      if (chunkCommon(l.rank, l.set, l.parts, i, path) && !partOk(l.part[i]!, l.parts[i]!))
        sink.add(`${S}.part`, `part ${l.part[i]} is not in [0, ${l.parts[i]})`, path, i);
  };
  chunkLayout(plan.userChunks, 'userChunks');
  chunkLayout(plan.homeChunks, 'homeChunks');
  const ct = plan.chunkTasks;
  const nChunkTasks = ct ? sameLength(ct, 'chunkTasks') : 0;
  if (ct)
    for (let i = 0; i < nChunkTasks; i++)
      if (
        chunkCommon(ct.rank, ct.set, ct.parts, i, 'chunkTasks') &&
        (!partOk(ct.qPart[i]!, ct.parts[i]!) || !partOk(ct.kvPart[i]!, ct.parts[i]!))
      )
        sink.add(
          `${S}.part`,
          `qPart ${ct.qPart[i]} or kvPart ${ct.kvPart[i]} is not in [0, ${ct.parts[i]})`,
          'chunkTasks',
          i,
        );

  for (const name of ['forward', 'backward'] as const)
    checkPhase(plan.world, nSeq, seqs, nTasks, nChunkTasks, nSets, plan[name], name, sink, sameLength);
  return sink.count === before;
}

function checkPhase(
  world: number,
  nSeq: number,
  seqs: Int32Array,
  nTasks: number,
  nChunkTasks: number,
  nSets: number,
  ph: Phase,
  name: string,
  sink: IssueSink,
  sameLength: (t: object, path: string) => number,
): void {
  const S = 'plan.structure';
  const rounds = ph.groupOfRound.length;
  if (rounds > LIMITS.rounds.max) {
    sink.add(
      'plan.limit.rounds',
      `${rounds} rounds is above the limit of ${LIMITS.rounds.max}`,
      `${name}.groupOfRound`,
    );
    return;
  }
  // Group ids size per-group arrays in the rule checks: bound them by the rounds here (rule 5
  // checks that they start at 0 and grow by at most one per round).
  for (let r = 0; r < rounds; r++)
    if (ph.groupOfRound[r]! > rounds) {
      sink.add(
        `${S}.group`,
        `group ${ph.groupOfRound[r]} of round ${r} is above the number of rounds (${rounds})`,
        `${name}.groupOfRound`,
        r,
      );
      return;
    }
  const groups = groupCount(ph.groupOfRound);
  const allowed = name === 'forward' ? [Kind.in, Kind.kv, Kind.out] : [Kind.in, Kind.kv, Kind.dkv, Kind.out];
  const rankOk = (r: number): boolean => r >= 0 && r < world;
  const transferRow = (
    path: string,
    i: number,
    round: number,
    src: number,
    dst: number,
    kind: number,
  ): void => {
    if (round < 0 || round >= rounds)
      sink.add(
        `${S}.round`,
        `round ${round} is not in [0, ${rounds}) (groupOfRound has ${rounds} rounds)`,
        path,
        i,
      );
    if (!rankOk(src) || !rankOk(dst))
      sink.add(`${S}.rank`, `src ${src} or dst ${dst} is not in [0, ${world})`, path, i);
    else if (src === dst) sink.add(`${S}.selfTransfer`, `transfer from rank ${src} to itself`, path, i);
    if (!(allowed as number[]).includes(kind))
      sink.add(`${S}.kind`, `kind code ${kind} is not allowed in the ${name} phase`, path, i);
  };
  const tr = ph.transfers;
  const nTr = sameLength(tr, `${name}.transfers`);
  for (let i = 0; i < nTr; i++) {
    transferRow(`${name}.transfers`, i, tr.round[i]!, tr.src[i]!, tr.dst[i]!, tr.kind[i]!);
    const s = tr.seq[i]!;
    if (s < 0 || s >= nSeq) sink.add(`${S}.seq`, `sequence ${s} does not exist`, `${name}.transfers`, i);
    else if (tr.start[i]! < 0 || tr.length[i]! <= 0 || tr.start[i]! + tr.length[i]! > seqs[s]!)
      sink.add(
        `${S}.range`,
        `tokens [${tr.start[i]}, +${tr.length[i]}) are not a non-empty range of sequence ${s}`,
        `${name}.transfers`,
        i,
      );
  }
  const ctr = ph.chunkTransfers;
  const nCtr = ctr ? sameLength(ctr, `${name}.chunkTransfers`) : 0;
  if (ctr)
    for (let i = 0; i < nCtr; i++) {
      const path = `${name}.chunkTransfers`;
      transferRow(path, i, ctr.round[i]!, ctr.src[i]!, ctr.dst[i]!, ctr.kind[i]!);
      if (ctr.set[i]! < 0 || ctr.set[i]! >= nSets)
        sink.add(`${S}.set`, `sequence set ${ctr.set[i]} does not exist`, path, i);
      if (
        ctr.parts[i]! < 1 ||
        ctr.parts[i]! > LIMITS.parts.max ||
        ctr.part[i]! < 0 ||
        ctr.part[i]! >= ctr.parts[i]!
      )
        sink.add(`${S}.part`, `part ${ctr.part[i]} of ${ctr.parts[i]} is not a part`, path, i);
    }

  const c = ph.compute;
  const nOps = c.rank.length;
  if (c.after.length !== nOps)
    sink.add(
      `${S}.columns`,
      `${name}.compute.after has ${c.after.length} rows, expected ${nOps}`,
      `${name}.compute.after`,
    );
  for (let i = 0; i < nOps; i++) {
    if (!rankOk(c.rank[i]!))
      sink.add(`${S}.rank`, `rank ${c.rank[i]} is not in [0, ${world})`, `${name}.compute`, i);
    const a = c.after[i] ?? -1;
    if (a < -1 || a >= groups)
      sink.add(`${S}.after`, `after ${a} is not -1 or a group in [0, ${groups})`, `${name}.compute`, i);
  }
  const csr = (
    offsets: Int32Array | undefined,
    ids: Int32Array | undefined,
    n: number,
    what: string,
  ): void => {
    const path = `${name}.compute.${what}`;
    if (!offsets || !ids) {
      if (offsets || ids)
        sink.add(`${S}.offsets`, `${what}Offsets and ${what}Ids must be given together`, path);
      return;
    }
    if (offsets.length !== nOps + 1 || offsets[0] !== 0 || offsets[nOps] !== ids.length) {
      sink.add(
        `${S}.offsets`,
        `${what}Offsets must have ops+1 = ${nOps + 1} entries from 0 to ${what}Ids.length`,
        `${path}Offsets`,
      );
      return;
    }
    for (let i = 0; i < nOps; i++)
      if (offsets[i + 1]! < offsets[i]!)
        sink.add(`${S}.offsets`, `${what}Offsets decreases`, `${path}Offsets`, i + 1);
    for (let i = 0; i < ids.length; i++)
      if (ids[i]! < 0 || ids[i]! >= n)
        sink.add(`${S}.taskId`, `${what} id ${ids[i]} is not in [0, ${n})`, `${path}Ids`, i);
  };
  csr(c.taskOffsets, c.taskIds, nTasks, 'task');
  if (c.chunkTaskOffsets || c.chunkTaskIds) csr(c.chunkTaskOffsets, c.chunkTaskIds, nChunkTasks, 'chunkTask');

  const pairs = (
    trIds: Int32Array | undefined,
    ops: Int32Array | undefined,
    nT: number,
    what: string,
  ): void => {
    const path = `${name}.sendAfter`;
    if (!trIds && !ops) return;
    if (!trIds || !ops || trIds.length !== ops.length) {
      sink.add(`${S}.columns`, `${path} ${what} and its compute column must have equal lengths`, path);
      return;
    }
    for (let i = 0; i < trIds.length; i++) {
      if (trIds[i]! < 0 || trIds[i]! >= nT)
        sink.add(`${S}.transferId`, `${what} ${trIds[i]} is not in [0, ${nT})`, path, i);
      if (ops[i]! < 0 || ops[i]! >= nOps)
        sink.add(`${S}.computeId`, `compute op ${ops[i]} is not in [0, ${nOps})`, path, i);
    }
  };
  pairs(ph.sendAfter.transfer, ph.sendAfter.compute, nTr, 'transfer');
  pairs(ph.sendAfter.chunkTransfer, ph.sendAfter.chunkCompute, nCtr, 'chunkTransfer');
}

/**
 * World, model and sequence sizes against {@link LIMITS} (codes `plan.limit.<name>`), and the model
 * shape's own consistency (`plan.structure.model`: positive integers, query heads a multiple of KV
 * heads). Returns false when a size is out of bounds: no later check may allocate by it.
 */
function checkSizes(plan: Plan, sink: IssueSink): boolean {
  const before = sink.count;
  const over = (name: keyof typeof LIMITS, value: number, what: string, path: string): void => {
    if (value > LIMITS[name].max)
      sink.add(
        `plan.limit.${name}`,
        `${what} is ${value}, above the limit of ${LIMITS[name].max} (${LIMITS[name].why})`,
        path,
      );
  };
  over('world', plan.world, 'world', 'world');
  const m = plan.model;
  const shape: [keyof typeof m, keyof typeof LIMITS][] = [
    ['qHeads', 'heads'],
    ['kvHeads', 'heads'],
    ['headDim', 'headDim'],
    ['bytesPerElement', 'bytesPerElement'],
  ];
  for (const [k, limit] of shape) {
    const v = m?.[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
      sink.add('plan.structure.model', `model.${k} must be a positive integer (got ${v})`, `model.${k}`);
    else over(limit, v, `model.${k}`, `model.${k}`);
  }
  if (sink.count === before && m.qHeads % m.kvHeads !== 0)
    sink.add(
      'plan.structure.model',
      `query heads (${m.qHeads}) must be a multiple of KV heads (${m.kvHeads})`,
      'model.qHeads',
    );
  const seqs = plan.sequences;
  over('sequences', seqs.length, 'the number of sequences', 'sequences');
  let total = 0;
  let longest = 0;
  for (let i = 0; i < seqs.length; i++) {
    total += Math.max(0, seqs[i]!);
    if (seqs[i]! > longest) longest = seqs[i]!;
  }
  over('sequenceLength', longest, 'the longest sequence', 'sequences');
  over('totalTokens', total, 'the number of tokens', 'sequences');
  return sink.count === before;
}

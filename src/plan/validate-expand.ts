/**
 * Flattening for the validator: explicit rows plus chunk rows expanded into explicit token
 * ranges, but only for a few "representative" sequences.
 *
 * Why representatives suffice: a sequence that appears only in chunk rows of one parts count P is
 * order-isomorphic to any other such sequence of the same sets, up to the number n of its
 * non-empty parts (part i maps to part i). Every row and every obligation of rules 1-5 involves
 * only the parts it names, so dropping parts >= n drops exactly the obligations and the provisions
 * on those parts: if the member with the largest n obeys every rule, so does every member, and if
 * it breaks one, it is itself a real offender. Sequences cut with several parts counts are grouped
 * by the exact order pattern of their part boundaries; sequences named by explicit rows are checked
 * one by one. A 256-rank ring plan (one set, P = 512) thus validates one expanded sequence.
 */
import { iota } from '../core/gather.ts';
import { IntColumn } from '../core/int-column.ts';
import { liveParts, nonEmptyParts, partRange, partSize } from './parts.ts';
import type { ChunkLayout, Layout, Phase, Plan } from './types.ts';
import { groupCount } from './validate-structure.ts';

/** Layout rows as half-open token ranges; `origin` as in {@link whereOf}. */
export interface FlatLayout {
  n: number;
  rank: Int32Array;
  seq: Int32Array;
  start: Int32Array;
  end: Int32Array;
  origin: Int32Array;
}

/** Task rows as half-open ranges. */
export interface FlatTasks {
  n: number;
  rank: Int32Array;
  seq: Int32Array;
  qs: Int32Array;
  qe: Int32Array;
  ks: Int32Array;
  ke: Int32Array;
  origin: Int32Array;
}

/** Transfer rows of one phase with their group and effective `sendAfter` op (-1: none). */
export interface FlatTransfers {
  n: number;
  round: Int32Array;
  group: Int32Array;
  src: Int32Array;
  dst: Int32Array;
  kind: Uint8Array;
  seq: Int32Array;
  start: Int32Array;
  end: Int32Array;
  origin: Int32Array;
  sendAfter: Int32Array;
}

/** One phase, flattened. */
export interface FlatPhase {
  name: 'forward' | 'backward';
  transfers: FlatTransfers;
  /** Per flat task: the op running it, or -1 when it is not run exactly once. */
  opOfTask: Int32Array;
  opRank: Int32Array;
  opAfter: Int32Array;
  groups: number;
}

/** The plan as the rule checks see it. */
export interface FlatPlan {
  world: number;
  causal: boolean;
  seqLen: Int32Array;
  /** Sequences whose rows are present in the flat tables (all others are represented). */
  active: Uint8Array;
  user: FlatLayout;
  home: FlatLayout;
  tasks: FlatTasks;
  forward: FlatPhase;
  backward: FlatPhase;
}

/** Per-row facts computed before flattening (see validate-tasks.ts and validate-order.ts). */
export interface RowFacts {
  /** Per phase: op of each explicit task / chunk task (-1: not exactly once). */
  opOfTask: { forward: Int32Array; backward: Int32Array };
  opOfChunkTask: { forward: Int32Array; backward: Int32Array };
  /** Per phase: effective sendAfter op of each explicit / chunk transfer (-1: none). */
  sendAfter: { forward: Int32Array; backward: Int32Array };
  chunkSendAfter: { forward: Int32Array; backward: Int32Array };
}

/** Which sequences stand for their class, and the active members of every set. */
function representatives(plan: Plan): { active: Uint8Array; membersOfSet: Int32Array[] } {
  const nSeq = plan.sequences.length;
  const active = new Uint8Array(nSeq).fill(1);
  const ss = plan.seqSets;
  const nSets = ss ? ss.offsets.length - 1 : 0;
  const partsOfSet: Set<number>[] = Array.from({ length: nSets }, () => new Set<number>());
  const addParts = (set: Int32Array, parts: Int32Array): void => {
    for (let i = 0; i < set.length; i++) partsOfSet[set[i]!]!.add(parts[i]!);
  };
  for (const t of [
    plan.userChunks,
    plan.homeChunks,
    plan.chunkTasks,
    plan.forward.chunkTransfers,
    plan.backward.chunkTransfers,
  ])
    if (t) addParts(t.set, t.parts);
  const membersOfSet: Int32Array[] = Array.from({ length: nSets }, () => new Int32Array(0));
  if (!ss || nSets === 0) return { active, membersOfSet };
  const touched = new Uint8Array(nSeq);
  for (const col of [
    plan.userLayout.seq,
    plan.homeLayout.seq,
    plan.tasks.seq,
    plan.forward.transfers.seq,
    plan.backward.transfers.seq,
  ])
    for (let i = 0; i < col.length; i++) touched[col[i]!] = 1;
  const setsOf: number[][] = Array.from({ length: nSeq }, () => []);
  for (let x = 0; x < nSets; x++) {
    if (partsOfSet[x]!.size === 0) continue;
    for (let i = ss.offsets[x]!; i < ss.offsets[x + 1]!; i++) setsOf[ss.seqs[i]!]!.push(x);
  }
  const classes = new Map<string, { rep: number; n: number }>();
  for (let s = 0; s < nSeq; s++) {
    const sets = setsOf[s]!;
    if (sets.length === 0 || touched[s]) continue;
    active[s] = 0;
    const ps = new Set<number>();
    for (const x of sets) for (const p of partsOfSet[x]!) ps.add(p);
    const L = plan.sequences[s]!;
    let key: string;
    let n = 0;
    if (ps.size === 1) {
      const P = ps.values().next().value as number;
      n = nonEmptyParts(L, P);
      key = `${sets.join(',')}|${P}`;
    } else
      key = `${sets.join(',')}|${boundaryPattern(
        L,
        [...ps].sort((a, b) => a - b),
      )}`;
    const c = classes.get(key);
    if (!c) classes.set(key, { rep: s, n });
    else if (n > c.n) {
      c.rep = s;
      c.n = n;
    }
  }
  for (const c of classes.values()) active[c.rep] = 1;
  for (let x = 0; x < nSets; x++) {
    const m: number[] = [];
    for (let i = ss.offsets[x]!; i < ss.offsets[x + 1]!; i++) if (active[ss.seqs[i]!]) m.push(ss.seqs[i]!);
    membersOfSet[x] = Int32Array.from(m);
  }
  return { active, membersOfSet };
}

/** The order of the part boundaries of every parts count in `ps` (exact isomorphism class). */
function boundaryPattern(L: number, ps: number[]): string {
  const marks: [number, number, number][] = [];
  ps.forEach((P, k) => {
    const c = partSize(L, P);
    const n = nonEmptyParts(L, P);
    for (let i = 0; i <= n; i++) marks.push([Math.min(i * c, L), k, i]);
  });
  marks.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  let out = '';
  for (let i = 0; i < marks.length; i++) {
    const m = marks[i]!;
    if (i > 0) out += marks[i - 1]![0] === m[0] ? '=' : '<';
    out += `${m[1]}.${m[2]}`;
  }
  return out;
}

/**
 * `live(set, parts)`: how many leading parts are non-empty for at least one sequence of the set
 * (the largest n). A chunk row on a part >= live expands to nothing, so no rule applies to it.
 */
export function chunkLiveness(plan: Plan): (set: number, parts: number) => number {
  const cache = new Map<string, number>();
  return (set, parts) => {
    const key = `${set}:${parts}`;
    let m = cache.get(key);
    if (m === undefined) {
      const ss = plan.seqSets!;
      m = liveParts(plan.sequences, ss.seqs.subarray(ss.offsets[set]!, ss.offsets[set + 1]!), parts);
      cache.set(key, m);
    }
    return m;
  };
}

/** `base` followed by the rows of `extra` (base itself when there are none). */
function joined(base: Int32Array, extra: IntColumn): Int32Array {
  if (extra.length === 0) return base;
  const out = new Int32Array(base.length + extra.length);
  out.set(base);
  out.set(extra.toArray(), base.length);
  return out;
}

/** start + length, row by row. */
function ends(start: Int32Array, length: Int32Array): Int32Array {
  const out = new Int32Array(start.length);
  for (let i = 0; i < start.length; i++) out[i] = start[i]! + length[i]!;
  return out;
}

/** Builds the flat plan; the plan must be structurally sound. */
export function flattenPlan(plan: Plan, facts: RowFacts): FlatPlan {
  const { active, membersOfSet } = representatives(plan);
  const seqLen = plan.sequences;
  const layout = (base: Layout, chunks: ChunkLayout | undefined): FlatLayout => {
    const c = {
      rank: new IntColumn(),
      seq: new IntColumn(),
      start: new IntColumn(),
      end: new IntColumn(),
      origin: new IntColumn(),
    };
    if (chunks)
      for (let j = 0; j < chunks.rank.length; j++)
        for (const s of membersOfSet[chunks.set[j]!]!) {
          const r = partRange(seqLen[s]!, chunks.parts[j]!, chunks.part[j]!);
          if (!r) continue;
          c.rank.push(chunks.rank[j]!);
          c.seq.push(s);
          c.start.push(r[0]);
          c.end.push(r[1]);
          c.origin.push(-j - 1);
        }
    const n = base.rank.length;
    return {
      n: n + c.rank.length,
      rank: joined(base.rank, c.rank),
      seq: joined(base.seq, c.seq),
      start: joined(base.start, c.start),
      end: joined(ends(base.start, base.length), c.end),
      origin: joined(iota(n), c.origin),
    };
  };

  // Tasks and their ops in both phases.
  const t = plan.tasks;
  const tc = {
    rank: new IntColumn(),
    seq: new IntColumn(),
    qs: new IntColumn(),
    qe: new IntColumn(),
    ks: new IntColumn(),
    ke: new IntColumn(),
    origin: new IntColumn(),
  };
  const fwdOp = new IntColumn();
  const bwdOp = new IntColumn();
  const ct = plan.chunkTasks;
  if (ct)
    for (let j = 0; j < ct.rank.length; j++)
      for (const s of membersOfSet[ct.set[j]!]!) {
        const q = partRange(seqLen[s]!, ct.parts[j]!, ct.qPart[j]!);
        const k = partRange(seqLen[s]!, ct.parts[j]!, ct.kvPart[j]!);
        if (!q || !k) continue;
        tc.rank.push(ct.rank[j]!);
        tc.seq.push(s);
        tc.qs.push(q[0]);
        tc.qe.push(q[1]);
        tc.ks.push(k[0]);
        tc.ke.push(k[1]);
        tc.origin.push(-j - 1);
        fwdOp.push(facts.opOfChunkTask.forward[j]!);
        bwdOp.push(facts.opOfChunkTask.backward[j]!);
      }
  const nt = t.rank.length;
  const tasks: FlatTasks = {
    n: nt + tc.rank.length,
    rank: joined(t.rank, tc.rank),
    seq: joined(t.seq, tc.seq),
    qs: joined(t.qStart, tc.qs),
    qe: joined(ends(t.qStart, t.qLength), tc.qe),
    ks: joined(t.kvStart, tc.ks),
    ke: joined(ends(t.kvStart, t.kvLength), tc.ke),
    origin: joined(iota(nt), tc.origin),
  };
  const fwdOps = joined(facts.opOfTask.forward, fwdOp);
  const bwdOps = joined(facts.opOfTask.backward, bwdOp);

  const phase = (name: 'forward' | 'backward', ph: Phase, opOfTask: Int32Array): FlatPhase => {
    const c = {
      round: new IntColumn(),
      group: new IntColumn(),
      src: new IntColumn(),
      dst: new IntColumn(),
      kind: new IntColumn(),
      seq: new IntColumn(),
      start: new IntColumn(),
      end: new IntColumn(),
      origin: new IntColumn(),
      sendAfter: new IntColumn(),
    };
    const g = ph.groupOfRound;
    const tr = ph.transfers;
    const ctr = ph.chunkTransfers;
    if (ctr)
      for (let j = 0; j < ctr.round.length; j++)
        for (const s of membersOfSet[ctr.set[j]!]!) {
          const r = partRange(seqLen[s]!, ctr.parts[j]!, ctr.part[j]!);
          if (!r) continue;
          c.round.push(ctr.round[j]!);
          c.group.push(g[ctr.round[j]!]!);
          c.src.push(ctr.src[j]!);
          c.dst.push(ctr.dst[j]!);
          c.kind.push(ctr.kind[j]!);
          c.seq.push(s);
          c.start.push(r[0]);
          c.end.push(r[1]);
          c.origin.push(-j - 1);
          c.sendAfter.push(facts.chunkSendAfter[name][j]!);
        }
    const n = tr.round.length;
    const group = new Int32Array(n);
    for (let i = 0; i < n; i++) group[i] = g[tr.round[i]!]!;
    const kind = new Uint8Array(n + c.kind.length);
    kind.set(tr.kind);
    for (let i = 0; i < c.kind.length; i++) kind[n + i] = c.kind.get(i);
    const transfers: FlatTransfers = {
      n: n + c.round.length,
      round: joined(tr.round, c.round),
      group: joined(group, c.group),
      src: joined(tr.src, c.src),
      dst: joined(tr.dst, c.dst),
      kind,
      seq: joined(tr.seq, c.seq),
      start: joined(tr.start, c.start),
      end: joined(ends(tr.start, tr.length), c.end),
      origin: joined(iota(n), c.origin),
      sendAfter: joined(facts.sendAfter[name], c.sendAfter),
    };
    return {
      name,
      transfers,
      opOfTask,
      opRank: ph.compute.rank,
      opAfter: ph.compute.after,
      groups: groupCount(g),
    };
  };
  return {
    world: plan.world,
    causal: plan.mask === 'causal',
    seqLen,
    active,
    user: layout(plan.userLayout, plan.userChunks),
    home: layout(plan.homeLayout, plan.homeChunks),
    tasks,
    forward: phase('forward', plan.forward, fwdOps),
    backward: phase('backward', plan.backward, bwdOps),
  };
}

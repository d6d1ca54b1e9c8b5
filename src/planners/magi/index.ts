/**
 * `magi`: MagiAttention's default dispatch and static attention solver (SandAI-org/MagiAttention
 * v1.1.x; shared/research/peers.md section 1), as an `fcp-plan/1` plan.
 *
 * - Placement: {@link magiDispatch} (equal chunks, largest mask area first, equal count per rank).
 *   A rank's chunks that touch each other in a sequence form one segment (a home range).
 * - Owner computes: the rank of a query segment computes it against every key segment of its
 *   sequence it attends; keys on another rank are "remote" and fetched once per rank (GroupCast:
 *   each range goes only to the ranks that need it).
 * - Overlap (`dist_attn_solver.py`, `overlap_degree`, default 2 as in Magi's benchmark): the host
 *   (local) stage computes first; each rank's remote fetches are split into `overlapDegree` stages
 *   by area (largest first onto the stage with the least area), stage d's fetch is one all-to-all-v
 *   group and its compute runs after it, so stage d+1's fetch overlaps stage d's compute.
 * - Backward: the K/V fetches again, and stage d's dK/dV partials are reduced to their owners
 *   (GroupReduce) in the group that prefetches stage d+1, the last one alone (exposed tail).
 * - Rounds: an all-to-all-v is not congestion-free. Inside a group, round j holds each sender's j-th
 *   message, the sender visiting its destinations in NCCL's shifted order (dst - src mod N); rows of
 *   one (sender, receiver) message share a round. Receivers that several senders reach in the same
 *   round show as congestion > 1 in the report.
 * - The user layout equals the home layout (Magi's `dispatch` runs after the embedding: the rest of
 *   the model already lives in the dispatched layout), so no reshuffle.
 */

import { IntColumn } from '../../core/int-column.ts';
import { fail } from '../../core/issues.ts';
import { attendedPairs } from '../../model/attention.ts';
import { Kind, type KindCode, type Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { MinHeap } from '../shared/min-heap.ts';
import type { PhaseBuilder } from '../shared/plan-builder.ts';
import { PlanBuilder } from '../shared/plan-builder.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { magiDispatch } from './dispatch.ts';

/** Options of the magi planner, defaults filled in. */
export interface MagiOptions {
  /** Tokens per chunk; undefined: ceil(total / (8N)). */
  chunkSize: number | undefined;
  overlapDegree: number;
}

/** Defaults and validation of the magi options. */
export function resolveMagiOptions(o: PlannerOptions): MagiOptions {
  const { chunkSize, overlapDegree = 2 } = o;
  if (chunkSize !== undefined && (!Number.isInteger(chunkSize) || chunkSize < 1))
    fail(
      'option.chunkSize',
      `--chunk-size must be a positive integer of tokens (got ${chunkSize})`,
      'chunkSize',
    );
  if (!Number.isInteger(overlapDegree) || overlapDegree < 1 || overlapDegree > 64)
    fail(
      'option.overlapDegree',
      `--overlap-degree must be an integer in 1..64 (got ${overlapDegree})`,
      'overlapDegree',
    );
  return { chunkSize, overlapDegree };
}

/** Home segments: maximal runs of one sequence on one rank, in packed order. */
interface Segments {
  rank: Int32Array;
  seq: Int32Array;
  start: Int32Array;
  length: Int32Array;
  /** CSR: segments of sequence s are firstOfSeq[s]..firstOfSeq[s+1]-1, in token order. */
  firstOfSeq: Int32Array;
}

function segments(sequences: Int32Array, owner: Int32Array, chunkSize: number): Segments {
  const rank = new IntColumn();
  const seq = new IntColumn();
  const start = new IntColumn();
  const length = new IntColumn();
  const firstOfSeq = new Int32Array(sequences.length + 1);
  let packed = 0;
  for (let s = 0; s < sequences.length; s++) {
    firstOfSeq[s] = rank.length;
    const len = sequences[s]!;
    let off = 0;
    while (off < len) {
      const c = Math.floor((packed + off) / chunkSize);
      const take = Math.min(len - off, (c + 1) * chunkSize - (packed + off));
      const r = owner[c]!;
      const last = rank.length - 1;
      if (last >= firstOfSeq[s]! && rank.get(last) === r) length.set(last, length.get(last) + take);
      else {
        rank.push(r);
        seq.push(s);
        start.push(off);
        length.push(take);
      }
      off += take;
    }
    packed += len;
  }
  firstOfSeq[sequences.length] = rank.length;
  return {
    rank: rank.toArray(),
    seq: seq.toArray(),
    start: start.toArray(),
    length: length.toArray(),
    firstOfSeq,
  };
}

/** A remote K/V segment fetched by one rank. */
interface Fetch {
  src: number;
  dst: number;
  seg: number;
  area: number;
  tasks: number[];
  stage: number;
}

/**
 * Rounds of one all-to-all-v: message (src, dst) goes in round base + (its position in src's list of
 * destinations ordered by (dst - src) mod N). Returns the round of each message and the round count.
 */
function a2avRounds(
  srcs: number[],
  dsts: number[],
  world: number,
): { pos: Map<number, number>; rounds: number } {
  const bySrc = new Map<number, Set<number>>();
  for (let i = 0; i < srcs.length; i++) {
    const set = bySrc.get(srcs[i]!) ?? new Set<number>();
    set.add(dsts[i]!);
    bySrc.set(srcs[i]!, set);
  }
  const pos = new Map<number, number>();
  let rounds = 0;
  for (const [src, set] of bySrc) {
    const order = [...set].sort((a, b) => ((a - src + world) % world) - ((b - src + world) % world));
    order.forEach((dst, j) => {
      pos.set(src * world + dst, j);
    });
    rounds = Math.max(rounds, order.length);
  }
  return { pos, rounds };
}

/** Emits the messages of one collective into round base..base+rounds-1; returns rounds used. */
function emitCollective(
  ph: PhaseBuilder,
  fetches: Fetch[],
  seg: Segments,
  kind: KindCode,
  base: number,
  world: number,
  reverse: boolean,
): number {
  const srcs = fetches.map((f) => (reverse ? f.dst : f.src));
  const dsts = fetches.map((f) => (reverse ? f.src : f.dst));
  const { pos, rounds } = a2avRounds(srcs, dsts, world);
  fetches.forEach((f, i) => {
    const src = srcs[i]!;
    const round = base + pos.get(src * world + dsts[i]!)!;
    const id = ph.transfer(
      round,
      src,
      dsts[i]!,
      kind,
      seg.seq[f.seg]!,
      seg.start[f.seg]!,
      seg.length[f.seg]!,
    );
    // dK/dV partials leave after the stage's compute on the sender (op slot 1 + stage).
    if (reverse) ph.sendAfter(id, src, 1 + f.stage);
  });
  return rounds;
}

/** Plans MagiAttention's dispatch and all-to-all-v stages. */
export function planMagi(problem: Problem, options: PlannerOptions = {}): Plan {
  const o = resolveMagiOptions(options);
  const { sequences, world } = problem;
  const causal = problem.mask === 'causal';
  const d = magiDispatch(sequences, world, problem.mask, o.chunkSize);
  const seg = segments(sequences, d.owner, d.chunkSize);
  const b = new PlanBuilder(problem);
  for (let i = 0; i < seg.rank.length; i++)
    b.homeRange(seg.rank[i]!, seg.seq[i]!, seg.start[i]!, seg.length[i]!, true);

  // Tasks: every (query segment, key segment) pair of a sequence that the mask attends.
  const fetches: Fetch[] = [];
  const fetchOf = new Map<number, Fetch>();
  for (let s = 0; s < sequences.length; s++) {
    const lo = seg.firstOfSeq[s]!;
    const hi = seg.firstOfSeq[s + 1]!;
    for (let qi = lo; qi < hi; qi++) {
      const qr = seg.rank[qi]!;
      for (let ki = lo; ki < (causal ? qi + 1 : hi); ki++) {
        const pairs = attendedPairs(causal, seg.start[qi]!, seg.length[qi]!, seg.start[ki]!, seg.length[ki]!);
        const t = b.task(qr, s, seg.start[qi]!, seg.length[qi]!, seg.start[ki]!, seg.length[ki]!);
        const kr = seg.rank[ki]!;
        if (kr === qr) {
          b.forward.task(qr, 0, -1, t);
          b.backward.task(qr, 0, -1, t);
          continue;
        }
        const key = ki * world + qr;
        let f = fetchOf.get(key);
        if (!f) {
          f = { src: kr, dst: qr, seg: ki, area: 0, tasks: [], stage: 0 };
          fetchOf.set(key, f);
          fetches.push(f);
        }
        f.area += pairs;
        f.tasks.push(t);
      }
    }
  }

  // Stages: per receiving rank, its fetches by area (largest first) onto the least-loaded stage.
  const byDst: Fetch[][] = Array.from({ length: world }, () => []);
  for (const f of fetches) byDst[f.dst]!.push(f);
  const used = new Uint8Array(o.overlapDegree);
  for (const list of byDst) {
    const heap = new MinHeap(o.overlapDegree);
    const load = new Float64Array(o.overlapDegree);
    for (let st = 0; st < o.overlapDegree; st++) heap.push(0, st);
    const sorted = list.map((f, i) => ({ f, i })).sort((x, y) => y.f.area - x.f.area || x.i - y.i);
    for (const { f } of sorted) {
      const st = heap.pop();
      f.stage = st;
      used[st] = 1;
      load[st]! += f.area;
      heap.push(load[st]!, st);
    }
  }
  // Compact the stages that hold any fetch into groups 0..E-1.
  const groupOfStage = new Int32Array(o.overlapDegree).fill(-1);
  let stages = 0;
  for (let st = 0; st < o.overlapDegree; st++) if (used[st]) groupOfStage[st] = stages++;
  const stageFetches: Fetch[][] = Array.from({ length: stages }, () => []);
  for (const f of fetches) {
    f.stage = groupOfStage[f.stage]!;
    stageFetches[f.stage]!.push(f);
    for (const t of f.tasks) {
      b.forward.task(f.dst, 1 + f.stage, f.stage, t);
      b.backward.task(f.dst, 1 + f.stage, f.stage, t);
    }
  }

  // Forward: group j = all-to-all-v of stage j's K/V.
  const fwdGroups: number[] = [];
  for (let j = 0; j < stages; j++) {
    const r = emitCollective(b.forward, stageFetches[j]!, seg, Kind.kv, fwdGroups.length, world, false);
    for (let i = 0; i < r; i++) fwdGroups.push(j);
  }
  // Backward: group j = K/V of stage j (GroupCast) + dK/dV of stage j-1 (GroupReduce).
  const bwdGroups: number[] = [];
  for (let j = 0; j <= stages; j++) {
    if (j < stages) {
      const r = emitCollective(b.backward, stageFetches[j]!, seg, Kind.kv, bwdGroups.length, world, false);
      for (let i = 0; i < r; i++) bwdGroups.push(j);
    }
    if (j > 0) {
      const r = emitCollective(
        b.backward,
        stageFetches[j - 1]!,
        seg,
        Kind.dkv,
        bwdGroups.length,
        world,
        true,
      );
      for (let i = 0; i < r; i++) bwdGroups.push(j);
    }
  }
  return b.build('magi', Int32Array.from(fwdGroups), Int32Array.from(bwdGroups), {
    planner: 'magi',
    chunkSize: d.chunkSize,
    chunks: d.chunks,
    chunksPerRank: d.chunksPerRank,
    overlapDegree: o.overlapDegree,
    stages,
    paddingTokens: d.paddingTokens,
    segments: seg.rank.length,
    layout: 'Magi dispatch (user layout = home layout: dispatch runs after the embedding)',
  });
}

/** The `magi` planner. */
export const magiPlanner: Planner = {
  name: 'magi',
  description:
    'MagiAttention dispatch: equal chunks, largest area first, equal count per rank; all-to-all-v K/V stages',
  plan: planMagi,
};

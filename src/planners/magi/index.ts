/**
 * `magi`: MagiAttention's default dispatch and static attention solver (SandAI-org/MagiAttention
 * v1.1.x; docs/baselines.md), as an `fcp-plan/1` plan.
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
 * - Backward (`dist_attn.py`, `DistAttnFunc.backward`): the K/V fetches again; stage d's dK/dV
 *   partials are reduced to their owners (GroupReduce) while stage d+1 computes (in the group that
 *   prefetches stage d+2), the last reduce exposed unless `hideTailReduce` moves the host stage
 *   after it (`MAGI_ATTENTION_BWD_HIDE_TAIL_REDUCE`, `_hide_tail_stage_reduce_backward`).
 * - Backend: `a2av` (NCCL all-to-all-v, one copy per destination rank) or `native` (one copy per
 *   destination node, NVLink fan-out inside it; {@link stageMessages}).
 * - Rounds: an all-to-all-v is not congestion-free. Inside a group, round j holds each sender's j-th
 *   message, the sender visiting its destinations in NCCL's shifted order (dst - src mod N); rows of
 *   one (sender, receiver) message share a round. Receivers that several senders reach in the same
 *   round show as congestion > 1 in the report.
 * - The user layout equals the home layout (Magi's `dispatch` runs after the embedding: the rest of
 *   the model already lives in the dispatched layout), so no reshuffle.
 */

import { fail } from '../../core/issues.ts';
import { attendedPairs } from '../../model/attention.ts';
import type { Plan } from '../../plan/types.ts';
import type { Problem } from '../../problem/problem.ts';
import { MinHeap } from '../shared/min-heap.ts';
import { PlanBuilder } from '../shared/plan-builder.ts';
import type { Planner, PlannerOptions } from '../types.ts';
import { emitGroups, type Fetch, segments, stageMessages } from './collectives.ts';
import { magiDispatch } from './dispatch.ts';
import { MAGI_DEFAULTS } from './option-specs.ts';

/** Options of the magi planner, defaults filled in. */
export interface MagiOptions {
  /** Tokens per chunk; undefined: ceil(total / (8N)). */
  chunkSize: number | undefined;
  overlapDegree: number;
  hideTailReduce: boolean;
  backend: 'a2av' | 'native';
}

/** Defaults and validation of the magi options. */
export function resolveMagiOptions(o: PlannerOptions): MagiOptions {
  const {
    chunkSize,
    overlapDegree = MAGI_DEFAULTS.overlapDegree,
    hideTailReduce = false,
    magiBackend: backend = 'a2av',
  } = o;
  if (backend !== 'a2av' && backend !== 'native')
    fail('option.magiBackend', `magi backend must be a2av or native (got ${String(backend)})`, 'magiBackend');
  if (typeof hideTailReduce !== 'boolean')
    fail(
      'option.hideTailReduce',
      `hideTailReduce must be true or false (got ${String(hideTailReduce)})`,
      'hideTailReduce',
    );
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
  return { chunkSize, overlapDegree, hideTailReduce, backend };
}

/** Plans MagiAttention's dispatch and its overlapped group-collective stages. */
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
  const host: { rank: number; task: number }[] = [];
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
          host.push({ rank: qr, task: t });
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
  // Compact the stages that hold any fetch into 0..E-1.
  const groupOfStage = new Int32Array(o.overlapDegree).fill(-1);
  let stages = 0;
  for (let st = 0; st < o.overlapDegree; st++) if (used[st]) groupOfStage[st] = stages++;
  const stageFetches: Fetch[][] = Array.from({ length: stages }, () => []);
  for (const f of fetches) {
    f.stage = groupOfStage[f.stage]!;
    stageFetches[f.stage]!.push(f);
  }

  const native = o.backend === 'native';
  const gpn = problem.gpusPerNode;
  const fetchStage = (sg: number, r: number) => fetchOf.get(sg * world + r)?.stage ?? -1;
  // Op slots. Forward: host stage first (slot 0), remote stage j in slot 1+j. Backward: the same,
  // or with the hidden tail reduce the host stage last (slot E) after the remote stages (slot j).
  const fwdSlot = (j: number) => 1 + j;
  const bwdSlot = (j: number) => (o.hideTailReduce ? j : 1 + j);
  const bwdHostSlot = o.hideTailReduce ? stages : 0;

  // Forward: stage j's K/V GroupCast is one group (two with the native backend's NVLink fan-out);
  // stage j computes after it, while stage j+1's fetch runs (prefetch).
  const fwdGroups: number[] = [];
  const fwdAfter: number[] = [];
  for (let j = 0; j < stages; j++) {
    const [p1, p2] = stageMessages(stageFetches[j]!, 'kv', native, gpn, world, fwdSlot, fetchStage);
    fwdAfter.push(emitGroups(b.forward, [p1, p2], fwdGroups, seg, world, []));
  }
  // Backward (`dist_attn.py`, `DistAttnFunc.backward`): step j fetches stage j's K/V and reduces
  // the dK/dV of stage j-2, so the reduce of stage i overlaps the compute of stage i+1 (it is
  // issued after stage i's compute and waited for only before the end); steps E and E+1 carry the
  // last two reduces, the last one exposed unless the host stage runs after it (hideTailReduce).
  const bwdGroups: number[] = [];
  const bwdAfter: number[] = [];
  // sendAfter pairs, resolved once the ops exist (a relay that computed nothing needs none).
  const pending: { id: number; rank: number; slot: number }[] = [];
  for (let j = 0; j < stages + 2; j++) {
    const kv =
      j < stages ? stageMessages(stageFetches[j]!, 'kv', native, gpn, world, bwdSlot, fetchStage) : [[], []];
    const red =
      j >= 2 ? stageMessages(stageFetches[j - 2]!, 'dkv', native, gpn, world, bwdSlot, fetchStage) : [[], []];
    const last = emitGroups(
      b.backward,
      [
        [...kv[0], ...red[0]],
        [...kv[1], ...red[1]],
      ],
      bwdGroups,
      seg,
      world,
      pending,
    );
    if (j < stages) bwdAfter.push(last);
  }
  for (const h of host) {
    b.forward.task(h.rank, 0, -1, h.task);
    b.backward.task(h.rank, bwdHostSlot, -1, h.task);
  }
  for (const f of fetches)
    for (const t of f.tasks) {
      b.forward.task(f.dst, fwdSlot(f.stage), fwdAfter[f.stage]!, t);
      b.backward.task(f.dst, bwdSlot(f.stage), bwdAfter[f.stage]!, t);
    }
  for (const x of pending) if (b.backward.hasOp(x.rank, x.slot)) b.backward.sendAfter(x.id, x.rank, x.slot);
  return b.build('magi', Int32Array.from(fwdGroups), Int32Array.from(bwdGroups), {
    planner: 'magi',
    chunkSize: d.chunkSize,
    chunks: d.chunks,
    chunksPerRank: d.chunksPerRank,
    overlapDegree: o.overlapDegree,
    hideTailReduce: o.hideTailReduce,
    backend: o.backend,
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

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

/** One message of a collective: `seg` from src to dst; `afterSlot` >= 0: sendAfter (src, slot). */
interface Msg {
  src: number;
  dst: number;
  kind: KindCode;
  seg: number;
  afterSlot: number;
}

/**
 * Rounds of one all-to-all-v: message (src, dst) goes in round base + (its position in src's list of
 * destinations ordered by (dst - src) mod N). Returns the round of each message and the round count.
 */
function a2avRounds(msgs: readonly Msg[], world: number): { pos: Map<number, number>; rounds: number } {
  const bySrc = new Map<number, Set<number>>();
  for (const m of msgs) {
    const set = bySrc.get(m.src) ?? new Set<number>();
    set.add(m.dst);
    bySrc.set(m.src, set);
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

/**
 * The messages of one stage's collective, in two sub-phases (the second runs in the next group).
 * `a2av`: every fetch is one message (phase 1). `native` (MagiAttention's native group collective,
 * `docs/source/blog/native_grpcoll.md` lines 90-104, after DeepEP): a K/V segment needed by several
 * ranks of one other node crosses the network once, to the rank of that node with the sender's
 * local rank id (phase 1), which forwards it over NVLink (phase 2); the dK/dV reduce runs the
 * other way: the partials of one node are summed over NVLink on its rank with the owner's local
 * rank id (phase 1), which sends the sum across once (phase 2). Forwarding from a rank that received
 * the data in an earlier group, and a `dkv` to a rank that is not the key range's home (it adds it
 * to its own partial and moves the sum on), are both allowed by the plan format
 * (docs/plan-format.md, execution semantics of `kv` and `dkv`).
 */
function stageMessages(
  fetches: readonly Fetch[],
  kind: 'kv' | 'dkv',
  native: boolean,
  gpusPerNode: number,
  world: number,
  slotOf: (stage: number) => number,
  fetchStage: (seg: number, rank: number) => number,
): [Msg[], Msg[]] {
  const nodeOf = (r: number) => Math.floor(r / Math.max(1, gpusPerNode));
  const p1: Msg[] = [];
  const p2: Msg[] = [];
  const k = kind === 'kv' ? Kind.kv : Kind.dkv;
  // dK/dV partials leave after the stage's compute on the sender.
  const send = (f: Fetch, src: number, dst: number, into: Msg[]) =>
    into.push({ src, dst, kind: k, seg: f.seg, afterSlot: kind === 'dkv' ? slotOf(f.stage) : -1 });
  if (!native) {
    for (const f of fetches) send(f, kind === 'kv' ? f.src : f.dst, kind === 'kv' ? f.dst : f.src, p1);
    return [p1, p2];
  }
  const gpn = Math.max(1, gpusPerNode);
  const local = (r: number) => r % gpn;
  // Group the inter-node messages of one segment by the node on the far side.
  const byNode = new Map<string, Fetch[]>();
  for (const f of fetches) {
    if (nodeOf(f.src) === nodeOf(f.dst)) {
      send(f, kind === 'kv' ? f.src : f.dst, kind === 'kv' ? f.dst : f.src, p1);
      continue;
    }
    const key = `${f.seg}:${nodeOf(f.dst)}`;
    const list = byNode.get(key);
    if (list) list.push(f);
    else byNode.set(key, [f]);
  }
  for (const list of byNode.values()) {
    const f0 = list[0]!;
    if (list.length === 1) {
      // One peer in that node: sent directly (DeepEP would still route through the peer with
      // the sender's local rank id, one NVLink hop more; this favours the baseline slightly).
      send(f0, kind === 'kv' ? f0.src : f0.dst, kind === 'kv' ? f0.dst : f0.src, p1);
      continue;
    }
    // The RDMA peer is the rank of the far node with the same local rank id as the near end
    // (native_grpcoll.md, "RDMA Transfer De-duplication").
    const lowest = list.reduce((x, y) => (y.dst < x.dst ? y : x)).dst;
    const peer = nodeOf(f0.dst) * gpn + local(f0.src);
    // A last node with fewer ranks may lack that peer: the lowest receiver relays then.
    const relay = peer < world ? peer : lowest;
    if (kind === 'kv') {
      p1.push({ src: f0.src, dst: relay, kind: k, seg: f0.seg, afterSlot: -1 });
      for (const f of list)
        if (f.dst !== relay) p2.push({ src: relay, dst: f.dst, kind: k, seg: f.seg, afterSlot: -1 });
    } else {
      // A relay that adds its own partial of this range in another stage would race with its
      // push (the plan format's rule 4): then one of the stage's own receivers relays instead.
      const st = fetchStage(f0.seg, relay);
      const r = st < 0 || st === f0.stage ? relay : lowest;
      for (const f of list) if (f.dst !== r) send(f, f.dst, r, p1);
      const own = list.find((f) => f.dst === r);
      p2.push({ src: r, dst: f0.src, kind: k, seg: f0.seg, afterSlot: own ? slotOf(own.stage) : -1 });
    }
  }
  return [p1, p2];
}

/**
 * Emits the given sub-groups in order, skipping empty ones; each becomes one comm group whose
 * rounds follow {@link a2avRounds}. Returns the index of the last group emitted (-1: none yet).
 */
function emitGroups(
  ph: PhaseBuilder,
  groups: Msg[][],
  groupOfRound: number[],
  seg: Segments,
  world: number,
  pending: { id: number; rank: number; slot: number }[],
): number {
  for (const msgs of groups) {
    if (msgs.length === 0) continue;
    const g = groupOfRound.length ? groupOfRound[groupOfRound.length - 1]! + 1 : 0;
    const base = groupOfRound.length;
    const { pos, rounds } = a2avRounds(msgs, world);
    for (const m of msgs) {
      const round = base + pos.get(m.src * world + m.dst)!;
      const id = ph.transfer(
        round,
        m.src,
        m.dst,
        m.kind,
        seg.seq[m.seg]!,
        seg.start[m.seg]!,
        seg.length[m.seg]!,
      );
      if (m.afterSlot >= 0) pending.push({ id, rank: m.src, slot: m.afterSlot });
    }
    for (let i = 0; i < rounds; i++) groupOfRound.push(g);
  }
  return groupOfRound.length ? groupOfRound[groupOfRound.length - 1]! : -1;
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

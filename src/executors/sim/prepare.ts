/**
 * Turns one phase of a plan into the simulator's dense tables: compute ops with their modelled
 * durations, flows (transfers merged per group, sender, receiver, kind and sendAfter op: one NCCL
 * message each, one latency each) with their bytes and network resources, and per rank the list of
 * groups it takes part in. Chunk rows are costed through {@link ChunkCoster} without expansion.
 */

import { fail } from '../../core/issues.ts';
import type { ChunkCoster } from '../../cost/chunks.ts';
import type { Direction } from '../../cost/kernel.ts';
import type { Network } from '../../cost/network.ts';
import type { OpCost } from '../../cost/op-cost.ts';
import { kvBytesPerToken, qBytesPerToken } from '../../model/attention.ts';
import { Kind, type ModelShape, type Phase, type Plan } from '../../plan/types.ts';

/** A phase ready to simulate. All times in ms, sizes in bytes. */
export interface PreparedPhase {
  readonly dir: Direction;
  readonly world: number;
  // Compute ops.
  readonly opCount: number;
  readonly opRank: Int32Array;
  readonly opDur: Float64Array;
  /** Global entry index the op waits for (-1: none). */
  readonly opWait: Int32Array;
  /** Ops of each rank in table order (CSR over ranks). */
  readonly rankOpOff: Int32Array;
  readonly rankOps: Int32Array;
  /** Flows that wait for each op (CSR over ops). */
  readonly opFlowOff: Int32Array;
  readonly opFlows: Int32Array;
  // Flows.
  readonly flowCount: number;
  readonly flowSrc: Int32Array;
  readonly flowDst: Int32Array;
  readonly flowGroup: Int32Array;
  readonly flowKind: Uint8Array;
  readonly flowBytes: Float64Array;
  readonly flowLatency: Float64Array;
  /** Number of sendAfter ops each flow waits for. */
  readonly flowDeps: Int32Array;
  /** Transfer rows merged into each flow. */
  readonly flowMessages: Int32Array;
  readonly flowResOff: Int32Array;
  readonly flowRes: Int32Array;
  /**
   * Comm streams per rank: 2 where the phase runs its pushes on a stream of their own
   * (`Phase.pushStream`: `out` and `dkv` transfers on stream 1), else 1.
   */
  readonly streams: 1 | 2;
  /** Stream of each flow (0, or 1 for a push under `pushStream`). */
  readonly flowStream: Uint8Array;
  /**
   * Group entries per (rank, stream) slot `streams * rank + stream` (CSR; a rank's slots are
   * consecutive, so its entries are rankEntryOff[streams * r] .. rankEntryOff[streams * (r + 1)]),
   * each slot's in group order: a stream runs its entries one after another.
   */
  readonly rankEntryOff: Int32Array;
  readonly entryGroup: Int32Array;
  readonly entryFlowOff: Int32Array;
  readonly entryFlows: Int32Array;
  /** Transfer rows (explicit + chunk) of the phase. */
  readonly messages: number;
}

/** Bytes per token of a transfer kind (docs/plan-format.md: Q,O = qHeads*headDim*b; K+V = 2*kvHeads*headDim*b). */
export function bytesPerToken(m: ModelShape, kind: number, forward: boolean): number {
  const q = qBytesPerToken(m);
  const kv = kvBytesPerToken(m);
  if (kind === Kind.in) return forward ? q + kv : q; // Q,K,V forward; dO backward
  if (kind === Kind.kv || kind === Kind.dkv) return kv;
  if (kind === Kind.out) return forward ? q : q + kv; // O forward; dQ,dK,dV backward
  return fail('sim.plan.kind', `unknown transfer kind code ${kind}`);
}

/** Per phase, the kind codes whose transfers carry no bytes (what-if, `--free-kinds`). */
export interface FreeKinds {
  readonly forward: readonly number[];
  readonly backward: readonly number[];
}

/** Context shared by both phases of one plan. */
export interface PrepareContext {
  plan: Plan;
  network: Network;
  op: OpCost;
  chunks: ChunkCoster;
  /** What-if: kinds whose transfers carry no bytes (latency kept); absent: none. */
  freeKinds?: FreeKinds | undefined;
}

/** Prepares one phase. */
export function preparePhase(ctx: PrepareContext, phase: Phase, dir: Direction): PreparedPhase {
  const { plan, network } = ctx;
  const world = plan.world;
  const where = dir;
  const c = phase.compute;
  const opCount = c.rank.length;
  const opRank = c.rank;
  for (let i = 0; i < opCount; i++)
    if (opRank[i]! < 0 || opRank[i]! >= world)
      fail(
        'sim.plan.rank',
        `compute op ${i} runs on rank ${opRank[i]} outside 0..${world - 1}`,
        `${where}.compute`,
        i,
      );
  const opDur = opDurations(ctx, phase, dir);

  // Transfers (explicit then chunk) -> messages with group, ends, kind, bytes, dependency.
  const t = phase.transfers;
  const ct = phase.chunkTransfers;
  const nT = t.round.length;
  const nC = ct ? ct.round.length : 0;
  const n = nT + nC;
  const gor = phase.groupOfRound;
  const mGroup = new Int32Array(n);
  const mSrc = new Int32Array(n);
  const mDst = new Int32Array(n);
  const mKind = new Uint8Array(n);
  const mBytes = new Float64Array(n);
  const mDep = new Int32Array(n).fill(-1);
  const fwd = dir === 'forward';
  const free = ctx.freeKinds?.[dir] ?? [];
  for (let i = 0; i < n; i++) {
    const chunk = i >= nT;
    const j = chunk ? i - nT : i;
    const round = chunk ? ct!.round[j]! : t.round[j]!;
    if (round < 0 || round >= gor.length)
      fail(
        'sim.plan.round',
        `transfer ${j} uses round ${round} but groupOfRound has ${gor.length} rounds`,
        `${where}.${chunk ? 'chunkTransfers' : 'transfers'}`,
        j,
      );
    mGroup[i] = gor[round]!;
    const src = chunk ? ct!.src[j]! : t.src[j]!;
    const dst = chunk ? ct!.dst[j]! : t.dst[j]!;
    if (src < 0 || src >= world || dst < 0 || dst >= world)
      fail(
        'sim.plan.rank',
        `transfer ${j} goes ${src} -> ${dst}, outside 0..${world - 1}`,
        `${where}.${chunk ? 'chunkTransfers' : 'transfers'}`,
        j,
      );
    mSrc[i] = src;
    mDst[i] = dst;
    const kind = chunk ? ct!.kind[j]! : t.kind[j]!;
    mKind[i] = kind;
    const tokens = chunk ? ctx.chunks.partTokens(ct!.set[j]!, ct!.parts[j]!, ct!.part[j]!) : t.length[j]!;
    mBytes[i] = free.includes(kind) ? 0 : tokens * bytesPerToken(plan.model, kind, fwd);
  }
  // sendAfter: a message with one dependency keeps it; several make it unmergeable (-2) and are listed.
  const extraDeps: [number, number][] = [];
  const addDep = (msg: number, op: number, path: string, row: number): void => {
    if (msg < 0 || msg >= n || op < 0 || op >= opCount)
      fail('sim.plan.sendAfter', `sendAfter row ${row} refers to a missing transfer or op`, path, row);
    if (mDep[msg] === -1) mDep[msg] = op;
    else if (mDep[msg] !== op) {
      if (mDep[msg]! >= 0) extraDeps.push([msg, mDep[msg]!]);
      mDep[msg] = -2;
      extraDeps.push([msg, op]);
    }
  };
  const sa = phase.sendAfter;
  for (let k = 0; k < sa.transfer.length; k++)
    addDep(sa.transfer[k]!, sa.compute[k]!, `${where}.sendAfter`, k);
  if (sa.chunkTransfer && sa.chunkCompute)
    for (let k = 0; k < sa.chunkTransfer.length; k++)
      addDep(nT + sa.chunkTransfer[k]!, sa.chunkCompute[k]!, `${where}.sendAfter`, k);

  // Merge messages into flows: sort by (group, src, dst, kind, dep); self-messages vanish.
  const order: number[] = [];
  for (let i = 0; i < n; i++) if (mSrc[i] !== mDst[i]) order.push(i);
  order.sort(
    (a, b) =>
      mGroup[a]! - mGroup[b]! ||
      mSrc[a]! - mSrc[b]! ||
      mDst[a]! - mDst[b]! ||
      mKind[a]! - mKind[b]! ||
      mDep[a]! - mDep[b]! ||
      a - b,
  );
  const flowOf = new Int32Array(n).fill(-1);
  let flows = 0;
  for (let k = 0; k < order.length; k++) {
    const i = order[k]!;
    const p = k > 0 ? order[k - 1]! : -1;
    const same =
      p >= 0 &&
      mDep[i] !== -2 &&
      mGroup[p] === mGroup[i] &&
      mSrc[p] === mSrc[i] &&
      mDst[p] === mDst[i] &&
      mKind[p] === mKind[i] &&
      mDep[p] === mDep[i];
    flowOf[i] = same ? flows - 1 : flows++;
  }
  const flowSrc = new Int32Array(flows);
  const flowDst = new Int32Array(flows);
  const flowGroup = new Int32Array(flows);
  const flowKind = new Uint8Array(flows);
  const flowBytes = new Float64Array(flows);
  const flowMessages = new Int32Array(flows);
  const flowDep = new Int32Array(flows).fill(-1);
  for (const i of order) {
    const f = flowOf[i]!;
    flowSrc[f] = mSrc[i]!;
    flowDst[f] = mDst[i]!;
    flowGroup[f] = mGroup[i]!;
    flowKind[f] = mKind[i]!;
    flowBytes[f]! += mBytes[i]!;
    flowMessages[f]!++;
    flowDep[f] = mDep[i]!;
  }
  // Dependencies op -> flows (CSR).
  const pairs: number[] = [];
  for (let f = 0; f < flows; f++) if (flowDep[f]! >= 0) pairs.push(flowDep[f]!, f);
  for (const [msg, op] of extraDeps) if (flowOf[msg]! >= 0) pairs.push(op, flowOf[msg]!);
  const flowDeps = new Int32Array(flows);
  const opFlowOff = new Int32Array(opCount + 1);
  for (let k = 0; k < pairs.length; k += 2) opFlowOff[pairs[k]! + 1]!++;
  for (let i = 0; i < opCount; i++) opFlowOff[i + 1]! += opFlowOff[i]!;
  const opFlows = new Int32Array(pairs.length / 2);
  const fill = opFlowOff.slice(0, opCount);
  for (let k = 0; k < pairs.length; k += 2) {
    opFlows[fill[pairs[k]!]!++] = pairs[k + 1]!;
    flowDeps[pairs[k + 1]!]!++;
  }

  // Resources and latency per flow.
  const flowResOff = new Int32Array(flows + 1);
  const res: number[] = [];
  const flowLatency = new Float64Array(flows);
  for (let f = 0; f < flows; f++) {
    flowLatency[f] = network.route(flowSrc[f]!, flowDst[f]!, res);
    flowResOff[f + 1] = res.length;
  }
  if (network.hasContention()) addMessageCosts(network, flowGroup, flowResOff, res, flowLatency);

  // Entries: (rank, stream, group) triples sorted by rank, stream, then group, each with its flows.
  const streams: 1 | 2 = phase.pushStream === true ? 2 : 1;
  const flowStream = new Uint8Array(flows);
  if (streams === 2)
    for (let f = 0; f < flows; f++)
      flowStream[f] = flowKind[f] === Kind.out || flowKind[f] === Kind.dkv ? 1 : 0;
  const ends = new Int32Array(2 * flows); // (rank, stream) slot of each flow endpoint
  for (let f = 0; f < flows; f++) {
    ends[2 * f] = streams * flowSrc[f]! + flowStream[f]!;
    ends[2 * f + 1] = streams * flowDst[f]! + flowStream[f]!;
  }
  const slots = streams * world;
  const byRank = countingSort(ends, slots); // endpoint slots sorted by slot, then flow id (groups ascending)
  const rankEntryOff = new Int32Array(slots + 1);
  const entryGroupL: number[] = [];
  const entryStart: number[] = [];
  const entryFlows = new Int32Array(2 * flows);
  let pos = 0;
  for (let r = 0, k = 0; r < slots; r++) {
    rankEntryOff[r] = entryGroupL.length;
    let lastG = -1;
    while (k < byRank.length && ends[byRank[k]!] === r) {
      const f = byRank[k]! >> 1;
      const g = flowGroup[f]!;
      if (g !== lastG) {
        entryGroupL.push(g);
        entryStart.push(pos);
        lastG = g;
      }
      entryFlows[pos++] = f;
      k++;
    }
  }
  rankEntryOff[slots] = entryGroupL.length;
  entryStart.push(pos);
  const entryGroup = Int32Array.from(entryGroupL);
  const entryFlowOff = Int32Array.from(entryStart);

  // Ops per rank (table order) and the entry each waits for.
  const rankOps = countingSort(opRank, world);
  const rankOpOff = new Int32Array(world + 1);
  for (let i = 0; i < opCount; i++) rankOpOff[opRank[i]! + 1]!++;
  for (let r = 0; r < world; r++) rankOpOff[r + 1]! += rankOpOff[r]!;
  const opWait = new Int32Array(opCount).fill(-1);
  for (let i = 0; i < opCount; i++) {
    const after = c.after[i]!;
    if (after < 0) continue;
    const r = opRank[i]!;
    // Last entry of r's first stream with group <= after (ops never wait for pushes).
    const first = rankEntryOff[streams * r]!;
    let lo = first;
    let hi = rankEntryOff[streams * r + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (entryGroup[mid]! <= after) lo = mid + 1;
      else hi = mid;
    }
    opWait[i] = lo - 1 >= first ? lo - 1 : -1;
  }
  return {
    dir,
    world,
    opCount,
    opRank,
    opDur,
    opWait,
    rankOpOff,
    rankOps,
    opFlowOff,
    opFlows,
    flowCount: flows,
    flowSrc,
    flowDst,
    flowGroup,
    flowKind,
    flowBytes,
    flowLatency,
    flowDeps,
    flowMessages,
    flowResOff,
    flowRes: Int32Array.from(res),
    streams,
    flowStream,
    rankEntryOff,
    entryGroup,
    entryFlowOff,
    entryFlows,
    messages: n,
  };
}

/**
 * Contention model's per-message cost: a flow waits contentionMsgUs for each further message of its
 * group on its busiest contended port (flows are numbered group by group, so each group is a run).
 */
export function addMessageCosts(
  network: Network,
  flowGroup: Int32Array,
  flowResOff: Int32Array,
  res: readonly number[],
  flowLatency: Float64Array,
): void {
  const msgMs = network.cluster.contentionMsgUs / 1000;
  const mask = network.contended;
  const count = new Int32Array(network.resourceCount);
  const F = flowGroup.length;
  for (let a = 0; a < F; ) {
    let b = a;
    while (b < F && flowGroup[b] === flowGroup[a]) b++;
    for (let f = a; f < b; f++)
      for (let k = flowResOff[f]!; k < flowResOff[f + 1]!; k++) if (mask[res[k]!]) count[res[k]!]!++;
    for (let f = a; f < b; f++) {
      let most = 1;
      for (let k = flowResOff[f]!; k < flowResOff[f + 1]!; k++)
        if (mask[res[k]!]) most = Math.max(most, count[res[k]!]!);
      flowLatency[f]! += msgMs * (most - 1);
    }
    for (let f = a; f < b; f++) for (let k = flowResOff[f]!; k < flowResOff[f + 1]!; k++) count[res[k]!] = 0;
    a = b;
  }
}

/** Indices 0..n-1 stably sorted by key (keys in 0..buckets-1). */
function countingSort(keys: Int32Array, buckets: number): Int32Array {
  const off = new Int32Array(buckets + 1);
  for (let i = 0; i < keys.length; i++) off[keys[i]! + 1]!++;
  for (let b = 0; b < buckets; b++) off[b + 1]! += off[b]!;
  const out = new Int32Array(keys.length);
  for (let i = 0; i < keys.length; i++) out[off[keys[i]!]!++] = i;
  return out;
}

/** Modelled duration of every compute op of the phase. */
function opDurations(ctx: PrepareContext, phase: Phase, dir: Direction): Float64Array {
  const { plan, op, chunks } = ctx;
  const c = phase.compute;
  const tasks = plan.tasks;
  const ct = plan.chunkTasks;
  const nTasks = tasks.rank.length;
  const nChunk = ct ? ct.rank.length : 0;
  const dur = new Float64Array(c.rank.length);
  for (let i = 0; i < c.rank.length; i++) {
    op.reset(dir);
    for (let k = c.taskOffsets[i]!; k < c.taskOffsets[i + 1]!; k++) {
      const id = c.taskIds[k]!;
      if (id < 0 || id >= nTasks)
        fail('sim.plan.task', `compute op ${i} lists task ${id}, not a row of tasks`, `${dir}.compute`, i);
      op.addTask(tasks.qStart[id]!, tasks.qLength[id]!, tasks.kvStart[id]!, tasks.kvLength[id]!);
    }
    if (ct && c.chunkTaskOffsets && c.chunkTaskIds)
      for (let k = c.chunkTaskOffsets[i]!; k < c.chunkTaskOffsets[i + 1]!; k++) {
        const id = c.chunkTaskIds[k]!;
        if (id < 0 || id >= nChunk)
          fail(
            'sim.plan.task',
            `compute op ${i} lists chunk task ${id}, not a row of chunkTasks`,
            `${dir}.compute`,
            i,
          );
        chunks.addTask(op, dir, ct.set[id]!, ct.parts[id]!, ct.qPart[id]!, ct.kvPart[id]!);
      }
    dur[i] = op.finish();
  }
  return dur;
}

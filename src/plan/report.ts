/**
 * Rule 6 of docs/plan-format.md: what a plan costs, reported but never rejected. Computed from the rows as
 * they are (chunk rows summed over their set in O(1) each with per-set part statistics), so it is
 * cheap even for plans whose expansion would be huge.
 *
 * Definitions:
 * - A message is a distinct (round, src, dst) triple: several rows between the same two ranks in
 *   one round travel together, and a chunk row is one message for all the sequences of its set.
 * - Congestion: the most messages one rank sends, or receives, in one round over one link class:
 *   messages between node mates (NVLink) and across nodes (the NIC) are counted apart, for the
 *   node size reported for (congestion-free: 1; a rank may then send or receive one message over
 *   each class in a round, as FCP's two-hop `kv` relays do).
 * - NIC congestion: the most messages across nodes that leave by one NIC, or arrive at one, in one
 *   round, under the routing reported for (report-nic.ts: under PXN a message leaves by the
 *   sender-node GPU on the receiver's rail, so rounds that are matchings over ranks may share one).
 * - NVLink port congestion: the most messages into one GPU's NVLink port in one round: from node
 *   mates, and under PXN those it forwards across nodes for a node mate.
 * - kvDelta: Δ of the phase's `kv` graph, the most `kv` messages one rank sends or receives; a
 *   congestion-free decomposition needs exactly that many `kv` rounds (König).
 * - kvDirectDelta: Δ of the direct fetch graph, each `kv` row sent by its `kvOrigin` entry (the
 *   same as kvDelta without the field). A plan whose senders hand transfers over within their
 *   rounds (FCP's same-slot forwarding) keeps the rounds of the direct graph: kvDelta <= kvRounds =
 *   kvDirectDelta.
 * - Bytes per token: Q, O, dQ, dO qHeads·headDim·b; K+V and dK+dV 2·kvHeads·headDim·b. Forward
 *   `in` carries Q+K+V, `kv` K+V, `out` O; backward `in` dO, `kv` K+V, `dkv` dK+dV, `out` dQ+dK+dV.
 *   Only real tokens count (padding of chunked sequences moves no data here).
 * - Compute imbalance: per-rank attended pairs (FLOPs are proportional), max/mean - 1.
 * - Communication imbalance: per-rank bytes sent plus received, max/mean - 1.
 * - Peak resident tokens of a rank: its home tokens plus the most K/V tokens it holds at once from
 *   `kv` receptions (held from the arrival group to the last group that uses them, see
 *   report-resident.ts), the larger of the two phases; the maximum over ranks.
 */

import { imbalance } from '../core/stats.ts';
import {
  attendedPairs,
  backwardFlops,
  forwardFlops,
  kvBytesPerToken,
  qBytesPerToken,
  sequencePairs,
} from '../model/attention.ts';
import { chunkTaskPairs, type PartStats, partStart, partStats } from './parts.ts';
import { messageStats } from './report-messages.ts';
import { defaultNicRoute, linkCongestion, type NicRoute } from './report-nic.ts';
import { residentKvPeak } from './report-resident.ts';
import { Kind, type Phase, type Plan } from './types.ts';
import { groupCount } from './validate-structure.ts';

/** Bytes moved by each transfer kind. */
export interface KindBytes {
  in: number;
  kv: number;
  out: number;
  dkv: number;
}

/** Rule-6 metrics of one phase. */
export interface PhaseReport {
  rounds: number;
  groups: number;
  /** Transfer rows plus chunk transfer rows. */
  transferRows: number;
  /** Distinct (round, src, dst) messages. */
  messages: number;
  congestion: number;
  /** Most messages across nodes on one NIC in one round (report-nic.ts). */
  nicCongestion: number;
  /** Most messages into one GPU's NVLink port in one round, PXN forwarding included (report-nic.ts). */
  nvlinkCongestion: number;
  kvDelta: number;
  /** Δ of the direct `kv` graph (`Phase.kvOrigin`'s senders; kvDelta without it). */
  kvDirectDelta: number;
  /** Rounds that carry at least one `kv` transfer. */
  kvRounds: number;
  bytes: KindBytes;
  totalBytes: number;
  commImbalance: number;
  computeOps: number;
  /** Useful FLOPs of the phase (attended pairs only). */
  flops: number;
}

/** Rule-6 metrics of a plan. */
export interface PlanReport {
  strategy: string;
  world: number;
  mask: string;
  sequences: number;
  tokens: number;
  /** Attended pairs summed over the tasks (equals `expectedPairs` in a valid plan). */
  attendedPairs: number;
  /** Attended pairs of the batch under the mask. */
  expectedPairs: number;
  /** Tasks after expanding chunk rows (non-empty parts only). */
  tasks: number;
  taskRows: number;
  chunkTaskRows: number;
  computeImbalance: number;
  forward: PhaseReport;
  backward: PhaseReport;
  rounds: number;
  groups: number;
  congestion: number;
  /** Most messages across nodes on one NIC in one round, either phase, under {@link PlanReport.nicRoute}. */
  nicCongestion: number;
  /** Most messages into one GPU's NVLink port in one round, either phase. */
  nvlinkCongestion: number;
  /** The node size and routing the NIC congestion was counted for. */
  nicRoute: NicRoute;
  totalBytes: number;
  commImbalance: number;
  peakResidentTokens: number;
  maxHomeTokens: number;
}

/** Part statistics per (set, parts), computed on demand. */
class SetStats {
  private readonly cache = new Map<number, PartStats>();
  private lastKey = -1;
  private last: PartStats | undefined;
  constructor(private readonly plan: Plan) {}
  get(set: number, parts: number): PartStats {
    const key = set * 2 ** 21 + parts; // parts <= 2 * world <= 2^18
    if (key === this.lastKey) return this.last!;
    let st = this.cache.get(key);
    if (!st) {
      const ss = this.plan.seqSets!;
      st = partStats(this.plan.sequences, ss.seqs.subarray(ss.offsets[set]!, ss.offsets[set + 1]!), parts);
      this.cache.set(key, st);
    }
    this.lastKey = key;
    this.last = st;
    return st;
  }
  /** Number of sequences of `set` whose part `part` is non-empty. */
  nonEmpty(set: number, parts: number, part: number): number {
    const ss = this.plan.seqSets!;
    let n = 0;
    for (let i = ss.offsets[set]!; i < ss.offsets[set + 1]!; i++) {
      const L = this.plan.sequences[ss.seqs[i]!]!;
      if (partStart(L, parts, part) < L) n++;
    }
    return n;
  }
}

/**
 * Computes the rule-6 report of a structurally sound plan; NIC congestion under `route` (default:
 * 8 GPUs per node and the plan's recorded routing, {@link defaultNicRoute}). `onProgress`: the
 * fraction done after each part (validate.ts passes it on).
 */
export function planReport(
  plan: Plan,
  route: NicRoute = defaultNicRoute(plan.meta),
  onProgress?: (fraction: number) => void,
): PlanReport {
  const W = plan.world;
  const stats = new SetStats(plan);
  const causal = plan.mask === 'causal';
  let tokens = 0;
  let expectedPairs = 0;
  for (const L of plan.sequences) {
    tokens += L;
    expectedPairs += sequencePairs(causal, L);
  }
  const pairsPerRank = new Float64Array(W);
  const t = plan.tasks;
  for (let i = 0; i < t.rank.length; i++)
    pairsPerRank[t.rank[i]!]! += attendedPairs(
      causal,
      t.qStart[i]!,
      t.qLength[i]!,
      t.kvStart[i]!,
      t.kvLength[i]!,
    );
  let tasks = t.rank.length;
  const ct = plan.chunkTasks;
  const nonEmptyCache = new Map<number, number>();
  if (ct)
    for (let i = 0; i < ct.rank.length; i++) {
      const st = stats.get(ct.set[i]!, ct.parts[i]!);
      pairsPerRank[ct.rank[i]!]! += chunkTaskPairs(st, plan.mask, ct.qPart[i]!, ct.kvPart[i]!);
      const m = Math.max(ct.qPart[i]!, ct.kvPart[i]!);
      const key = (ct.set[i]! * 2 ** 21 + ct.parts[i]!) * 2 ** 21 + m;
      let n = nonEmptyCache.get(key);
      if (n === undefined) {
        n = stats.nonEmpty(ct.set[i]!, ct.parts[i]!, m);
        nonEmptyCache.set(key, n);
      }
      tasks += n;
    }
  let pairs = 0;
  for (const p of pairsPerRank) pairs += p;

  const homeTokens = new Float64Array(W);
  const h = plan.homeLayout;
  for (let i = 0; i < h.rank.length; i++) homeTokens[h.rank[i]!]! += h.length[i]!;
  const hc = plan.homeChunks;
  if (hc)
    for (let i = 0; i < hc.rank.length; i++)
      homeTokens[hc.rank[i]!]! += stats.get(hc.set[i]!, hc.parts[i]!).tokens[hc.part[i]!]!;

  // Progress after each part, as fractions of the time (plans of 4096 ranks, FCP's / magi's: the
  // forward's messages 0.17 / 0.24, the backward's 0.53 / 0.64, the forward's resident K/V 0.73 /
  // 0.78, the backward's the rest).
  const fwd = phaseReport(plan, plan.forward, 'forward', stats, forwardFlops(plan.model, pairs), route);
  onProgress?.(0.2);
  const bwd = phaseReport(plan, plan.backward, 'backward', stats, backwardFlops(plan.model, pairs), route);
  onProgress?.(0.58);
  const commBoth = new Float64Array(W);
  let peak = 0;
  let maxHome = 0;
  const chunkTokens = (set: number, parts: number, part: number): number =>
    stats.get(set, parts).tokens[part]!;
  const fwdHeld = residentKvPeak(plan, plan.forward, chunkTokens);
  onProgress?.(0.75);
  const bwdHeld = residentKvPeak(plan, plan.backward, chunkTokens);
  for (let r = 0; r < W; r++) {
    commBoth[r] = fwd.perRankBytes[r]! + bwd.perRankBytes[r]!;
    peak = Math.max(peak, homeTokens[r]! + Math.max(fwdHeld[r]!, bwdHeld[r]!));
    maxHome = Math.max(maxHome, homeTokens[r]!);
  }
  return {
    strategy: plan.strategy,
    world: W,
    mask: plan.mask,
    sequences: plan.sequences.length,
    tokens,
    attendedPairs: pairs,
    expectedPairs,
    tasks,
    taskRows: t.rank.length,
    chunkTaskRows: ct ? ct.rank.length : 0,
    computeImbalance: imbalance(pairsPerRank),
    forward: fwd.report,
    backward: bwd.report,
    rounds: fwd.report.rounds + bwd.report.rounds,
    groups: fwd.report.groups + bwd.report.groups,
    congestion: Math.max(fwd.report.congestion, bwd.report.congestion),
    nicCongestion: Math.max(fwd.report.nicCongestion, bwd.report.nicCongestion),
    nvlinkCongestion: Math.max(fwd.report.nvlinkCongestion, bwd.report.nvlinkCongestion),
    nicRoute: route,
    totalBytes: fwd.report.totalBytes + bwd.report.totalBytes,
    commImbalance: imbalance(commBoth),
    peakResidentTokens: peak,
    maxHomeTokens: maxHome,
  };
}

function phaseReport(
  plan: Plan,
  ph: Phase,
  name: 'forward' | 'backward',
  stats: SetStats,
  flops: number,
  route: NicRoute,
): { report: PhaseReport; perRankBytes: Float64Array } {
  const W = plan.world;
  const perToken = bytesPerToken(plan.model, name);
  const bytes: KindBytes = { in: 0, kv: 0, out: 0, dkv: 0 };
  const names = ['in', 'kv', 'out', 'dkv'] as const;
  const perRankBytes = new Float64Array(W);
  const tr = ph.transfers;
  const ctr = ph.chunkTransfers;
  const nTr = tr.round.length;
  const nCtr = ctr ? ctr.round.length : 0;
  // Message keys (round, src, dst) and whether each carries kv; `direct`: the same with each
  // explicit row's `kvOrigin` sender (null without a usable one: kvDirectDelta is then kvDelta).
  const keys = new Float64Array(nTr + nCtr);
  const kvFlag = new Uint8Array(nTr + nCtr);
  const origin = usableOrigin(ph, W);
  const direct = origin ? new Float64Array(nTr + nCtr) : null;
  let nKeys = 0;
  const add = (round: number, src: number, dst: number, kind: number, tok: number, from: number): void => {
    if (tok === 0) return; // a chunk row of parts empty for its whole set moves nothing
    const i = nKeys++;
    if (direct) direct[i] = (round * W + from) * W + dst;
    const b = tok * perToken[kind as 0 | 1 | 2 | 3];
    bytes[names[kind]!] += b;
    perRankBytes[src]! += b;
    perRankBytes[dst]! += b;
    if (kind === Kind.kv) kvFlag[i] = 1;
    keys[i] = (round * W + src) * W + dst;
  };
  for (let i = 0; i < nTr; i++)
    add(tr.round[i]!, tr.src[i]!, tr.dst[i]!, tr.kind[i]!, tr.length[i]!, origin ? origin[i]! : tr.src[i]!);
  if (ctr)
    for (let j = 0; j < nCtr; j++)
      add(
        ctr.round[j]!,
        ctr.src[j]!,
        ctr.dst[j]!,
        ctr.kind[j]!,
        stats.get(ctr.set[j]!, ctr.parts[j]!).tokens[ctr.part[j]!]!,
        ctr.src[j]!,
      );
  const m = messageStats(keys.subarray(0, nKeys), kvFlag, W, route.gpusPerNode);
  const links = linkCongestion(m.unique, W, route);
  const kvDirectDelta = direct ? messageStats(direct.subarray(0, nKeys), kvFlag, W).kvDelta : m.kvDelta;
  const report: PhaseReport = {
    rounds: ph.groupOfRound.length,
    groups: groupCount(ph.groupOfRound),
    transferRows: nTr + nCtr,
    messages: m.messages,
    congestion: m.congestion,
    nicCongestion: links.nic,
    nvlinkCongestion: links.nvlink,
    kvDelta: m.kvDelta,
    kvDirectDelta,
    kvRounds: m.kvRounds,
    bytes,
    totalBytes: bytes.in + bytes.kv + bytes.out + bytes.dkv,
    commImbalance: imbalance(perRankBytes),
    computeOps: ph.compute.rank.length,
    flops,
  };
  return { report, perRankBytes };
}

/** Bytes a token of each kind carries in a phase: Q,K,V or dO in, O or dQ,dK,dV out, K,V and dK,dV. */
function bytesPerToken(model: Plan['model'], name: 'forward' | 'backward'): Record<0 | 1 | 2 | 3, number> {
  const q = qBytesPerToken(model);
  const kv = kvBytesPerToken(model);
  return name === 'forward'
    ? { [Kind.in]: q + kv, [Kind.kv]: kv, [Kind.out]: q, [Kind.dkv]: kv }
    : { [Kind.in]: q, [Kind.kv]: kv, [Kind.out]: q + kv, [Kind.dkv]: kv };
}

/**
 * Bytes of a plan's `in` and `out` transfers, both phases (the reshuffle, relay hops included), as
 * {@link planReport} counts them: a walk of the transfer rows, without the report's message
 * statistics (`fcp plan` compares it against a re-plan; at 4096 ranks the whole report takes seconds).
 */
export function reshuffleBytes(plan: Plan): number {
  const stats = new SetStats(plan);
  let total = 0;
  for (const name of ['forward', 'backward'] as const) {
    const ph = plan[name];
    const perToken = bytesPerToken(plan.model, name);
    const tr = ph.transfers;
    for (let i = 0; i < tr.round.length; i++) {
      const k = tr.kind[i]!;
      if (k === Kind.in || k === Kind.out) total += tr.length[i]! * perToken[k];
    }
    const ctr = ph.chunkTransfers;
    if (ctr)
      for (let j = 0; j < ctr.round.length; j++) {
        const k = ctr.kind[j]!;
        if (k === Kind.in || k === Kind.out)
          total += stats.get(ctr.set[j]!, ctr.parts[j]!).tokens[ctr.part[j]!]! * perToken[k];
      }
  }
  return total;
}

/** A phase's `kvOrigin` when the validator accepts its shape (one rank per transfer row), else null. */
function usableOrigin(ph: Phase, W: number): Int32Array | null {
  const o = ph.kvOrigin;
  if (o === undefined || o.length !== ph.transfers.round.length) return null;
  for (let i = 0; i < o.length; i++) if (o[i]! < 0 || o[i]! >= W) return null;
  return o;
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
const int = (x: number): string => Math.round(x).toLocaleString('en-US');
function gb(x: number): string {
  if (x >= 1e9) return `${(x / 1e9).toFixed(2)} GB`;
  if (x >= 1e6) return `${(x / 1e6).toFixed(2)} MB`;
  if (x >= 1e3) return `${(x / 1e3).toFixed(2)} kB`;
  return `${x} B`;
}

/** The report as an aligned text table (for `fcp validate`). */
export function formatReport(r: PlanReport): string {
  const head = [
    `strategy ${r.strategy}, world ${r.world}, mask ${r.mask}, ${int(r.sequences)} sequences, ${int(r.tokens)} tokens`,
    `attended pairs ${r.attendedPairs.toExponential(4)} (batch: ${r.expectedPairs.toExponential(4)}), tasks ${int(r.tasks)} (${int(r.taskRows)} rows + ${int(r.chunkTaskRows)} chunk rows)`,
    `compute imbalance ${pct(r.computeImbalance)}, communication imbalance ${pct(r.commImbalance)}, peak resident tokens ${int(r.peakResidentTokens)} (home max ${int(r.maxHomeTokens)})`,
    '',
  ];
  const f = r.forward;
  const b = r.backward;
  const rows: [string, string, string, string][] = [
    ['', 'forward', 'backward', 'total'],
    ['rounds', int(f.rounds), int(b.rounds), int(r.rounds)],
    ['groups', int(f.groups), int(b.groups), int(r.groups)],
    ['compute ops', int(f.computeOps), int(b.computeOps), int(f.computeOps + b.computeOps)],
    ['transfer rows', int(f.transferRows), int(b.transferRows), int(f.transferRows + b.transferRows)],
    ['messages', int(f.messages), int(b.messages), int(f.messages + b.messages)],
    ['congestion', int(f.congestion), int(b.congestion), int(r.congestion)],
    [
      `NIC congestion (${r.nicRoute.routing}, ${r.nicRoute.gpusPerNode}/node)`,
      int(f.nicCongestion),
      int(b.nicCongestion),
      int(r.nicCongestion),
    ],
    ['NVLink port congestion', int(f.nvlinkCongestion), int(b.nvlinkCongestion), int(r.nvlinkCongestion)],
    ['kv delta / kv rounds', `${f.kvDelta} / ${f.kvRounds}`, `${b.kvDelta} / ${b.kvRounds}`, ''],
    ['kv direct delta', `${f.kvDirectDelta}`, `${b.kvDirectDelta}`, ''],
    ['bytes in', gb(f.bytes.in), gb(b.bytes.in), gb(f.bytes.in + b.bytes.in)],
    ['bytes kv', gb(f.bytes.kv), gb(b.bytes.kv), gb(f.bytes.kv + b.bytes.kv)],
    ['bytes dkv', gb(f.bytes.dkv), gb(b.bytes.dkv), gb(f.bytes.dkv + b.bytes.dkv)],
    ['bytes out', gb(f.bytes.out), gb(b.bytes.out), gb(f.bytes.out + b.bytes.out)],
    ['bytes total', gb(f.totalBytes), gb(b.totalBytes), gb(r.totalBytes)],
    ['comm imbalance', pct(f.commImbalance), pct(b.commImbalance), pct(r.commImbalance)],
    [
      'useful TFLOP',
      (f.flops / 1e12).toFixed(3),
      (b.flops / 1e12).toFixed(3),
      ((f.flops + b.flops) / 1e12).toFixed(3),
    ],
  ];
  const w = [0, 1, 2, 3].map((c) => Math.max(...rows.map((row) => row[c]!.length)));
  const lines = rows.map((row) =>
    [row[0].padEnd(w[0]!), ...[1, 2, 3].map((c) => row[c]!.padStart(w[c]!))].join('  ').trimEnd(),
  );
  return [...head, ...lines].join('\n');
}

/** An all-zero report for plans too broken to measure (structural issues). */
export function zeroReport(plan: Plan): PlanReport {
  const phase = (): PhaseReport => ({
    rounds: 0,
    groups: 0,
    transferRows: 0,
    messages: 0,
    congestion: 0,
    nicCongestion: 0,
    nvlinkCongestion: 0,
    kvDelta: 0,
    kvDirectDelta: 0,
    kvRounds: 0,
    bytes: { in: 0, kv: 0, out: 0, dkv: 0 },
    totalBytes: 0,
    commImbalance: 0,
    computeOps: 0,
    flops: 0,
  });
  return {
    strategy: String(plan.strategy),
    world: Number(plan.world) || 0,
    mask: String(plan.mask),
    sequences: plan.sequences?.length ?? 0,
    tokens: 0,
    attendedPairs: 0,
    expectedPairs: 0,
    tasks: 0,
    taskRows: 0,
    chunkTaskRows: 0,
    computeImbalance: 0,
    forward: phase(),
    backward: phase(),
    rounds: 0,
    groups: 0,
    congestion: 0,
    nicCongestion: 0,
    nvlinkCongestion: 0,
    nicRoute: defaultNicRoute(plan.meta),
    totalBytes: 0,
    commImbalance: 0,
    peakResidentTokens: 0,
    maxHomeTokens: 0,
  };
}

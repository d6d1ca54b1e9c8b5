/**
 * A simple plan-time estimate for the `wlb` oracle that needs no executor (the registered `wlb`
 * uses the simulator instead; both plug into the same seam, `PlanEstimate` in `./index.ts`).
 *
 * Per phase and rank: compute time = attention FLOPs / (peak * efficiency), communication time =
 * max(bytes sent, bytes received) / bandwidth; a rank's time is compute plus the communication its
 * compute cannot hide, i.e. max(compute, communication) (perfect overlap, no latency); the phase
 * takes the slowest rank; the plan takes forward plus backward. FLOPs follow docs/plan-format.md (forward
 * 4 * pairs * qHeads * headDim, backward 2.5x) and are charged on padded lengths where a sequence
 * set records `padTo` (TE computes on its padding). Chunk rows are summed per sequence set in O(1)
 * each ({@link partStats}), so a 256-rank ring plan costs milliseconds. What it ignores: kernel
 * efficiency of small chunks, latency, topology, incast.
 */

import { assertNever } from '../../core/assert.ts';
import {
  attendedPairs,
  backwardFlops,
  forwardFlops,
  kvBytesPerToken,
  qBytesPerToken,
} from '../../model/attention.ts';
import { chunkTaskPairs, type PartStats, partStats } from '../../plan/parts.ts';
import { Kind, type KindCode, type ModelShape, type Phase, type Plan } from '../../plan/types.ts';

/** Hardware numbers of {@link flopByteEstimate}. */
export interface FlopByteOptions {
  /** Peak attention FLOP/s per GPU (default 989e12, Hopper bf16 dense). */
  peakFlops: number;
  /** Fraction of peak the attention kernels reach (default 0.5; calibration: 0.35-0.62). */
  efficiency: number;
  /** Bytes per second per GPU each way (default 50e9, the hopper-ib preset). */
  bandwidth: number;
}

/** Defaults of {@link FlopByteOptions}. */
export const FLOP_BYTE_DEFAULTS: FlopByteOptions = { peakFlops: 989e12, efficiency: 0.5, bandwidth: 50e9 };

/** Bytes per token moved by a transfer of `kind` in the forward (`fwd`) or backward phase. */
export function bytesPerToken(m: ModelShape, kind: KindCode, fwd: boolean): number {
  const q = qBytesPerToken(m);
  const kv = kvBytesPerToken(m);
  switch (kind) {
    case Kind.in:
      return fwd ? q + kv : q; // Q,K,V forward; dO backward
    case Kind.kv:
    case Kind.dkv:
      return kv;
    case Kind.out:
      return fwd ? q : q + kv; // O forward; dQ,dK,dV backward
    default:
      return assertNever(kind, 'transfer kind');
  }
}

/** Per-rank attended pairs and sent/received bytes of one phase. */
export interface PhaseLoad {
  pairs: Float64Array;
  sent: Float64Array;
  received: Float64Array;
}

/** Sums a phase's per-rank work (pairs of its compute ops, bytes of its transfers). */
export function phaseLoad(
  plan: Plan,
  phase: Phase,
  fwd: boolean,
  stats: (set: number, parts: number) => PartStats,
): PhaseLoad {
  const w = plan.world;
  const pairs = new Float64Array(w);
  const sent = new Float64Array(w);
  const received = new Float64Array(w);
  const causal = plan.mask === 'causal';
  const t = plan.tasks;
  const c = phase.compute;
  for (let op = 0; op < c.rank.length; op++) {
    const r = c.rank[op]!;
    for (let i = c.taskOffsets[op]!; i < c.taskOffsets[op + 1]!; i++) {
      const id = c.taskIds[i]!;
      pairs[r]! += attendedPairs(causal, t.qStart[id]!, t.qLength[id]!, t.kvStart[id]!, t.kvLength[id]!);
    }
    const ct = plan.chunkTasks;
    if (!ct || !c.chunkTaskOffsets || !c.chunkTaskIds) continue;
    for (let i = c.chunkTaskOffsets[op]!; i < c.chunkTaskOffsets[op + 1]!; i++) {
      const id = c.chunkTaskIds[i]!;
      pairs[r]! += chunkTaskPairs(
        stats(ct.set[id]!, ct.parts[id]!),
        plan.mask,
        ct.qPart[id]!,
        ct.kvPart[id]!,
      );
    }
  }
  const tr = phase.transfers;
  for (let i = 0; i < tr.round.length; i++) {
    const bytes = tr.length[i]! * bytesPerToken(plan.model, tr.kind[i] as KindCode, fwd);
    sent[tr.src[i]!]! += bytes;
    received[tr.dst[i]!]! += bytes;
  }
  const ch = phase.chunkTransfers;
  if (ch)
    for (let i = 0; i < ch.round.length; i++) {
      const tokens = stats(ch.set[i]!, ch.parts[i]!).tokens[ch.part[i]!]!;
      const bytes = tokens * bytesPerToken(plan.model, ch.kind[i] as KindCode, fwd);
      sent[ch.src[i]!]! += bytes;
      received[ch.dst[i]!]! += bytes;
    }
  return { pairs, sent, received };
}

/** Per-set part statistics of a plan, cached by (set, parts); padded where the set records `padTo`. */
export function partStatsCache(plan: Plan): (set: number, parts: number) => PartStats {
  const cache = new Map<number, PartStats>();
  const sets = plan.seqSets;
  return (set, parts) => {
    const key = set * 65537 + parts;
    let s = cache.get(key);
    if (!s) {
      const seqs = sets ? sets.seqs.subarray(sets.offsets[set]!, sets.offsets[set + 1]!) : new Int32Array(0);
      const padded = (sets?.padTo?.[set] ?? 0) > 0;
      s = partStats(plan.sequences, seqs, parts, padded);
      cache.set(key, s);
    }
    return s;
  };
}

/** The estimate described in the module comment, in milliseconds. */
export function flopByteEstimate(plan: Plan, options: Partial<FlopByteOptions> = {}): number {
  const o = { ...FLOP_BYTE_DEFAULTS, ...options };
  const stats = partStatsCache(plan);
  let ms = 0;
  for (const fwd of [true, false]) {
    const load = phaseLoad(plan, fwd ? plan.forward : plan.backward, fwd, stats);
    let worst = 0;
    for (let r = 0; r < plan.world; r++) {
      const flops = fwd
        ? forwardFlops(plan.model, load.pairs[r]!)
        : backwardFlops(plan.model, load.pairs[r]!);
      const compute = flops / (o.peakFlops * o.efficiency);
      const comm = Math.max(load.sent[r]!, load.received[r]!) / o.bandwidth;
      worst = Math.max(worst, Math.max(compute, comm));
    }
    ms += worst * 1e3;
  }
  return ms;
}

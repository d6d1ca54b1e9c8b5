/**
 * The discrete-event simulation of one phase. Per rank a compute stream (ops in table order, op i
 * after group `after[i]` completed on its rank) and a comm stream (groups in order; group g starts
 * on a rank when g-1 completed there; a group completes on a rank when all its flows with that rank
 * as sender or receiver are done). Under `Phase.pushStream` a rank has two comm streams, pushes
 * (`out`, `dkv`) on the second, each running its own groups in order; ops wait only for the first.
 * A flow becomes ready when both its ranks have entered its group (on the flow's stream)
 * and its sendAfter ops have finished; after its latency it moves bytes at its max-min fair rate.
 * Events: op end and flow activation (a heap ordered by time, then type and id), flow end (an indexed
 * heap: a rate change moves the flow's pending end). All events at one instant are applied before
 * the rates are recomputed once. No wall clock is read.
 */
import { fail } from '../../core/issues.ts';
import { Kind } from '../../plan/types.ts';
import { EventHeap, IndexedHeap } from './heap.ts';
import type { PreparedPhase } from './prepare.ts';
import { type RateContention, type RateOptions, RateSolver } from './rates.ts';

const EV_FLOW_ACTIVATE = 1;
const EV_OP_END = 2;

/** Raw per-phase outcome (times in ms). */
export interface PhaseRun {
  makespanMs: number;
  /** Per rank: compute busy, comm busy (>= 1 flow ready or moving), exposed comm (comm busy, compute idle), end. */
  computeMs: Float64Array;
  commMs: Float64Array;
  exposedMs: Float64Array;
  endMs: Float64Array;
  bytesSent: Float64Array;
  bytesReceived: Float64Array;
  /** Bytes by transfer kind code (in, kv, out, dkv). */
  bytesByKind: Float64Array;
  /** Latest end of an `in` flow; first ready and last end of `out` flows (NaN when none). */
  inEndMs: number;
  outStartMs: number;
  outEndMs: number;
  events: number;
  rateSolves: number;
  opStart: Float64Array;
  opEnd: Float64Array;
  entryStart: Float64Array;
  entryEnd: Float64Array;
  flowReady: Float64Array;
  flowEnd: Float64Array;
}

/**
 * Runs one prepared phase to completion. Throws FcpError `sim.deadlock` if the plan cannot finish.
 * `onProgress` gets the fraction of ops and flows finished every few thousand events (a long
 * simulation is synchronous: the CLI's progress lines come from here).
 */
export function runPhase(
  p: PreparedPhase,
  capacity: Float64Array,
  rates: RateOptions,
  contention: RateContention | null = null,
  onProgress?: (fraction: number) => void,
): PhaseRun {
  const W = p.world;
  const F = p.flowCount;
  const heap = new EventHeap(Math.max(1024, 2 * W));
  /** Pending flow ends, one per moving flow (a rate change moves it). */
  const ends = new IndexedHeap(F);
  const rate = new Float64Array(F);
  const remaining = new Float64Array(F);
  const last = new Float64Array(F);
  const need = new Int32Array(F);
  const flowReady = new Float64Array(F).fill(Number.NaN);
  const flowEnd = new Float64Array(F).fill(Number.NaN);
  const solver = new RateSolver(capacity, p.flowResOff, p.flowRes, rate, rates, contention);
  for (let f = 0; f < F; f++) need[f] = 2 + p.flowDeps[f]!;

  const E = p.entryGroup.length;
  const entryStart = new Float64Array(E).fill(Number.NaN);
  const entryEnd = new Float64Array(E).fill(Number.NaN);
  const pending = new Int32Array(E);
  for (let e = 0; e < E; e++) pending[e] = p.entryFlowOff[e + 1]! - p.entryFlowOff[e]!;
  // Next entry of each (rank, stream) slot: a stream enters its groups one after another.
  const S = p.streams;
  const curEntry = Int32Array.from(p.rankEntryOff.subarray(0, S * W));

  const opStart = new Float64Array(p.opCount).fill(Number.NaN);
  const opEnd = new Float64Array(p.opCount).fill(Number.NaN);
  const nextOp = Int32Array.from(p.rankOpOff.subarray(0, W));
  const busy = new Uint8Array(W);

  // Time accounting per rank.
  const commActive = new Int32Array(W);
  const lastT = new Float64Array(W);
  const computeMs = new Float64Array(W);
  const commMs = new Float64Array(W);
  const exposedMs = new Float64Array(W);
  const endMs = new Float64Array(W);
  const account = (r: number, t: number): void => {
    const dt = t - lastT[r]!;
    if (dt > 0) {
      if (busy[r]) computeMs[r]! += dt;
      if (commActive[r]! > 0) {
        commMs[r]! += dt;
        if (!busy[r]) exposedMs[r]! += dt;
      }
    }
    lastT[r] = t;
  };

  const dirty: number[] = [];
  let events = 0;
  let rateSolves = 0;
  let finishedFlows = 0;
  let finishedOps = 0;

  const ready = (f: number, t: number): void => {
    flowReady[f] = t;
    const s = p.flowSrc[f]!;
    const d = p.flowDst[f]!;
    account(s, t);
    commActive[s]!++;
    account(d, t);
    commActive[d]!++;
    heap.push(t + p.flowLatency[f]!, f * 4 + EV_FLOW_ACTIVATE, 0);
  };
  const release = (f: number, t: number): void => {
    need[f] = need[f]! - 1;
    if (need[f] === 0) ready(f, t);
  };
  const tryStartOp = (r: number, t: number): void => {
    if (busy[r] || nextOp[r]! >= p.rankOpOff[r + 1]!) return;
    const op = p.rankOps[nextOp[r]!]!;
    const w = p.opWait[op]!;
    if (w >= 0 && Number.isNaN(entryEnd[w]!)) return;
    account(r, t);
    busy[r] = 1;
    opStart[op] = t;
    heap.push(t + p.opDur[op]!, op * 4 + EV_OP_END, 0);
  };
  /** Enters slot `s`'s next group (slot: streams * rank + stream). */
  const enter = (s: number, t: number): void => {
    const e = curEntry[s]!;
    if (e >= p.rankEntryOff[s + 1]!) return;
    entryStart[e] = t;
    for (let k = p.entryFlowOff[e]!; k < p.entryFlowOff[e + 1]!; k++) release(p.entryFlows[k]!, t);
  };
  const finishFlow = (f: number, t: number): void => {
    flowEnd[f] = t;
    finishedFlows++;
    for (let side = 0; side < 2; side++) {
      const r = side === 0 ? p.flowSrc[f]! : p.flowDst[f]!;
      account(r, t);
      commActive[r]!--;
      const s = S * r + p.flowStream[f]!;
      const e = curEntry[s]!;
      pending[e] = pending[e]! - 1;
      if (pending[e] === 0) {
        entryEnd[e] = t;
        endMs[r] = Math.max(endMs[r]!, t);
        curEntry[s]!++;
        enter(s, t);
        tryStartOp(r, t);
      }
    }
  };

  for (let s = 0; s < S * W; s++) enter(s, 0);
  for (let r = 0; r < W; r++) tryStartOp(r, 0);
  const popped = heap.popped;
  const total = Math.max(1, p.opCount + F);
  let lastEvents = 0;
  for (;;) {
    const t = Math.min(heap.peekTime(), ends.peekTime());
    if (t === Number.POSITIVE_INFINITY) break;
    dirty.length = 0;
    if (onProgress && (events & 4095) < lastEvents) onProgress((finishedOps + finishedFlows) / total);
    lastEvents = events & 4095;
    // All events at t: flow ends first (by flow id), then activations and op ends (by key).
    for (;;) {
      if (ends.peekTime() === t) {
        const id = ends.peekItem();
        ends.remove(id);
        events++;
        solver.remove(id, dirty);
        finishFlow(id, t);
        continue;
      }
      if (heap.peekTime() !== t) break;
      heap.pop();
      events++;
      const key = popped.key;
      const type = key % 4;
      const id = (key - type) / 4;
      if (type === EV_FLOW_ACTIVATE) {
        remaining[id] = p.flowBytes[id]!;
        last[id] = t;
        if (remaining[id]! <= 0) finishFlow(id, t);
        else solver.add(id, dirty);
      } else {
        const r = p.opRank[id]!;
        account(r, t);
        busy[r] = 0;
        opEnd[id] = t;
        finishedOps++;
        endMs[r] = Math.max(endMs[r]!, t);
        nextOp[r]!++;
        for (let k = p.opFlowOff[id]!; k < p.opFlowOff[id + 1]!; k++) release(p.opFlows[k]!, t);
        tryStartOp(r, t);
      }
    }
    if (dirty.length === 0) continue;
    solver.solve(dirty);
    rateSolves++;
    const touched = solver.touched;
    for (let k = 0; k < touched.length; k++) {
      const f = touched[k]!;
      const nr = solver.newRate[f]!;
      if (nr === rate[f]) continue;
      remaining[f] = Math.max(0, remaining[f]! - rate[f]! * (t - last[f]!));
      last[f] = t;
      solver.setTouchedRate(k, nr);
      if (nr > 0) ends.set(f, t + remaining[f]! / nr);
      else if (remaining[f]! <= 0) ends.set(f, t);
      else ends.remove(f);
    }
  }
  if (finishedFlows < F || finishedOps < p.opCount) {
    const stuckOp = opEnd.findIndex((v) => Number.isNaN(v));
    const stuckFlow = flowEnd.findIndex((v) => Number.isNaN(v));
    fail(
      'sim.deadlock',
      `the ${p.dir} phase cannot finish: ${p.opCount - finishedOps} compute ops and ${F - finishedFlows} flows never run` +
        (stuckOp >= 0 ? ` (first: op ${stuckOp} on rank ${p.opRank[stuckOp]})` : '') +
        (stuckFlow >= 0
          ? ` (first flow: group ${p.flowGroup[stuckFlow]} ${p.flowSrc[stuckFlow]} -> ${p.flowDst[stuckFlow]})`
          : '') +
        '; check the plan with `fcp verify`',
      `${p.dir}`,
    );
  }
  let makespan = 0;
  for (let r = 0; r < W; r++) {
    account(r, endMs[r]!);
    makespan = Math.max(makespan, endMs[r]!);
  }
  const flows = flowTotals(p, flowReady, flowEnd);
  return {
    makespanMs: makespan,
    computeMs,
    commMs,
    exposedMs,
    endMs,
    ...flows,
    events,
    rateSolves,
    opStart,
    opEnd,
    entryStart,
    entryEnd,
    flowReady,
    flowEnd,
  };
}

/** Per-flow totals every engine reports the same way: bytes by rank and kind, reshuffle span. */
export function flowTotals(
  p: PreparedPhase,
  flowReady: ArrayLike<number>,
  flowEnd: ArrayLike<number>,
): Pick<PhaseRun, 'bytesSent' | 'bytesReceived' | 'bytesByKind' | 'inEndMs' | 'outStartMs' | 'outEndMs'> {
  const W = p.world;
  const bytesSent = new Float64Array(W);
  const bytesReceived = new Float64Array(W);
  const bytesByKind = new Float64Array(4);
  let inEnd = Number.NaN;
  let outStart = Number.NaN;
  let outEnd = Number.NaN;
  for (let f = 0; f < p.flowCount; f++) {
    const b = p.flowBytes[f]!;
    bytesSent[p.flowSrc[f]!]! += b;
    bytesReceived[p.flowDst[f]!]! += b;
    const k = p.flowKind[f]!;
    bytesByKind[k]! += b;
    if (k === Kind.in) inEnd = Number.isNaN(inEnd) ? flowEnd[f]! : Math.max(inEnd, flowEnd[f]!);
    if (k === Kind.out) {
      outStart = Number.isNaN(outStart) ? flowReady[f]! : Math.min(outStart, flowReady[f]!);
      outEnd = Number.isNaN(outEnd) ? flowEnd[f]! : Math.max(outEnd, flowEnd[f]!);
    }
  }
  return { bytesSent, bytesReceived, bytesByKind, inEndMs: inEnd, outStartMs: outStart, outEndMs: outEnd };
}

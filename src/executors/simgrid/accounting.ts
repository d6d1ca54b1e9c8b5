/**
 * Turns the start and end times another engine reports for every op and flow of a prepared phase
 * into the simulator's per-rank accounting ({@link PhaseRun}): compute busy time, comm busy time
 * (at least one flow of the rank ready or moving), exposed comm (comm busy while compute is idle),
 * the rank's end, bytes and reshuffle times. The same definitions as src/executors/sim/engine.ts,
 * computed after the fact by a sweep over each rank's intervals.
 */
import { fail } from '../../core/issues.ts';
import { flowTotals, type PhaseRun } from '../sim/engine.ts';
import type { PreparedPhase } from '../sim/prepare.ts';

/** Start and end times (ms from the phase's start) of every op, flow and group entry. */
export interface PhaseTimes {
  opStart: ArrayLike<number>;
  opEnd: ArrayLike<number>;
  flowReady: ArrayLike<number>;
  flowEnd: ArrayLike<number>;
  entryStart: ArrayLike<number>;
  entryEnd: ArrayLike<number>;
  events: number;
}

/** The accounting of one phase from its times. Throws FcpError `sim.deadlock` if something never ran. */
export function phaseRunFromTimes(p: PreparedPhase, t: PhaseTimes): PhaseRun {
  const W = p.world;
  const F = p.flowCount;
  const num = (a: ArrayLike<number>, n: number, what: string): Float64Array => {
    if (a.length !== n)
      fail('simgrid.output', `the engine returned ${a.length} ${what} times, expected ${n}`);
    const out = Float64Array.from(a as ArrayLike<number>, (v) => (v === null ? Number.NaN : v));
    return out;
  };
  const opStart = num(t.opStart, p.opCount, 'op start');
  const opEnd = num(t.opEnd, p.opCount, 'op end');
  const flowReady = num(t.flowReady, F, 'flow ready');
  const flowEnd = num(t.flowEnd, F, 'flow end');
  const entryStart = num(t.entryStart, p.entryGroup.length, 'entry start');
  const entryEnd = num(t.entryEnd, p.entryGroup.length, 'entry end');
  const stuckOps = opEnd.filter((v) => Number.isNaN(v)).length;
  const stuckFlows = flowEnd.filter((v) => Number.isNaN(v)).length;
  if (stuckOps > 0 || stuckFlows > 0)
    fail(
      'sim.deadlock',
      `the ${p.dir} phase cannot finish: ${stuckOps} compute ops and ${stuckFlows} flows never run; check the plan with \`fcp verify\``,
      p.dir,
    );
  const computeMs = new Float64Array(W);
  const commMs = new Float64Array(W);
  const exposedMs = new Float64Array(W);
  const endMs = new Float64Array(W);
  // Per rank: boundaries of compute (+-1 on busy) and comm (+-1 on active flows).
  const evs: [number, number, number][][] = Array.from({ length: W }, () => []);
  for (let i = 0; i < p.opCount; i++) {
    const r = p.opRank[i]!;
    evs[r]!.push([opStart[i]!, 0, 1], [opEnd[i]!, 0, -1]);
    endMs[r] = Math.max(endMs[r]!, opEnd[i]!);
  }
  for (let f = 0; f < F; f++)
    for (const r of [p.flowSrc[f]!, p.flowDst[f]!]) {
      evs[r]!.push([flowReady[f]!, 1, 1], [flowEnd[f]!, 1, -1]);
      endMs[r] = Math.max(endMs[r]!, flowEnd[f]!);
    }
  for (let r = 0; r < W; r++) {
    const list = evs[r]!;
    // Ends before starts at one instant, so touching intervals do not overlap.
    list.sort((a, b) => a[0] - b[0] || a[2] - b[2]);
    let busy = 0;
    let active = 0;
    let last = 0;
    for (const [time, type, d] of list) {
      const dt = time - last;
      if (dt > 0) {
        if (busy > 0) computeMs[r]! += dt;
        if (active > 0) {
          commMs[r]! += dt;
          if (busy === 0) exposedMs[r]! += dt;
        }
      }
      last = time;
      if (type === 0) busy += d;
      else active += d;
    }
  }
  let makespan = 0;
  for (let r = 0; r < W; r++) makespan = Math.max(makespan, endMs[r]!);
  const flows = flowTotals(p, flowReady, flowEnd);
  return {
    makespanMs: makespan,
    computeMs,
    commMs,
    exposedMs,
    endMs,
    ...flows,
    events: t.events,
    rateSolves: 0,
    opStart,
    opEnd,
    entryStart,
    entryEnd,
    flowReady,
    flowEnd,
  };
}

/**
 * Chrome trace (Trace Event Format, JSON object form) of a simulation, viewable in ui.perfetto.dev
 * or chrome://tracing: one process per rank, threads `compute` and `comm`; compute ops and comm
 * groups as complete ('X') events; the backward phase follows the forward on the same timeline.
 */
import { KIND_NAMES } from '../../plan/types.ts';
import type { PhaseRun } from './engine.ts';
import type { PreparedPhase } from './prepare.ts';

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

const TID_COMPUTE = 1;
const TID_COMM = 2;

/** Builds the trace object for both phases (times in microseconds). */
export function buildTrace(
  phases: readonly { prep: PreparedPhase; run: PhaseRun }[],
  world: number,
): { traceEvents: TraceEvent[]; displayTimeUnit: string } {
  const ev: TraceEvent[] = [];
  for (let r = 0; r < world; r++) {
    ev.push({ name: 'process_name', ph: 'M', pid: r, tid: 0, args: { name: `rank ${r}` } });
    ev.push({ name: 'process_sort_index', ph: 'M', pid: r, tid: 0, args: { sort_index: r } });
    ev.push({ name: 'thread_name', ph: 'M', pid: r, tid: TID_COMPUTE, args: { name: 'compute' } });
    ev.push({ name: 'thread_name', ph: 'M', pid: r, tid: TID_COMM, args: { name: 'comm' } });
    if (phases.some((x) => x.prep.streams === 2))
      ev.push({ name: 'thread_name', ph: 'M', pid: r, tid: TID_COMM + 1, args: { name: 'comm (pushes)' } });
  }
  let offsetUs = 0;
  for (const { prep, run } of phases) {
    const us = (ms: number): number => Math.round((offsetUs + ms * 1000) * 1000) / 1000;
    for (let op = 0; op < prep.opCount; op++) {
      const s = run.opStart[op]!;
      ev.push({
        name: `${prep.dir} op ${op}`,
        cat: prep.dir,
        ph: 'X',
        pid: prep.opRank[op]!,
        tid: TID_COMPUTE,
        ts: us(s),
        dur: Math.round((run.opEnd[op]! - s) * 1e6) / 1000,
      });
    }
    // A rank's entries, stream by stream (Phase.pushStream: pushes on a second comm thread).
    for (let r = 0; r < world; r++)
      for (
        let e = prep.rankEntryOff[prep.streams * r]!;
        e < prep.rankEntryOff[prep.streams * (r + 1)]!;
        e++
      ) {
        let bytes = 0;
        const kinds = new Set<string>();
        for (let k = prep.entryFlowOff[e]!; k < prep.entryFlowOff[e + 1]!; k++) {
          const f = prep.entryFlows[k]!;
          bytes += prep.flowBytes[f]!;
          kinds.add(KIND_NAMES[prep.flowKind[f]!] ?? '?');
        }
        const s = run.entryStart[e]!;
        ev.push({
          name: `${prep.dir} group ${prep.entryGroup[e]} (${[...kinds].sort().join('+')})`,
          cat: prep.dir,
          ph: 'X',
          pid: r,
          tid: TID_COMM + prep.flowStream[prep.entryFlows[prep.entryFlowOff[e]!]!]!,
          ts: us(s),
          dur: Math.round((run.entryEnd[e]! - s) * 1e6) / 1000,
          args: { flows: prep.entryFlowOff[e + 1]! - prep.entryFlowOff[e]!, bytes },
        });
      }
    offsetUs += run.makespanMs * 1000;
  }
  return { traceEvents: ev, displayTimeUnit: 'ms' };
}

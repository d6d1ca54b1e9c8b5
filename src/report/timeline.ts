/**
 * Per-rank timelines for the report: the simulator's events of one phase, restricted to the first
 * ranks and with touching bars of the same activity merged, so that a ring with thousands of
 * steps still draws as a figure of modest size.
 */
import type { Timeline, TimelineEvent } from './results.ts';

/** One simulated activity: `lane` 0 = compute stream, 1 = communication stream; times in ms. */
export interface RawEvent {
  rank: number;
  lane: 0 | 1;
  start: number;
  end: number;
  /** `compute`, or a transfer kind (`in`, `kv`, `out`, `dkv`). */
  kind: string;
}

/** Options of {@link compactTimeline}. */
export interface CompactOptions {
  /** Bars closer than this fraction of the makespan merge (default 0.002). */
  mergeGap?: number;
}

/**
 * Keeps ranks 0..maxRanks-1, sorts bars by (rank, lane, start), and merges a bar into the previous
 * one of the same rank, lane and kind when the gap between them is at most `mergeGap` x makespan.
 * Times are rounded to nanoseconds so that the results file stays compact and deterministic.
 */
export function compactTimeline(
  strategy: string,
  phase: 'forward' | 'backward',
  world: number,
  events: readonly RawEvent[],
  maxRanks: number,
  options: CompactOptions = {},
): Timeline {
  const ranks = Math.min(world, maxRanks);
  let makespan = 0;
  for (const e of events) makespan = Math.max(makespan, e.end);
  const gap = (options.mergeGap ?? 0.002) * makespan;
  const kept = events
    .filter((e) => e.rank < ranks && e.end > e.start)
    .slice()
    .sort(
      (a, b) =>
        a.rank - b.rank ||
        a.lane - b.lane ||
        a.start - b.start ||
        a.end - b.end ||
        a.kind.localeCompare(b.kind),
    );
  const out: TimelineEvent[] = [];
  // Per (rank, lane): the last bar of each kind, since bars of other kinds may sit between them.
  let key = -1;
  const lastOfKind = new Map<string, TimelineEvent>();
  for (const e of kept) {
    const k = e.rank * 2 + e.lane;
    if (k !== key) {
      key = k;
      lastOfKind.clear();
    }
    const prev = lastOfKind.get(e.kind);
    if (prev && e.start - prev.end <= gap) {
      prev.end = Math.max(prev.end, e.end);
      continue;
    }
    const bar: TimelineEvent = { rank: e.rank, lane: e.lane, start: e.start, end: e.end, kind: e.kind };
    out.push(bar);
    lastOfKind.set(e.kind, bar);
  }
  const ns = (x: number): number => Math.round(x * 1e6) / 1e6;
  for (const b of out) {
    b.start = ns(b.start);
    b.end = ns(b.end);
  }
  return { strategy, phase, world, makespanMs: ns(makespan), ranks, events: out };
}

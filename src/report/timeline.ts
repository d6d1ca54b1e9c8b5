/**
 * Per-rank timelines for the report: the simulator's events of one phase, restricted to a sample of
 * ranks and with touching bars of the same activity merged, so that a ring with thousands of
 * steps still draws as a figure of modest size; and the share of all ranks busy over time, which
 * stays readable at any world size.
 */
import type { BusyProfile, Timeline, TimelineEvent } from './results.ts';

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
  /** Ranks to keep, in drawing order (default: 0..maxRanks-1); see {@link sampleRanks}. */
  ranks?: readonly number[];
  /** How `ranks` were chosen, recorded in the timeline for its caption. */
  sample?: string;
}

/** `2nd`, `8th`, `21st`, `13th`. */
function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** Ranks drawn by {@link sampleRanks} and how they were chosen. */
export interface RankSample {
  ranks: number[];
  /** Empty when every rank is drawn. */
  description: string;
}

/**
 * Which ranks a timeline draws: every rank when `world <= max`; otherwise every s-th rank (0, s,
 * 2s, ...; s the smallest power of two that keeps them under `max`, so the sample is regular and
 * easy to name) plus the rank whose last activity ends latest (the one that sets the makespan), so
 * the critical rank is always visible. Sorted ascending.
 */
export function sampleRanks(world: number, events: readonly RawEvent[], max: number): RankSample {
  if (world <= max) return { ranks: Array.from({ length: world }, (_, r) => r), description: '' };
  let last = 0;
  let lastEnd = -Infinity;
  for (const e of events)
    if (e.end > lastEnd) {
      lastEnd = e.end;
      last = e.rank;
    }
  let stride = 1;
  while (Math.ceil(world / stride) > Math.max(1, max - 1)) stride *= 2;
  const evenly: number[] = [];
  for (let r = 0; r < world; r += stride) evenly.push(r);
  const ranks = evenly.includes(last) ? evenly : [...evenly, last].sort((a, b) => a - b);
  const spaced = `every ${ordinal(stride)} rank (0, ${stride}, ..., ${evenly[evenly.length - 1]})`;
  const critical = evenly.includes(last)
    ? `; rank ${last} finishes last`
    : ` and rank ${last}, the last to finish`;
  return { ranks, description: `${ranks.length} of ${world} ranks: ${spaced}${critical}` };
}

/**
 * Share of all `world` ranks computing (lane 0) and communicating (lane 1) over time, in `bins`
 * equal bins from 0 to the phase's makespan; a bar covering part of a bin counts in proportion.
 * Bars of one rank and lane are united first (touching ops overlap by rounding), so a share never
 * exceeds 1.
 */
export function busyProfile(
  strategy: string,
  phase: 'forward' | 'backward',
  world: number,
  events: readonly RawEvent[],
  bins = 200,
): BusyProfile {
  let makespan = 0;
  for (const e of events) makespan = Math.max(makespan, e.end);
  const binMs = makespan > 0 ? makespan / bins : 1;
  const acc = [new Float64Array(bins), new Float64Array(bins)];
  const add = (lane: 0 | 1, start: number, end: number): void => {
    const a = acc[lane]!;
    const b0 = Math.min(bins - 1, Math.floor(start / binMs));
    const b1 = Math.min(bins - 1, Math.floor(end / binMs));
    for (let b = b0; b <= b1; b++) {
      const lo = Math.max(start, b * binMs);
      const hi = Math.min(end, (b + 1) * binMs);
      if (hi > lo) a[b]! += hi - lo;
    }
  };
  const sorted = events
    .filter((e) => e.end > e.start)
    .sort((a, b) => a.rank - b.rank || a.lane - b.lane || a.start - b.start);
  // Union of each (rank, lane)'s bars, one run at a time.
  let cur: RawEvent | undefined;
  let end = 0;
  for (const e of sorted) {
    if (cur && e.rank === cur.rank && e.lane === cur.lane && e.start <= end) {
      end = Math.max(end, e.end);
      continue;
    }
    if (cur) add(cur.lane, cur.start, end);
    cur = e;
    end = e.end;
  }
  if (cur) add(cur.lane, cur.start, end);
  const share = (a: Float64Array): number[] =>
    Array.from(a, (x) => Math.round((x / (binMs * Math.max(1, world))) * 1e4) / 1e4);
  return {
    strategy,
    phase,
    world,
    binMs: Math.round(binMs * 1e6) / 1e6,
    compute: share(acc[0]!),
    comm: share(acc[1]!),
  };
}

/**
 * Keeps ranks 0..maxRanks-1 (or `options.ranks`), sorts bars by (rank, lane, start), and merges a bar into the previous
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
  const chosen = options.ranks;
  const keep = chosen ? new Set(chosen) : undefined;
  const ranks = chosen ? chosen.length : Math.min(world, maxRanks);
  let makespan = 0;
  for (const e of events) makespan = Math.max(makespan, e.end);
  const gap = (options.mergeGap ?? 0.002) * makespan;
  const kept = events
    .filter((e) => (keep ? keep.has(e.rank) : e.rank < ranks) && e.end > e.start)
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
  const t: Timeline = { strategy, phase, world, makespanMs: ns(makespan), ranks, events: out };
  if (chosen) t.rankList = [...chosen];
  if (options.sample) t.sample = options.sample;
  return t;
}

/**
 * Per-rank timeline (Gantt) of one phase for every strategy: one panel per strategy, one band per
 * drawn rank split into two lanes (compute above, communication below). Each panel has its own
 * time axis: makespans differ by 20x and more at 256 ranks, and a shared axis would shrink the
 * fast strategies to a sliver; the makespan is in each panel's header instead.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { Timeline } from '../results.ts';
import { baseSpec, kindScale } from './style.ts';

/** Pixels of one rank's band (both lanes): readable lanes even when 24 ranks are drawn. */
const BAND = 16;

/** `12.3 ms`, `0.845 ms`: a makespan with three significant digits. */
export function msLabel(ms: number): string {
  return `${ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3)} ms`;
}

/** The panel header of a timeline: strategy (with `note`, e.g. wlb's pick), makespan, ranks drawn. */
export function timelinePanel(t: Timeline, note?: string): string {
  const shown = `${t.ranks} of ${t.world} ranks`;
  const name = note ? `${t.strategy} (${note})` : t.strategy;
  return `${name}: makespan ${msLabel(t.makespanMs)} (simulated), ${t.ranks >= t.world ? 'every rank' : shown}`;
}

/**
 * Timelines of `phase`, one panel per strategy (in the given order), ranks on y, ms on x; `notes`
 * adds words to a strategy's header (wlb's pick).
 */
export function timelineSpec(
  timelines: readonly Timeline[],
  phase: 'forward' | 'backward',
  notes: Readonly<Record<string, string>> = {},
): TopLevelSpec {
  const sel = timelines.filter((t) => t.phase === phase);
  const panels = sel.map((t) => timelinePanel(t, notes[t.strategy]));
  const values: Record<string, string | number>[] = [];
  const kindSet = new Set<string>();
  sel.forEach((t, i) => {
    for (const e of t.events) {
      kindSet.add(e.kind);
      values.push({
        panel: panels[i]!,
        rank: e.rank,
        lane: e.lane === 0 ? 'compute' : 'communication',
        start: e.start,
        end: e.end,
        kind: e.kind,
      });
    }
  });
  const kinds = [...kindSet].sort((a, b) =>
    a === 'compute' ? -1 : b === 'compute' ? 1 : a.length - b.length || a.localeCompare(b),
  );
  return {
    ...baseSpec(`Per-rank timeline, ${phase} (upper lane compute, lower lane communication)`),
    data: { values },
    facet: {
      row: {
        field: 'panel',
        type: 'nominal',
        sort: panels,
        title: null,
        header: {
          labelAngle: 0,
          labelFontSize: 13,
          labelFontWeight: 'bold',
          labelAlign: 'left',
          labelAnchor: 'start',
          labelOrient: 'top',
        },
      },
    },
    resolve: { scale: { x: 'independent', y: 'independent' }, axis: { x: 'independent' } },
    spacing: 18,
    spec: {
      width: 860,
      height: { step: BAND },
      mark: { type: 'bar', aria: false },
      encoding: {
        x: { field: 'start', type: 'quantitative', title: 'time from the phase start (ms, simulated)' },
        x2: { field: 'end' },
        y: { field: 'rank', type: 'ordinal', title: 'rank', axis: { labelFontSize: 9 } },
        yOffset: {
          field: 'lane',
          type: 'nominal',
          sort: ['compute', 'communication'],
          scale: { paddingInner: 0.12 },
        },
        color: { field: 'kind', type: 'nominal', scale: kindScale(kinds), title: 'activity' },
        tooltip: [
          { field: 'rank', type: 'ordinal' },
          { field: 'lane', type: 'nominal' },
          { field: 'kind', type: 'nominal' },
          { field: 'start', type: 'quantitative', format: '.3f' },
          { field: 'end', type: 'quantitative', format: '.3f' },
        ],
      },
    },
  } as TopLevelSpec;
}

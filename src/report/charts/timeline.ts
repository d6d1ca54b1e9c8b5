/**
 * Per-rank timeline (Gantt) of one phase for a few strategies (FCP against ring in the demo): per
 * rank two thin lanes, compute above communication, on a shared time axis so the makespans compare.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { Timeline } from '../results.ts';
import { baseSpec, kindScale } from './style.ts';

/** Lane height in rank units: lane 0 (compute) at [rank, rank+0.42], lane 1 (comm) below it. */
const LANE = 0.45;
const BAR = 0.42;

/** One panel per timeline (stacked vertically), ranks on y (rank 0 on top), milliseconds on x. */
export function timelineSpec(timelines: readonly Timeline[]): TopLevelSpec {
  const strategies = timelines.map((t) => t.strategy);
  const values = timelines.flatMap((t) =>
    t.events.map((e) => ({
      strategy: t.strategy,
      rank: e.rank,
      y0: e.rank + e.lane * LANE,
      y1: e.rank + e.lane * LANE + BAR,
      start: e.start,
      end: e.end,
      kind: e.kind,
      lane: e.lane === 0 ? 'compute' : 'comm',
    })),
  );
  const ranks = Math.max(1, ...timelines.map((t) => t.ranks));
  const kinds = [...new Set(values.map((v) => v.kind))].sort((a, b) =>
    a === 'compute' ? -1 : b === 'compute' ? 1 : a.localeCompare(b),
  );
  const phase = timelines[0]?.phase ?? 'forward';
  return {
    ...baseSpec(`Per-rank timeline, ${phase} (top lane compute, bottom lane communication)`),
    data: { values },
    facet: {
      row: {
        field: 'strategy',
        type: 'nominal',
        sort: strategies,
        title: null,
        header: { labelAngle: 0, labelFontSize: 13, labelFontWeight: 'bold', labelAlign: 'left' },
      },
    },
    resolve: { scale: { y: 'independent' } },
    spec: {
      width: 720,
      height: Math.min(420, Math.max(120, ranks * 6)),
      mark: { type: 'rect', aria: false },
      encoding: {
        x: { field: 'start', type: 'quantitative', title: 'time (ms)' },
        x2: { field: 'end' },
        y: {
          field: 'y0',
          type: 'quantitative',
          scale: { domain: [0, ranks], reverse: true, nice: false, zero: true },
          title: 'rank',
          axis: { tickMinStep: 1, format: 'd' },
        },
        y2: { field: 'y1' },
        color: {
          field: 'kind',
          type: 'nominal',
          scale: kindScale(kinds),
          title: 'activity',
        },
        tooltip: [
          { field: 'rank', type: 'quantitative' },
          { field: 'lane', type: 'nominal' },
          { field: 'kind', type: 'nominal' },
          { field: 'start', type: 'quantitative', format: '.3f' },
          { field: 'end', type: 'quantitative', format: '.3f' },
        ],
      },
    },
  };
}

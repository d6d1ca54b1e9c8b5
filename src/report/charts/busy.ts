/**
 * Share of all ranks busy over time, per strategy and phase: computing (filled area) and
 * communicating (line). Unlike the timeline it covers every rank, so it reads the same at 16 or
 * 4096 ranks: a strategy that keeps every GPU busy shows a flat area near 1 up to its makespan.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { BusyProfile } from '../results.ts';
import { baseSpec, KIND_COLORS } from './style.ts';

/** Rows: strategies; columns: forward, backward; x: ms from the phase start (own axis per panel). */
export function busySpec(profiles: readonly BusyProfile[]): TopLevelSpec {
  const strategies = [...new Set(profiles.map((p) => p.strategy))];
  const values: Record<string, string | number>[] = [];
  for (const p of profiles)
    for (const [activity, shares] of [
      ['computing', p.compute],
      ['communicating', p.comm],
    ] as const)
      shares.forEach((share, i) => {
        values.push({ strategy: p.strategy, phase: p.phase, activity, t: (i + 0.5) * p.binMs, share });
      });
  const world = profiles[0]?.world ?? 0;
  return {
    ...baseSpec(`Share of all ${world} ranks busy over time (simulated)`),
    data: { values },
    facet: {
      row: {
        field: 'strategy',
        type: 'nominal',
        sort: strategies,
        title: null,
        header: { labelAngle: 0, labelAlign: 'left', labelFontWeight: 'bold' },
      },
      column: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'], title: null },
    },
    resolve: { scale: { x: 'independent' }, axis: { x: 'independent' } },
    spacing: { row: 8, column: 24 },
    spec: {
      width: 380,
      height: 56,
      layer: [
        {
          transform: [{ filter: "datum.activity === 'computing'" }],
          mark: { type: 'area', color: KIND_COLORS.compute, opacity: 0.8, interpolate: 'step' },
          encoding: {
            x: { field: 't', type: 'quantitative', title: 'ms (simulated)' },
            y: {
              field: 'share',
              type: 'quantitative',
              scale: { domain: [0, 1] },
              axis: { values: [0, 0.5, 1], format: '.1f' },
              title: 'share',
            },
          },
        },
        {
          transform: [{ filter: "datum.activity === 'communicating'" }],
          mark: { type: 'line', color: KIND_COLORS.kv, strokeWidth: 1.5, interpolate: 'step' },
          encoding: {
            x: { field: 't', type: 'quantitative' },
            y: { field: 'share', type: 'quantitative' },
          },
        },
      ],
    },
  } as TopLevelSpec;
}

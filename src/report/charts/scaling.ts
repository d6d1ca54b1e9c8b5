/** Weak scaling: attention MFU against world size at a fixed number of tokens per rank. */
import type { TopLevelSpec } from 'vega-lite';
import type { ScalingPoint } from '../results.ts';
import { baseSpec, strategyScale } from './style.ts';

const DASHES = [
  [1, 0],
  [6, 3],
  [2, 2],
  [8, 3, 2, 3],
  [4, 4],
  [1, 3],
];

/** One line per strategy, one panel per phase; worlds on a log2 axis. */
export function scalingSpec(points: readonly ScalingPoint[], tokensPerRank: number): TopLevelSpec {
  const strategies = [...new Set(points.map((p) => p.strategy))];
  const worlds = [...new Set(points.map((p) => p.world))].sort((a, b) => a - b);
  const values = points.flatMap((p) => [
    { strategy: p.strategy, world: p.world, phase: 'forward', mfu: p.mfuForward },
    { strategy: p.strategy, world: p.world, phase: 'backward', mfu: p.mfuBackward },
  ]);
  return {
    ...baseSpec(`Weak scaling (${Math.round(tokensPerRank / 1024)}K tokens per rank)`),
    data: { values },
    facet: {
      column: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'], title: null },
    },
    spec: {
      width: 230,
      height: 200,
      mark: { type: 'line', point: true },
      encoding: {
        x: {
          field: 'world',
          type: 'quantitative',
          scale: { type: 'log', base: 2 },
          axis: { values: worlds, format: 'd' },
          title: 'ranks',
        },
        y: { field: 'mfu', type: 'quantitative', title: 'MFU', axis: { format: '.0%' } },
        color: { field: 'strategy', type: 'nominal', scale: strategyScale(strategies), title: 'strategy' },
        // Dash patterns too: strategies with equal numbers (wlb picks ring or bytescale) would hide each other.
        strokeDash: {
          field: 'strategy',
          type: 'nominal',
          scale: { domain: strategies, range: strategies.map((_, i) => DASHES[i % DASHES.length]!) },
          title: 'strategy',
        },
      },
    },
  };
}

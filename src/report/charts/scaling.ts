/** Weak scaling: attention MFU against world size at a fixed number of tokens per rank. */
import type { TopLevelSpec } from 'vega-lite';
import type { ScalingPoint } from '../results.ts';
import { baseSpec, choiceOf, strategyScale } from './style.ts';

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
  // wlb's points carry the baseline it picked: its line lies on that baseline's and needs a name,
  // written where the pick changes (and at the first world) so that labels do not pile up.
  const lastPick = new Map<string, string>();
  const values = points.flatMap((p) => {
    const c = choiceOf(p.config);
    const changed = c !== undefined && lastPick.get(p.strategy) !== c;
    if (c !== undefined) lastPick.set(p.strategy, c);
    const note = changed ? `${p.strategy} = ${c}` : '';
    return [
      { strategy: p.strategy, world: p.world, phase: 'forward', mfu: p.mfuForward, note },
      { strategy: p.strategy, world: p.world, phase: 'backward', mfu: p.mfuBackward, note },
    ];
  });
  const noted = values.some((v) => v.note !== '');
  const x = {
    field: 'world',
    type: 'quantitative',
    scale: { type: 'log', base: 2 },
    axis: { values: worlds, format: 'd' },
    title: 'ranks',
  } as const;
  const y = {
    field: 'mfu',
    type: 'quantitative',
    title: 'attention MFU (simulated)',
    axis: { format: '.2f' },
  } as const;
  const lines = {
    mark: { type: 'line', point: true },
    encoding: {
      x,
      y,
      color: {
        field: 'strategy',
        type: 'nominal',
        scale: strategyScale(strategies),
        title: 'strategy',
        legend: { symbolType: 'stroke', symbolStrokeWidth: 3 },
      },
      // Dash patterns too: strategies with equal numbers (wlb picks ring or bytescale) would hide each other.
      strokeDash: {
        field: 'strategy',
        type: 'nominal',
        scale: { domain: strategies, range: strategies.map((_, i) => DASHES[i % DASHES.length]!) },
        title: 'strategy',
      },
    },
  };
  const notes = {
    transform: [{ filter: "datum.note !== ''" }],
    mark: { type: 'text', dx: 4, dy: -8, align: 'left', fontSize: 9, color: '#7a4f6d' },
    encoding: { x, y, text: { field: 'note', type: 'nominal' } },
  };
  return {
    ...baseSpec(`Weak scaling (${Math.round(tokensPerRank / 1024)}K tokens per rank)`),
    data: { values },
    facet: {
      column: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'], title: null },
    },
    spec: {
      width: 260,
      height: 210,
      layer: noted ? [lines, notes] : [lines],
    },
  } as TopLevelSpec;
}

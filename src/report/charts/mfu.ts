/** Attention MFU per strategy, forward and backward side by side (main run). */
import type { TopLevelSpec } from 'vega-lite';
import type { StrategyRun } from '../results.ts';
import { baseSpec, strategyScale } from './style.ts';

/** One bar per (strategy, phase) of the runs that produced numbers. */
export function mfuSpec(runs: readonly StrategyRun[]): TopLevelSpec {
  const ok = runs.filter((r) => r.error === undefined);
  const strategies = ok.map((r) => r.strategy);
  const values = ok.flatMap((r) => [
    { strategy: r.strategy, phase: 'forward', mfu: r.mfuForward },
    { strategy: r.strategy, phase: 'backward', mfu: r.mfuBackward },
  ]);
  const world = runs[0]?.world ?? 0;
  return {
    ...baseSpec(`Attention MFU per strategy (${world} ranks, simulated)`),
    data: { values },
    width: { step: 34 },
    height: 220,
    encoding: {
      x: { field: 'strategy', type: 'nominal', sort: strategies, title: null, axis: { labelAngle: 0 } },
      xOffset: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'] },
      y: { field: 'mfu', type: 'quantitative', title: 'MFU', axis: { format: '.0%' } },
    },
    layer: [
      {
        mark: { type: 'bar' },
        encoding: {
          color: { field: 'strategy', type: 'nominal', scale: strategyScale(strategies), legend: null },
          opacity: {
            field: 'phase',
            type: 'ordinal',
            sort: ['forward', 'backward'],
            scale: { domain: ['forward', 'backward'], range: [1, 0.55] },
            title: 'phase',
          },
        },
      },
      {
        mark: { type: 'text', dy: -6, fontSize: 10 },
        encoding: { text: { field: 'mfu', type: 'quantitative', format: '.2f' } },
      },
    ],
  };
}

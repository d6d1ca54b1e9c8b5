/** Compute and communication imbalance (max/mean - 1) per strategy. */
import type { TopLevelSpec } from 'vega-lite';
import type { StrategyRun } from '../results.ts';
import { baseSpec } from './style.ts';

/** Two bars per strategy: compute (attention work) and communication (bytes per rank). */
export function imbalanceSpec(runs: readonly StrategyRun[]): TopLevelSpec {
  const ok = runs.filter((r) => r.error === undefined);
  // Unique, in first-seen order: a sort list with one entry per run makes vega compile an expression
  // that overflows the stack for 1000+ runs.
  const strategies = [...new Set(ok.map((r) => r.strategy))];
  const values = ok.flatMap((r) => [
    { strategy: r.strategy, metric: 'compute', imbalance: r.computeImbalance },
    { strategy: r.strategy, metric: 'communication', imbalance: r.commImbalance },
  ]);
  return {
    ...baseSpec('Load imbalance per rank (max / mean - 1)'),
    data: { values },
    width: { step: 34 },
    height: 220,
    encoding: {
      x: { field: 'strategy', type: 'nominal', sort: strategies, title: null, axis: { labelAngle: 0 } },
      xOffset: { field: 'metric', type: 'nominal', sort: ['compute', 'communication'] },
      y: { field: 'imbalance', type: 'quantitative', title: 'imbalance', axis: { format: '.0%' } },
    },
    layer: [
      {
        mark: { type: 'bar' },
        encoding: {
          color: {
            field: 'metric',
            type: 'nominal',
            sort: ['compute', 'communication'],
            scale: { domain: ['compute', 'communication'], range: ['#6b8e23', '#ff7f0e'] },
            title: null,
          },
        },
      },
      {
        mark: { type: 'text', dy: -6, fontSize: 10 },
        encoding: { text: { field: 'imbalance', type: 'quantitative', format: '.0%' } },
      },
    ],
  };
}

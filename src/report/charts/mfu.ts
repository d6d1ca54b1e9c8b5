/** Attention MFU per strategy, forward and backward side by side (main run). */
import type { TopLevelSpec } from 'vega-lite';
import type { StrategyRun } from '../results.ts';
import { baseSpec, choiceOf, strategyScale } from './style.ts';

/** One bar per (strategy, phase) of the runs that produced numbers. */
export function mfuSpec(runs: readonly StrategyRun[]): TopLevelSpec {
  const ok = runs.filter((r) => r.error === undefined);
  // Unique, in first-seen order: a sort list with one entry per run makes vega compile an expression
  // that overflows the stack for 1000+ runs.
  const strategies = [...new Set(ok.map((r) => r.strategy))];
  // wlb's bar says which plan it is (`wlb = ring`): its bar equals that baseline's otherwise unexplained.
  const label = (r: StrategyRun): string => {
    const c = choiceOf(r.config);
    return c ? `${r.strategy} = ${c}` : r.strategy;
  };
  const labels = [...new Set(ok.map(label))];
  const values = ok.flatMap((r) => [
    { strategy: r.strategy, label: label(r), phase: 'forward', mfu: r.mfuForward },
    { strategy: r.strategy, label: label(r), phase: 'backward', mfu: r.mfuBackward },
  ]);
  const world = runs[0]?.world ?? 0;
  return {
    ...baseSpec(`Attention MFU per strategy (${world} ranks, simulated)`),
    data: { values },
    width: { step: 40 },
    height: 220,
    encoding: {
      x: { field: 'label', type: 'nominal', sort: labels, title: null, axis: { labelAngle: 0 } },
      xOffset: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'] },
      y: { field: 'mfu', type: 'quantitative', title: 'attention MFU (simulated)', axis: { format: '.2f' } },
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

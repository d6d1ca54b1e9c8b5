/** Bytes moved per strategy, stacked by transfer kind, one panel per phase. */
import type { TopLevelSpec } from 'vega-lite';
import type { StrategyRun } from '../results.ts';
import { baseSpec, kindScale } from './style.ts';

const KINDS = ['in', 'kv', 'dkv', 'out'];

/** GB (10^9 bytes) per (strategy, phase, kind); zero rows are dropped. */
export function bytesSpec(runs: readonly StrategyRun[]): TopLevelSpec {
  const ok = runs.filter((r) => r.error === undefined);
  // Unique, in first-seen order: a sort list with one entry per run makes vega compile an expression
  // that overflows the stack for 1000+ runs.
  const strategies = [...new Set(ok.map((r) => r.strategy))];
  const values = ok.flatMap((r) =>
    r.bytes
      .filter((b) => b.bytes > 0)
      .map((b) => ({ strategy: r.strategy, phase: b.phase, kind: b.kind, gb: b.bytes / 1e9 })),
  );
  const kinds = [...KINDS, ...new Set(values.map((v) => v.kind).filter((k) => !KINDS.includes(k)))];
  return {
    ...baseSpec('Bytes moved, by transfer kind'),
    data: { values },
    facet: { column: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'], title: null } },
    spec: {
      width: { step: 30 },
      height: 200,
      mark: { type: 'bar' },
      encoding: {
        x: { field: 'strategy', type: 'nominal', sort: strategies, title: null, axis: { labelAngle: -30 } },
        y: { field: 'gb', type: 'quantitative', title: 'GB', stack: 'zero' },
        color: {
          field: 'kind',
          type: 'nominal',
          scale: kindScale(kinds),
          title: 'kind',
        },
        order: { field: 'kind', sort: 'ascending' },
        tooltip: [
          { field: 'strategy', type: 'nominal' },
          { field: 'kind', type: 'nominal' },
          { field: 'gb', type: 'quantitative', format: '.3f' },
        ],
      },
    },
  };
}

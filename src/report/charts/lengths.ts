/**
 * The batch's length distribution: sequences and tokens per power-of-two length bucket. The two
 * panels tell the long-tail story: most sequences are short, most tokens (and far more attention
 * work) sit in the few long ones.
 */
import type { TopLevelSpec } from 'vega-lite';
import { shortTokens } from '../extract.ts';
import type { ProblemSummary } from '../results.ts';
import { baseSpec } from './style.ts';

/** Bars per bucket [lo, 2 lo): left the number of sequences, right the share of tokens. */
export function lengthsSpec(p: ProblemSummary): TopLevelSpec {
  const buckets = p.lengthHistogram;
  const labels = buckets.map((b) => `${shortTokens(b.lo)}-${shortTokens(2 * b.lo)}`);
  const total = Math.max(1, p.totalTokens);
  const values = buckets.flatMap((b, i) => [
    { bucket: labels[i]!, measure: 'sequences', value: b.count, text: String(b.count) },
    {
      bucket: labels[i]!,
      measure: 'share of tokens',
      value: b.tokens / total,
      text: `${((100 * b.tokens) / total).toFixed(0)}%`,
    },
  ]);
  return {
    ...baseSpec(
      `Sequence lengths of the batch (${p.sequences} sequences, longest ${shortTokens(p.longest)})`,
    ),
    data: { values },
    facet: {
      column: { field: 'measure', type: 'nominal', sort: ['sequences', 'share of tokens'], title: null },
    },
    resolve: { scale: { y: 'independent' } },
    spec: {
      width: { step: 26 },
      height: 180,
      encoding: {
        x: {
          field: 'bucket',
          type: 'ordinal',
          sort: labels,
          title: 'length (tokens)',
          axis: { labelAngle: -40 },
        },
        y: { field: 'value', type: 'quantitative', title: null },
      },
      layer: [
        { mark: { type: 'bar', color: '#4e79a7' } },
        {
          mark: { type: 'text', dy: -5, fontSize: 9 },
          encoding: { text: { field: 'text', type: 'nominal' } },
        },
      ],
    },
  } as TopLevelSpec;
}

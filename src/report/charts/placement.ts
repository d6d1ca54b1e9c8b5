/**
 * Placement heatmap: tokens of each sequence (longest first; short ones grouped by length class) on
 * each rank, from a plan's home layout. FCP spreads long sequences across many ranks and packs
 * short ones whole.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { Placement } from '../results.ts';
import { baseSpec } from './style.ts';

/** Ranks on x, placement rows on y, colour = tokens (log scale). */
export function placementSpec(p: Placement): TopLevelSpec {
  const labels = p.rows.map((r) => r.label);
  const values = p.cells.map((c) => ({
    rank: c.rank,
    row: p.rows[c.row]?.label ?? `row ${c.row}`,
    tokens: c.tokens,
  }));
  const step = Math.max(4, Math.min(14, Math.floor(760 / Math.max(1, p.world))));
  return {
    ...baseSpec(`Placement of ${p.strategy}: tokens of each sequence on each rank (home layout)`),
    data: { values },
    width: { step },
    height: { step: 14 },
    mark: { type: 'rect', aria: false },
    encoding: {
      x: {
        field: 'rank',
        type: 'ordinal',
        scale: { domain: Array.from({ length: p.world }, (_, r) => r) },
        axis: {
          labelAngle: 0,
          labelExpr: `datum.value % ${p.world > 32 ? 8 : p.world > 8 ? 2 : 1} === 0 ? datum.label : ''`,
        },
        title: 'rank',
      },
      y: { field: 'row', type: 'ordinal', sort: labels, title: 'sequence (longest first)' },
      color: {
        field: 'tokens',
        type: 'quantitative',
        scale: { type: 'log', scheme: 'viridis', reverse: true },
        title: 'tokens',
        legend: { format: '~s' },
      },
      tooltip: [
        { field: 'row', type: 'nominal', title: 'sequence' },
        { field: 'rank', type: 'ordinal' },
        { field: 'tokens', type: 'quantitative' },
      ],
    },
  };
}

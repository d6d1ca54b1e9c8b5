/**
 * Per-rank memory of every strategy's plan: home tokens (bars, dark) and the peak with K/V held from
 * receptions (bars, light), against the memory budget (a red rule). One strip per strategy.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { RankMemory } from '../results.ts';
import { baseSpec } from './style.ts';

/** Ranks on x, tokens on y; one row per strategy. */
export function memorySpec(memory: readonly RankMemory[]): TopLevelSpec {
  const strategies = memory.map((m) => m.strategy);
  const values: Record<string, string | number>[] = [];
  for (const m of memory)
    for (let r = 0; r < m.world; r++) {
      const limit = m.limitTokens;
      values.push({
        strategy: m.strategy,
        rank: r,
        what: 'peak (home + K/V held)',
        tokens: m.peak[r] ?? 0,
        limit,
      });
      values.push({ strategy: m.strategy, rank: r, what: 'home tokens', tokens: m.home[r] ?? 0, limit });
    }
  const world = memory[0]?.world ?? 0;
  const every = world > 64 ? 32 : world > 16 ? 8 : world > 8 ? 2 : 1;
  return {
    ...baseSpec(`Tokens resident per rank (budget ${memory[0]?.limitTokens ?? 0} tokens per rank, dashed)`),
    data: { values },
    facet: {
      row: {
        field: 'strategy',
        type: 'nominal',
        sort: strategies,
        title: null,
        header: { labelAngle: 0, labelAlign: 'left', labelFontWeight: 'bold' },
      },
    },
    spacing: 8,
    spec: {
      width: 860,
      height: 60,
      layer: [
        {
          mark: { type: 'bar', aria: false },
          encoding: {
            x: {
              field: 'rank',
              type: 'ordinal',
              scale: { paddingInner: world > 64 ? 0 : 0.1 },
              axis: {
                labelAngle: 0,
                labelExpr: `datum.value % ${every} === 0 ? datum.label : ''`,
                ticks: false,
              },
              title: 'rank',
            },
            y: {
              field: 'tokens',
              type: 'quantitative',
              stack: null,
              title: 'tokens',
              axis: { format: '~s', tickCount: 3 },
            },
            color: {
              field: 'what',
              type: 'nominal',
              sort: ['peak (home + K/V held)', 'home tokens'],
              scale: { domain: ['peak (home + K/V held)', 'home tokens'], range: ['#a0cbe8', '#1f3a68'] },
              title: null,
              legend: { orient: 'top', labelLimit: 300 },
            },
            order: { field: 'what', sort: 'descending' },
          },
        },
        {
          mark: { type: 'rule', color: '#c0392b', strokeDash: [4, 3] },
          encoding: { y: { field: 'limit', type: 'quantitative', aggregate: 'max' } },
        },
      ],
    },
  } as TopLevelSpec;
}

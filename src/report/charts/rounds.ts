/**
 * Round structure of one phase: messages each rank sends and receives in each round. A
 * congestion-free schedule (FCP) shows at most one message per cell; anything above is incast or
 * a busy sender.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { RoundStructure } from '../results.ts';
import { baseSpec } from './style.ts';

/** A run of consecutive rounds in which one rank sends (or receives) the same number of messages. */
export interface RoundSegment {
  round: number;
  roundEnd: number;
  rank: number;
  rankEnd: number;
  direction: 'sends' | 'receives';
  messages: number;
}

/**
 * Cells merged along the round axis: consecutive rounds of one rank and direction with the same
 * count become one segment [round, roundEnd). Same picture, a fraction of the SVG elements (a busy
 * rank of a congestion-free schedule is one segment instead of one cell per round).
 */
export function roundSegments(r: RoundStructure): RoundSegment[] {
  const out: RoundSegment[] = [];
  for (const direction of ['sends', 'receives'] as const) {
    const cells = r.cells
      .filter((c) => c[direction] > 0)
      .sort((a, b) => a.rank - b.rank || a.round - b.round);
    let cur: RoundSegment | undefined;
    for (const c of cells) {
      const n = c[direction];
      if (cur && cur.rank === c.rank && cur.roundEnd === c.round && cur.messages === n) {
        cur.roundEnd++;
        continue;
      }
      cur = {
        round: c.round,
        roundEnd: c.round + 1,
        rank: c.rank,
        rankEnd: c.rank + 1,
        direction,
        messages: n,
      };
      out.push(cur);
    }
  }
  return out;
}

/** Rounds on x, ranks on y; left panel sends, right panel receives; colour = messages. */
export function roundsSpec(r: RoundStructure): TopLevelSpec {
  const values = roundSegments(r);
  let maxMessages = 1;
  for (const v of values) maxMessages = Math.max(maxMessages, v.messages); // no spread: segments can be many
  const width = Math.min(380, Math.max(120, r.rounds * 6));
  const height = Math.min(320, Math.max(100, r.world * 5));
  return {
    ...baseSpec(
      `Round structure of ${r.strategy}, ${r.phase}: messages per rank per round (${r.rounds} rounds)`,
    ),
    data: { values },
    facet: { column: { field: 'direction', type: 'nominal', sort: ['sends', 'receives'], title: null } },
    spec: {
      width,
      height,
      mark: { type: 'rect', aria: false },
      encoding: {
        x: {
          field: 'round',
          type: 'quantitative',
          scale: { domain: [0, Math.max(1, r.rounds)], nice: false },
          axis: { format: 'd', tickMinStep: 1 },
          title: 'round',
        },
        x2: { field: 'roundEnd' },
        y: {
          field: 'rank',
          type: 'quantitative',
          scale: { domain: [0, Math.max(1, r.world)], reverse: true, nice: false },
          axis: { format: 'd', tickMinStep: 1 },
          title: 'rank',
        },
        y2: { field: 'rankEnd' },
        color: {
          field: 'messages',
          type: 'ordinal',
          scale: {
            domain: Array.from({ length: maxMessages }, (_, i) => i + 1),
            scheme: maxMessages === 1 ? 'tableau10' : 'orangered',
          },
          title: 'messages',
        },
        tooltip: [
          { field: 'round', type: 'quantitative' },
          { field: 'rank', type: 'quantitative' },
          { field: 'messages', type: 'quantitative' },
        ],
      },
    },
  };
}

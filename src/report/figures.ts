/**
 * The report's figures: which charts the results call for, each with a file name, a title, a
 * caption saying what to look for, and its vega-lite spec. Pure: results in, specs out.
 */
import type { TopLevelSpec } from 'vega-lite';
import { bytesSpec } from './charts/bytes.ts';
import { imbalanceSpec } from './charts/imbalance.ts';
import { mfuSpec } from './charts/mfu.ts';
import { placementSpec } from './charts/placement.ts';
import { roundsSpec } from './charts/rounds.ts';
import { scalingSpec } from './charts/scaling.ts';
import { timelineSpec } from './charts/timeline.ts';
import type { Results } from './results.ts';

/** One figure of the report. */
export interface Figure {
  /** File stem of the PNG copy and anchor id, e.g. `mfu`. */
  id: string;
  title: string;
  caption: string;
  spec: TopLevelSpec;
}

/** The figures the results call for, in report order (figures without data are left out). */
export function figuresOf(r: Results): Figure[] {
  const out: Figure[] = [];
  const runs = r.runs.filter((x) => x.error === undefined);
  if (runs.length > 0) {
    out.push({
      id: 'mfu',
      title: 'Attention MFU',
      caption:
        'Useful attention FLOPs over the cluster peak times the simulated makespan. Padding and masked work earn nothing.',
      spec: mfuSpec(r.runs),
    });
  }
  if (r.scaling.length > 0)
    out.push({
      id: 'scaling',
      title: 'Weak scaling',
      caption:
        'Same tokens per rank, more ranks: longer sequences appear and a strategy that cannot balance them loses MFU.',
      spec: scalingSpec(r.scaling, r.problem.tokensPerRank),
    });
  if (runs.length > 0) {
    out.push({
      id: 'imbalance',
      title: 'Compute and communication imbalance',
      caption:
        'Busiest rank over the average rank, minus one: the attention work (compute) and the bytes a rank sends plus receives (communication).',
      spec: imbalanceSpec(r.runs),
    });
    out.push({
      id: 'bytes',
      title: 'Bytes moved',
      caption:
        'in / out: the reshuffle between the user layout and the home layout; kv: keys and values fetched; dkv: gradient partials pushed home.',
      spec: bytesSpec(r.runs),
    });
  }
  if (r.timelines.length > 0)
    out.push({
      id: 'timeline',
      title: 'Per-rank timeline',
      caption:
        'Simulated compute and communication streams of every rank. Gaps in the top lane are ranks waiting for data.',
      spec: timelineSpec(r.timelines),
    });
  if (r.placement)
    out.push({
      id: 'placement',
      title: 'Placement',
      caption:
        'Where the plan puts each sequence: long sequences are cut into blocks spread over many ranks, short ones stay whole.',
      spec: placementSpec(r.placement),
    });
  for (const rs of r.rounds)
    out.push({
      id: `rounds-${rs.strategy}-${rs.phase}`,
      title: `Round structure (${rs.strategy}, ${rs.phase})`,
      caption:
        'Each round is a matching: a congestion-free schedule has at most one message per rank per round, so no link is oversubscribed.',
      spec: roundsSpec(rs),
    });
  return out;
}

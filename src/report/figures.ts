/**
 * The report's figures: which charts the results call for, each with a file name, a title, a
 * caption saying what to look for, and its vega-lite spec. Pure: results in, specs out.
 */
import type { TopLevelSpec } from 'vega-lite';
import { ablationSpec } from './charts/ablation.ts';
import { busySpec } from './charts/busy.ts';
import { bytesSpec } from './charts/bytes.ts';
import { imbalanceSpec } from './charts/imbalance.ts';
import { lengthsSpec } from './charts/lengths.ts';
import { memorySpec } from './charts/memory.ts';
import { mfuSpec } from './charts/mfu.ts';
import { placementSpec } from './charts/placement.ts';
import { roundsSpec } from './charts/rounds.ts';
import { scalingSpec } from './charts/scaling.ts';
import { choiceOf } from './charts/style.ts';
import { timelineSpec } from './charts/timeline.ts';
import { PAPER_ABLATION_WORLD } from './paper.ts';
import type { Results, Timeline } from './results.ts';

/** One figure of the report. */
export interface Figure {
  /** File stem of the PNG copy and anchor id, e.g. `mfu`. */
  id: string;
  title: string;
  caption: string;
  spec: TopLevelSpec;
  /**
   * Figures sharing a tab group are alternatives (e.g. the forward and backward timeline): the page
   * shows one at a time with a selector, `tab` being this figure's label on it.
   */
  tabs?: { group: string; tab: string };
}

/** The caption sentence saying which ranks a set of timelines draws. */
export function ranksCaption(timelines: readonly Timeline[]): string {
  const samples = [...new Set(timelines.map((t) => t.sample).filter((s): s is string => s !== undefined))];
  const t = timelines[0];
  if (!t) return '';
  if (samples.length === 0)
    return t.ranks >= t.world
      ? `Every rank (${t.world}) is drawn.`
      : `Ranks 0-${t.ranks - 1} of ${t.world} are drawn.`;
  // The sample differs between strategies only in the critical rank: say so once.
  return `Drawn: ${samples[0]}${samples.length > 1 ? ' (the last rank to finish is per strategy, see the rank axis)' : ''}. The busy-share figure below covers every rank.`;
}

/** wlb's choices at each world size, for captions: `wlb chose ring at 16 and bytescale at 64, 128`. */
function choicesCaption(r: Results): string {
  const byChoice = new Map<string, number[]>();
  for (const p of r.scaling) {
    const c = choiceOf(p.config);
    if (!c) continue;
    const list = byChoice.get(`${p.strategy}\u0000${c}`) ?? [];
    list.push(p.world);
    byChoice.set(`${p.strategy}\u0000${c}`, list);
  }
  if (byChoice.size === 0) return '';
  const parts = [...byChoice].map(([k, worlds]) => {
    const [s, c] = k.split('\u0000');
    return `${s} runs ${c}'s plan at ${worlds.sort((a, b) => a - b).join(', ')} ranks`;
  });
  return ` ${parts.join('; ')} (its line lies on that baseline's; the labels say which).`;
}

/** The figures the results call for, in report order (figures without data are left out). */
export function figuresOf(r: Results): Figure[] {
  const out: Figure[] = [];
  const runs = r.runs.filter((x) => x.error === undefined);
  const cluster = r.problem.cluster;
  if (runs.length > 0) {
    out.push({
      id: 'mfu',
      title: 'Attention MFU',
      caption: `Simulated on ${cluster}: useful attention FLOPs over the cluster peak times the simulated makespan. Padding and masked work earn nothing. A strategy that picks another's plan is labelled with its pick.`,
      spec: mfuSpec(r.runs),
    });
  }
  if (r.scaling.length > 0)
    out.push({
      id: 'scaling',
      title: 'Weak scaling',
      caption: `Same tokens per rank, more ranks (simulated on ${cluster}): longer sequences appear and a strategy that cannot balance them loses MFU.${choicesCaption(r)}`,
      spec: scalingSpec(r.scaling, r.problem.tokensPerRank),
    });
  if (r.ablation && r.ablation.steps.length > 0)
    out.push({
      id: 'ablation',
      title: 'Ablation (the paper\u2019s Table 2)',
      caption: `Each bar adds one of FCP's techniques to the previous one. Grey: the paper's numbers (real GPUs, ${PAPER_ABLATION_WORLD} GPUs); orange: ours, simulated on ${cluster} at ${r.ablation.world} ranks.`,
      spec: ablationSpec(r.ablation, cluster),
    });
  if (runs.length > 0 && r.origin !== 'compare') {
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
  const picks: Record<string, string> = {};
  for (const x of runs) {
    const c = choiceOf(x.config);
    if (c) picks[x.strategy] = `running ${c}'s plan`;
  }
  for (const phase of ['forward', 'backward'] as const) {
    const tls = r.timelines.filter((t) => t.phase === phase);
    if (tls.length === 0) continue;
    out.push({
      id: `timeline-${phase}`,
      title: `Per-rank timeline (${phase})`,
      caption: `Simulated compute (upper lane) and communication (lower lane) of each drawn rank; gaps in the upper lane are a rank waiting for data. Each strategy has its own time axis (its makespan is in its header). ${ranksCaption(tls)}`,
      spec: timelineSpec(tls, phase, picks),
      tabs: { group: 'timeline', tab: phase },
    });
  }
  if (r.busy && r.busy.length > 0)
    out.push({
      id: 'busy',
      title: 'Busy ranks over time',
      caption:
        'Share of all ranks computing (navy area) and communicating (orange line) over each phase, simulated. A flat area near 1 up to the end is a balanced, well-overlapped plan; a long tail is ranks waiting for the slowest.',
      spec: busySpec(r.busy),
    });
  if (r.memory && r.memory.length > 0)
    out.push({
      id: 'memory',
      title: 'Memory per rank',
      caption:
        "Tokens a rank holds by the plan's model: its home tokens (dark), and at peak also the K/V it received and still needs (light; the validator's resident-token model, K/V of a token counted as one token). The dashed line is the memory budget (--memory-tokens) that bounds home tokens; received K/V comes on top of it.",
      spec: memorySpec(r.memory),
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
        'Each round is a matching: a congestion-free schedule has at most one message per rank, link class (NVLink, the network) and round, so no link is oversubscribed.',
      spec: roundsSpec(rs),
    });
  if (r.problem.lengthHistogram.length > 0)
    out.push({
      id: 'lengths',
      title: 'Length distribution of the batch',
      caption:
        'Sequences per power-of-two length bucket, and the share of the batch\u2019s tokens in each: the long tail holds few sequences but much of the tokens, and more of the attention work (quadratic in length).',
      spec: lengthsSpec(r.problem),
    });
  return out;
}

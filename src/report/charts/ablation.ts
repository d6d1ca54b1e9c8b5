/**
 * FCP's ablation beside the paper's Table 2: one pair of bars per step (the paper's, real GPUs at
 * 128; ours, simulated at the demo's world), forward and backward panels.
 */
import type { TopLevelSpec } from 'vega-lite';
import { PAPER_ABLATION, PAPER_ABLATION_WORLD } from '../paper.ts';
import type { Ablation } from '../results.ts';
import { baseSpec } from './style.ts';

/** Steps on x in their cumulative order; colour = source. */
export function ablationSpec(a: Ablation, cluster: string): TopLevelSpec {
  const ours = `ours, simulated (${a.world} ranks)`;
  const paper = `paper, Table 2 (${PAPER_ABLATION_WORLD} GPUs)`;
  const labels = a.steps.map((s) => s.label);
  const values: Record<string, string | number>[] = [];
  for (const s of a.steps) {
    const p = PAPER_ABLATION.find((x) => x.step === s.step);
    for (const phase of ['forward', 'backward'] as const) {
      values.push({
        step: s.label,
        phase,
        source: ours,
        mfu: phase === 'forward' ? s.mfuForward : s.mfuBackward,
      });
      if (p)
        values.push({
          step: s.label,
          phase,
          source: paper,
          mfu: phase === 'forward' ? p.mfuForward : p.mfuBackward,
        });
    }
  }
  return {
    ...baseSpec(`FCP ablation: attention MFU as each technique is added (ours on ${cluster})`),
    data: { values },
    facet: { column: { field: 'phase', type: 'nominal', sort: ['forward', 'backward'], title: null } },
    spec: {
      width: { step: 38 },
      height: 200,
      encoding: {
        x: {
          field: 'step',
          type: 'nominal',
          sort: labels,
          title: null,
          axis: { labelAngle: -30, labelLimit: 240 },
        },
        xOffset: { field: 'source', type: 'nominal', sort: [paper, ours] },
        y: {
          field: 'mfu',
          type: 'quantitative',
          title: 'attention MFU',
          scale: { domain: [0, 1] },
          axis: { format: '.1f' },
        },
      },
      layer: [
        {
          mark: { type: 'bar' },
          encoding: {
            color: {
              field: 'source',
              type: 'nominal',
              sort: [paper, ours],
              scale: { domain: [paper, ours], range: ['#bab0ac', '#d95f02'] },
              title: null,
              legend: { orient: 'top', labelLimit: 320 },
            },
          },
        },
        {
          mark: { type: 'text', dy: -5, fontSize: 9 },
          encoding: { text: { field: 'mfu', type: 'quantitative', format: '.2f' } },
        },
      ],
    },
  } as TopLevelSpec;
}

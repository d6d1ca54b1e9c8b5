/**
 * Numbers of the FCP paper (Zhao et al., "Flexible Context Parallelism", MLSys 2026) that the report
 * sets beside ours. They were measured on real GPUs ("GPU-X" clusters); ours are simulated, so the
 * report always labels the two columns. Copied from the paper's Table 2 and Figure 11 (see
 * docs/results.md).
 */

/** One step of the paper's Table 2 (ablation at 128 GPUs), forward and backward attention MFU. */
export interface PaperAblationStep {
  /** Matches the demo's ablation step keys. */
  step: string;
  label: string;
  mfuForward: number;
  mfuBackward: number;
}

/** GPUs of the paper's ablation. */
export const PAPER_ABLATION_WORLD = 128;

/** The paper's Table 2, cumulative: each step adds one technique to the previous one. */
export const PAPER_ABLATION: readonly PaperAblationStep[] = [
  { step: 'base', label: 'no pipeline', mfuForward: 0.29, mfuBackward: 0.37 },
  { step: 'pipeline', label: '+ block pipeline', mfuForward: 0.48, mfuBackward: 0.46 },
  { step: 'rounds', label: '+ congestion-free rounds', mfuForward: 0.62, mfuBackward: 0.59 },
  { step: 'coalesce', label: '+ coalescing', mfuForward: 0.7, mfuBackward: 0.69 },
  { step: 'reshuffle', label: '+ reshuffler', mfuForward: 0.75, mfuBackward: 0.74 },
];

/** The paper's Figure 11: FCP's attention-MFU speedup over the four baselines, 16 to 256 GPUs. */
export const PAPER_SPEEDUP = { min: 1.13, max: 2.21, worlds: [16, 256] as const };

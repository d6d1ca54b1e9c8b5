/**
 * What `fcp compare` reports from its rows: the per-(strategy, world) summary over batches, the
 * printed tables (MFU, FCP's ratios, token imbalance, the baselines' chosen configurations), the
 * CSV and the chart specs. Pure functions of the rows; compare.ts plans, simulates and writes.
 */
import type { PlannerOptions } from '../planners/types.ts';
import { type LinePoint, lineChartSpec } from '../report/charts/line.ts';
import type { CsvTable } from './tables.ts';

/** One simulated (strategy, world, batch). */
export interface CompareRow {
  strategy: string;
  world: number;
  /** Batch index 0..batches-1 (seed = base seed + batch). */
  batch: number;
  seed: number;
  mfuForward: number;
  mfuBackward: number;
  /** Forward + backward. */
  mfu: number;
  makespans: { forwardMs: number; backwardMs: number };
  imbalances: { computeForward: number; commForward: number; computeBackward: number; commBackward: number };
  bytes: { forward: number; backward: number };
  kernelMfu: { forward: number; backward: number };
  /** Exposed communication per rank (communication in flight while the rank computes nothing), mean over ranks. */
  exposedCommMs: { forward: number; backward: number };
  /**
   * The same on the most exposed rank: the mean hides the one rank that waits (magi, 128 ranks,
   * mode (b): a mean of 0.0-0.1 ms while one rank waits 3.2 ms for a `kv` group; bench/fcp-gaps.ts).
   * Absent from compare.json files written before 2026-12-04.
   */
  maxExposedCommMs?: { forward: number; backward: number };
  /** Token imbalance (max/mean - 1) of the layout the rest of the model runs on (the plan's user layout). */
  tokenImbalance: number;
  /** The baseline knobs this row ran with (its defaults, or the winner of `--baselines best`). */
  config: PlannerOptions;
}

/** Mean, min and max over batches of one (strategy, world). */
export interface CompareSummary {
  strategy: string;
  world: number;
  batches: number;
  mfuForward: { mean: number; min: number; max: number };
  mfuBackward: { mean: number; min: number; max: number };
  computeImbalanceForward: number;
  commImbalanceForward: number;
  /** Mean token imbalance of the layout the rest of the model runs on. */
  tokenImbalance: number;
}

/** One line per (strategy, world) that has knobs: the configuration it ran with. */
export function formatConfigs(rows: readonly CompareRow[]): string {
  const lines = ['', 'baseline configurations (best by simulated time over the batches of each world)'];
  const seen = new Set<string>();
  for (const r of rows) {
    const k = `${r.strategy}:${r.world}`;
    if (seen.has(k) || Object.keys(r.config).length === 0) continue;
    seen.add(k);
    const knobs = Object.entries(r.config)
      .map(([n, v]) => `${n}=${v}`)
      .join(' ');
    lines.push(`${r.strategy.padEnd(10)} ${String(r.world).padStart(5)}  ${knobs}`);
  }
  return lines.join('\n');
}

const stat = (v: number[]): { mean: number; min: number; max: number } => ({
  mean: v.reduce((s, x) => s + x, 0) / v.length,
  min: Math.min(...v),
  max: Math.max(...v),
});

/** Mean/min/max per (strategy, world), in strategy then world order. */
export function summarise(
  rows: readonly CompareRow[],
  strategies: readonly string[],
  worlds: readonly number[],
): CompareSummary[] {
  const out: CompareSummary[] = [];
  for (const strategy of strategies)
    for (const world of worlds) {
      const sel = rows.filter((r) => r.strategy === strategy && r.world === world);
      if (sel.length === 0) continue;
      out.push({
        strategy,
        world,
        batches: sel.length,
        mfuForward: stat(sel.map((r) => r.mfuForward)),
        mfuBackward: stat(sel.map((r) => r.mfuBackward)),
        computeImbalanceForward: stat(sel.map((r) => r.imbalances.computeForward)).mean,
        commImbalanceForward: stat(sel.map((r) => r.imbalances.commForward)).mean,
        tokenImbalance: stat(sel.map((r) => r.tokenImbalance ?? 0)).mean,
      });
    }
  return out;
}

/** The printed table: mean forward/backward MFU per strategy (rows) and world size (columns). */
export function formatCompareTable(
  summary: readonly CompareSummary[],
  strategies: readonly string[],
  worlds: readonly number[],
): string {
  const cell = (s: string, w: number): string => {
    const x = summary.find((r) => r.strategy === s && r.world === w);
    return x ? `${x.mfuForward.mean.toFixed(3)}/${x.mfuBackward.mean.toFixed(3)}` : '-';
  };
  const sw = Math.max(8, ...strategies.map((s) => s.length));
  const lines = [
    `attention MFU forward/backward (mean over batches)`,
    `${'strategy'.padEnd(sw)}${worlds.map((w) => String(w).padStart(13)).join('')}`,
  ];
  for (const s of strategies)
    lines.push(`${s.padEnd(sw)}${worlds.map((w) => cell(s, w).padStart(13)).join('')}`);
  const fcp = strategies.includes('fcp') ? strategies.filter((s) => s !== 'fcp') : [];
  if (fcp.length > 0) {
    lines.push('', 'FCP speedup over each baseline (mean MFU ratio, forward/backward)');
    for (const s of fcp) {
      const cells = worlds.map((w) => {
        const a = summary.find((r) => r.strategy === 'fcp' && r.world === w);
        const b = summary.find((r) => r.strategy === s && r.world === w);
        // A ratio of MFUs that underflowed to 0 (absurd bandwidths, `--nic-gbps 1e-300`) is no number.
        const r = (x: number, y: number): string => (Number.isFinite(x / y) ? (x / y).toFixed(2) : '-');
        return a && b
          ? `${r(a.mfuForward.mean, b.mfuForward.mean)}/${r(a.mfuBackward.mean, b.mfuBackward.mean)}`
          : '-';
      });
      lines.push(`${s.padEnd(sw)}${cells.map((c) => c.padStart(13)).join('')}`);
    }
  }
  lines.push(
    '',
    'token imbalance of the layout the rest of the model runs on (max/mean - 1 of tokens per rank)',
  );
  for (const s of strategies)
    lines.push(
      `${s.padEnd(sw)}${worlds
        .map((w) => {
          const x = summary.find((r) => r.strategy === s && r.world === w);
          return (x ? `${(100 * x.tokenImbalance).toFixed(1)}%` : '-').padStart(13);
        })
        .join('')}`,
    );
  return lines.join('\n');
}

/** The summary as CSV: one row per (strategy, world); MFU as fractions, all simulated. */
export function compareCsv(summary: readonly CompareSummary[]): CsvTable {
  const header = [
    'strategy',
    'world',
    'batches',
    'mfu_forward_mean',
    'mfu_forward_min',
    'mfu_forward_max',
    'mfu_backward_mean',
    'mfu_backward_min',
    'mfu_backward_max',
    'compute_imbalance_forward',
    'comm_imbalance_forward',
    'token_imbalance',
  ];
  return [
    header,
    summary.map((s) => [
      s.strategy,
      s.world,
      s.batches,
      s.mfuForward.mean,
      s.mfuForward.min,
      s.mfuForward.max,
      s.mfuBackward.mean,
      s.mfuBackward.min,
      s.mfuBackward.max,
      s.computeImbalanceForward,
      s.commImbalanceForward,
      s.tokenImbalance,
    ]),
  ];
}

/** Chart specs of a comparison: MFU (forward and backward panels) and forward imbalances. */
export function compareCharts(
  summary: readonly CompareSummary[],
  strategies: readonly string[],
  batchName: string,
) {
  const mfu: LinePoint[] = [];
  const imb: LinePoint[] = [];
  for (const s of summary) {
    mfu.push({
      series: s.strategy,
      x: s.world,
      y: s.mfuForward.mean,
      lo: s.mfuForward.min,
      hi: s.mfuForward.max,
      panel: 'forward',
    });
    mfu.push({
      series: s.strategy,
      x: s.world,
      y: s.mfuBackward.mean,
      lo: s.mfuBackward.min,
      hi: s.mfuBackward.max,
      panel: 'backward',
    });
    imb.push({ series: s.strategy, x: s.world, y: s.computeImbalanceForward, panel: 'compute (time)' });
    imb.push({ series: s.strategy, x: s.world, y: s.commImbalanceForward, panel: 'communication (bytes)' });
  }
  return {
    mfu: lineChartSpec(mfu, {
      title: `Attention MFU, weak scaling (${batchName})`,
      xTitle: 'ranks',
      yTitle: 'attention MFU',
      logX: true,
      series: strategies,
      panels: ['forward', 'backward'],
    }),
    imbalance: lineChartSpec(imb, {
      title: `Forward imbalance, max/mean - 1 (${batchName})`,
      xTitle: 'ranks',
      yTitle: 'imbalance',
      logX: true,
      series: strategies,
      panels: ['compute (time)', 'communication (bytes)'],
    }),
  };
}

/**
 * The summary table (one row per strategy of the main run), shared by the demo's stdout and the
 * HTML report so both always show the same numbers.
 */
import type { Results, StrategyRun } from './results.ts';

/** Column headers of {@link summaryRows}. */
export const SUMMARY_HEADER = [
  'strategy',
  'valid',
  'MFU fwd',
  'MFU bwd',
  'fwd ms',
  'bwd ms',
  'compute imb',
  'comm imb',
  'GB moved',
  'rounds f/b',
  'congestion f/b',
  'numerics',
] as const;

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

/** Numerics verdict of a strategy: `ok`, `FAIL`, `error` or `-` (not run). */
export function numericsVerdict(r: Results, strategy: string): string {
  const n = r.numerics.runs.find((x) => x.strategy === strategy);
  if (!n) return '-';
  if (n.error !== undefined) return 'error';
  return n.ok ? 'ok' : 'FAIL';
}

/** One row of cells per strategy of the main run, formatted for people. */
export function summaryRows(r: Results): string[][] {
  return r.runs.map((s: StrategyRun) =>
    s.error !== undefined
      ? [
          s.strategy,
          s.valid ? 'yes' : 'NO',
          'error',
          '',
          '',
          '',
          '',
          '',
          '',
          '',
          '',
          numericsVerdict(r, s.strategy),
        ]
      : r.origin === 'compare'
        ? [
            // compare.json: no validation and no plan report; means over batches.
            s.strategy,
            'n/a',
            s.mfuForward.toFixed(3),
            s.mfuBackward.toFixed(3),
            s.forwardMs.toFixed(2),
            s.backwardMs.toFixed(2),
            pct(s.computeImbalance),
            pct(s.commImbalance),
            (s.totalBytes / 1e9).toFixed(2),
            '-',
            '-',
            '-',
          ]
        : [
            s.strategy,
            s.valid ? 'yes' : 'NO',
            s.mfuForward.toFixed(3),
            s.mfuBackward.toFixed(3),
            s.forwardMs.toFixed(2),
            s.backwardMs.toFixed(2),
            pct(s.computeImbalance),
            pct(s.commImbalance),
            (s.totalBytes / 1e9).toFixed(2),
            `${s.rounds.forward}/${s.rounds.backward}`,
            `${s.congestion.forward}/${s.congestion.backward}`,
            numericsVerdict(r, s.strategy),
          ],
  );
}

/** A plain-text table: columns padded, numbers right-aligned. */
export function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  // Loops, not argument spreads: a table may have thousands of rows.
  const widths = header.map((h, i) => {
    let w = h.length;
    for (const row of rows) w = Math.max(w, (row[i] ?? '').length);
    return w;
  });
  const numeric = (s: string): boolean => /^[-+]?[\d.]+(%|\/[\d.]+)?$/.test(s);
  // A column whose cells are numbers is right-aligned, header included.
  const right = header.map((_, i) => i > 0 && rows.some((row) => numeric(row[i] ?? '')));
  const line = (row: readonly string[]): string =>
    row
      .map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** The summary as text, for the terminal. */
export function summaryText(r: Results): string {
  return textTable(SUMMARY_HEADER, summaryRows(r));
}

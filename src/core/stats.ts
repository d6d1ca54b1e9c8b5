/**
 * Summary statistics shared by the plan report (rule 6) and the simulator, so that both define
 * "imbalance" the same way, and the median the torch executor, the demo and the benches report.
 */

/**
 * Load imbalance: max/mean - 1 over per-rank values (0 for no values or a zero mean). Computed as
 * max / (sum / n) - 1, in that order: the simulator always did so, and its committed results
 * (docs/results) then reproduce byte for byte.
 */
export function imbalance(values: ArrayLike<number>): number {
  const n = values.length;
  if (n === 0) return 0;
  let sum = 0;
  let max = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    sum += v;
    if (v > max) max = v;
  }
  const mean = sum / n;
  return mean > 0 ? max / mean - 1 : 0;
}

/** Median of `xs` (the mean of the two middle values for an even count; 0 for no values). */
export function median(xs: ArrayLike<number>): number {
  const s = Array.from(xs).sort((a, b) => a - b);
  if (s.length === 0) return 0;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

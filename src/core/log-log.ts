/**
 * Piecewise log-log linear interpolation through measured points, extended beyond them along the
 * nearest segment: what the planners' size models use to turn a few planning times measured at
 * some world sizes into a time at any world size (power laws between the points).
 */

/**
 * The value at `x` of the curve through (`xs[i]`, `ys[i]`) that is linear in log2-log2 space
 * between neighbouring points and extends the first / last segment beyond them. `xs` ascending,
 * at least two points, all values positive (asserted by the callers' constants); `x` below 1 is
 * read as 1.
 */
export function logLogInterpolate(xs: readonly number[], ys: readonly number[], x: number): number {
  const lx = Math.log2(Math.max(1, x));
  const n = xs.length;
  let i = 0;
  while (i < n - 2 && lx > Math.log2(xs[i + 1]!)) i++;
  const x0 = Math.log2(xs[i]!);
  const x1 = Math.log2(xs[i + 1]!);
  const y0 = Math.log2(ys[i]!);
  const y1 = Math.log2(ys[i + 1]!);
  return 2 ** (y0 + ((lx - x0) * (y1 - y0)) / (x1 - x0));
}

/**
 * Benchmark of the exact Δ-edge-colouring (König rounds) at planner scale.
 * Run: npx tsx bench/edge-coloring.ts
 *
 * Graphs: `random` = uniform sender/receiver pairs; `skewed` = every rank gets a lognormal
 * (sigma 1) weight as sender and another as receiver, edges drawn by weight; `zipf` = rank popularity
 * 1/(r+1)^0.8 on both sides (a few very hot ranks); `incast` = 5% of edges go to 8 hot receivers,
 * the rest uniform. Each row: one warm-up, then best and median of 5 runs; every result is checked.
 */
import { Rng } from '../src/core/rng.ts';
import { colorBipartiteEdges, maxDegree } from '../src/planners/fcp/transfers/edge-coloring.ts';

type Shape = 'random' | 'skewed' | 'zipf' | 'incast';

function cumulative(weights: Float64Array): Float64Array {
  const c = new Float64Array(weights.length);
  let sum = 0;
  for (let i = 0; i < weights.length; i++) {
    sum += weights[i]!;
    c[i] = sum;
  }
  for (let i = 0; i < c.length; i++) c[i]! /= sum;
  return c;
}

function pick(cdf: Float64Array, x: number): number {
  let lo = 0;
  let hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cdf[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function makeGraph(
  shape: Shape,
  n: number,
  edges: number,
  seed: number,
): { src: Int32Array; dst: Int32Array } {
  const rng = new Rng(seed);
  const src = new Int32Array(edges);
  const dst = new Int32Array(edges);
  const zipf = Float64Array.from({ length: n }, (_, i) => 1 / (i + 1) ** 0.8);
  const lognormal = () => Float64Array.from({ length: n }, () => rng.lognormal(1, 1));
  const cdfS = shape === 'zipf' ? cumulative(zipf) : shape === 'skewed' ? cumulative(lognormal()) : undefined;
  const cdfD = shape === 'zipf' ? cdfS : shape === 'skewed' ? cumulative(lognormal()) : undefined;
  // Random relabelling so that the heavy ranks are not all at the low ids.
  const perm = Int32Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(0, i);
    const t = perm[i]!;
    perm[i] = perm[j]!;
    perm[j] = t;
  }
  for (let e = 0; e < edges; e++) {
    let s: number;
    let d: number;
    do {
      if (cdfS !== undefined && cdfD !== undefined) {
        s = perm[pick(cdfS, rng.next())]!;
        d = perm[(pick(cdfD, rng.next()) + (n >>> 1)) % n]!;
      } else {
        s = rng.int(0, n - 1);
        d = shape === 'incast' && rng.next() < 0.05 ? perm[rng.int(0, 7)]! : rng.int(0, n - 1);
      }
    } while (s === d);
    src[e] = s;
    dst[e] = d;
  }
  return { src, dst };
}

function verify(src: Int32Array, dst: Int32Array, n: number, color: Int32Array, colors: number): void {
  const seen = new Uint8Array(n * colors * 2);
  for (let e = 0; e < src.length; e++) {
    const c = color[e]!;
    const a = src[e]! * colors + c;
    const b = n * colors + dst[e]! * colors + c;
    if (c < 0 || c >= colors || seen[a] || seen[b]) throw new Error(`bad colouring at edge ${e}`);
    seen[a] = 1;
    seen[b] = 1;
  }
}

const sizes: [number, number][] = [
  [256, 20_000],
  [1024, 100_000],
  [4096, 400_000],
  [4096, 1_000_000],
];
const shapes: Shape[] = ['random', 'skewed', 'zipf', 'incast'];
const cases = sizes.flatMap(([n, edges]) =>
  shapes.map((shape): [Shape, number, number] => [shape, n, edges]),
);

const rows: string[][] = [['shape', 'n', 'edges', 'Δ', 'ms (best)', 'ms (median)']];
for (const [shape, n, edges] of cases) {
  const { src, dst } = makeGraph(shape, n, edges, 1234 + n + edges);
  const delta = maxDegree(src, dst, n);
  const times: number[] = [];
  let result = colorBipartiteEdges(src, dst, n); // warm-up
  for (let run = 0; run < 5; run++) {
    const t0 = performance.now();
    result = colorBipartiteEdges(src, dst, n);
    times.push(performance.now() - t0);
  }
  verify(src, dst, n, result.color, result.colors);
  if (result.colors !== delta) throw new Error(`used ${result.colors} colours, Δ = ${delta}`);
  times.sort((a, b) => a - b);
  rows.push([shape, String(n), String(edges), String(delta), times[0]!.toFixed(1), times[2]!.toFixed(1)]);
}
const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
for (const r of rows)
  console.log(r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));

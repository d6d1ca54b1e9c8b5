/**
 * The rest of a transformer layer: what a rank pays per token outside attention (Q/K/V/O
 * projections and the MLP), so that a comparison can charge a strategy for the token imbalance of
 * the layout the rest of the model runs on. A Llama-style layer with hidden size d = qHeads *
 * headDim, K/V width kvHeads * headDim and a gated MLP of width `ffnRatio * d` does, per token,
 * 2 * (2 d^2 + 2 d kv + 3 d ffn) FLOPs forward and twice that backward. The dense GEMMs run at
 * `efficiency` of peak (an assumption, not a measurement: large bf16 GEMMs on Hopper reach
 * roughly 0.6-0.8 of dense peak).
 */
import type { ModelShape } from '../model/shape.ts';

/** Parameters of the rest of the layer. */
export interface DenseLayer {
  /** MLP width over hidden size (Llama-3-70B: 28672 / 8192 = 3.5). */
  readonly ffnRatio: number;
  /** Fraction of peak the dense GEMMs reach. */
  readonly efficiency: number;
}

/** Llama-3-70B's MLP ratio, GEMMs at 0.7 of peak. */
export const LLAMA_DENSE: DenseLayer = { ffnRatio: 3.5, efficiency: 0.7 };

/** FLOPs per token of the rest of one layer, forward. */
export function denseFlopsPerToken(m: ModelShape, d: DenseLayer = LLAMA_DENSE): number {
  const h = m.qHeads * m.headDim;
  const kv = m.kvHeads * m.headDim;
  return 2 * (2 * h * h + 2 * h * kv + 3 * h * d.ffnRatio * h);
}

/** Milliseconds a rank holding `tokens` spends outside attention in one layer (forward or backward). */
export function denseLayerMs(
  m: ModelShape,
  tokens: number,
  peakTflops: number,
  dir: 'forward' | 'backward',
  d: DenseLayer = LLAMA_DENSE,
): number {
  const flops = denseFlopsPerToken(m, d) * tokens * (dir === 'backward' ? 2 : 1);
  return (flops / (peakTflops * 1e12 * d.efficiency)) * 1e3;
}

/**
 * The attention a plan computes: the mask and the head shape. The bottom layer of the project:
 * imports nothing.
 */

/** Attention mask in sequence positions. `causal`: key position <= query position. */
export type Mask = 'causal' | 'full';

/** Attention shape. */
export interface ModelShape {
  readonly qHeads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly bytesPerElement: number;
}

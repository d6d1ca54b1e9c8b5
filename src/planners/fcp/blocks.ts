/**
 * Block split and zig-zag pairing (DESIGN.md, component 1).
 *
 * Every sequence is cut into blocks; blocks are grouped into placement units that the distributor
 * gives to ranks whole. Causal mask: the split is symmetric, k full blocks at each end and one
 * middle block holding the remainder (0 < middle < 2b, absent when 2b divides L), and block i of
 * the front is paired with its mirror at the back. A block starting at s with length b carries
 * b·s + b(b+1)/2 attended pairs, and its mirror starts at L - s - b, so every pair carries exactly
 * b·(L + 1) pairs whatever L is (with the remainder at the end, as in plain zig-zag, the first pair
 * would differ). The middle block stands alone. Full mask: consecutive blocks (the last shorter),
 * each its own unit (every block carries b·L pairs).
 *
 * Granularity ("Granularity matters" in DESIGN.md): a unit of a length-L sequence carries about
 * b·L pairs, so with b = 4K one unit of a 512K sequence can outweigh a whole rank's share. Unless
 * `fixedBlocks`, each sequence gets its own block size, the largest multiple of the minimum block
 * size (floor 256) not above `blockSize` that keeps its units under `maxUnitShare` of the per-rank
 * average compute. Blocks never exceed a quarter of a rank's memory (see {@link memoryBlockCap}).
 */
import { attendedPairs, sequencePairs } from '../../cluster/model.ts';
import type { Mask } from '../../plan/types.ts';
import type { FcpOptions } from './options.ts';

/** Blocks and placement units of a batch. Block ids of sequence s are seqBlocks[s]..seqBlocks[s+1]-1, by position. */
export interface Blocks {
  /** Per block: sequence, first token, length and unit. */
  readonly seq: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  readonly unit: Int32Array;
  /** CSR over sequences (length S+1). */
  readonly seqBlocks: Int32Array;
  /** Block size chosen for each sequence. */
  readonly blockSizeOfSeq: Int32Array;
  /** Per unit: sequence, tokens (memory load), attended pairs (compute load). Units of a sequence are consecutive. */
  readonly unitSeq: Int32Array;
  readonly unitTokens: Int32Array;
  readonly unitPairs: Float64Array;
  /** Units of each sequence: CSR over sequences (length S+1). */
  readonly seqUnits: Int32Array;
  /** Per unit: its first block and its second block (-1 for a unit of one block). */
  readonly unitBlockA: Int32Array;
  readonly unitBlockB: Int32Array;
  /** Attended pairs of the whole batch. */
  readonly totalPairs: number;
  /** Tokens of the whole batch. */
  readonly totalTokens: number;
}

/**
 * Block size for a sequence of length `len`: the largest multiple of `minBlockSize` in
 * [minBlockSize, blockSize] whose units carry at most `target` pairs (a causal pair carries
 * b·(len+1), a full-mask block b·len); `blockSize` itself when it already fits.
 */
export function refinedBlockSize(
  len: number,
  causal: boolean,
  target: number,
  o: FcpOptions,
  maxBlock = o.blockSize,
): number {
  const top = Math.min(o.blockSize, maxBlock);
  if (o.fixedBlocks) return top;
  const perToken = causal ? len + 1 : len;
  const fit = Math.floor(target / perToken);
  if (fit >= top) return top;
  const m = Math.min(o.minBlockSize, top);
  return Math.max(m, Math.floor(fit / m) * m);
}

/**
 * Largest block a rank's memory allows: a quarter of it, so that a unit (two blocks, or a middle
 * block shorter than two) takes at most half a rank's memory and units pack
 * (`--tokens-per-rank 1024` with the default 4096-token blocks would otherwise leave units that
 * fit nowhere).
 */
export const memoryBlockCap = (memoryTokens: number): number => Math.max(1, Math.floor(memoryTokens / 4));

/** Splits every sequence into blocks and units (see the module comment). */
export function splitBlocks(
  sequences: Int32Array,
  mask: Mask,
  world: number,
  o: FcpOptions,
  memoryTokens = Number.POSITIVE_INFINITY,
): Blocks {
  const maxBlock = memoryBlockCap(memoryTokens);
  const causal = mask === 'causal';
  const S = sequences.length;
  let totalPairs = 0;
  let totalTokens = 0;
  for (let s = 0; s < S; s++) {
    totalPairs += sequencePairs(causal, sequences[s]!);
    totalTokens += sequences[s]!;
  }
  const target = (o.maxUnitShare * totalPairs) / world;
  const blockSizeOfSeq = new Int32Array(S);
  const seqBlocks = new Int32Array(S + 1);
  const seqUnits = new Int32Array(S + 1);
  // First pass: sizes and counts, so that every table is allocated once.
  for (let s = 0; s < S; s++) {
    const len = sequences[s]!;
    const b = refinedBlockSize(len, causal, target, o, maxBlock);
    blockSizeOfSeq[s] = b;
    let blocks: number;
    let units: number;
    if (causal) {
      const k = Math.floor(len / (2 * b));
      const middle = len - 2 * k * b > 0 ? 1 : 0;
      blocks = 2 * k + middle;
      units = k + middle;
    } else {
      blocks = Math.ceil(len / b);
      units = blocks;
    }
    seqBlocks[s + 1] = seqBlocks[s]! + blocks;
    seqUnits[s + 1] = seqUnits[s]! + units;
  }
  const B = seqBlocks[S]!;
  const U = seqUnits[S]!;
  const seq = new Int32Array(B);
  const start = new Int32Array(B);
  const length = new Int32Array(B);
  const unit = new Int32Array(B);
  const unitSeq = new Int32Array(U);
  const unitTokens = new Int32Array(U);
  const unitPairs = new Float64Array(U);
  const unitBlockA = new Int32Array(U).fill(-1);
  const unitBlockB = new Int32Array(U).fill(-1);
  for (let s = 0; s < S; s++) {
    const len = sequences[s]!;
    const b = blockSizeOfSeq[s]!;
    let id = seqBlocks[s]!;
    const u0 = seqUnits[s]!;
    const put = (st: number, ln: number, u: number): void => {
      seq[id] = s;
      start[id] = st;
      length[id] = ln;
      unit[id] = u;
      if (unitBlockA[u]! < 0) unitBlockA[u] = id;
      else unitBlockB[u] = id;
      id++;
      unitSeq[u] = s;
      unitTokens[u]! += ln;
      unitPairs[u]! += attendedPairs(causal, st, ln, 0, len);
    };
    if (causal) {
      const k = Math.floor(len / (2 * b));
      const mid = len - 2 * k * b;
      for (let i = 0; i < k; i++) put(i * b, b, u0 + i);
      if (mid > 0) put(k * b, mid, u0 + k);
      for (let i = k - 1; i >= 0; i--) put(len - (i + 1) * b, b, u0 + i);
    } else {
      for (let i = 0, st = 0; st < len; i++, st += b) put(st, Math.min(b, len - st), u0 + i);
    }
  }
  return {
    seq,
    start,
    length,
    unit,
    seqBlocks,
    blockSizeOfSeq,
    unitSeq,
    unitTokens,
    unitPairs,
    seqUnits,
    unitBlockA,
    unitBlockB,
    totalPairs,
    totalTokens,
  };
}

/** Number of blocks. */
export const blockCount = (b: Blocks): number => b.seq.length;
/** Number of units. */
export const unitCount = (b: Blocks): number => b.unitSeq.length;

/**
 * Block split and zig-zag pairing (docs/design.md, FCP's planner).
 *
 * Every sequence is cut into blocks of its block size b aligned at position 0 (the last block
 * shorter), so that every block boundary of a sequence lies on one grid: the tiler (grid.ts) then
 * cuts any rank's attention into equal squares of the grid, the shape the dense kernels run
 * fastest, whatever blocks the other ranks hold. Blocks are grouped into placement units that the
 * distributor gives to ranks whole. Causal mask: block j of m is paired with its mirror m-1-j
 * (zig-zag), so that a unit carries about b·L attended pairs wherever it lies (exactly b·(L+1) when
 * b divides L; the unit holding the short last block carries less); the middle block of an odd
 * count stands alone. Full mask: every block is its own unit (each carries b·L pairs).
 *
 * Granularity (docs/design.md, FCP's planner): a unit of a length-L sequence carries about
 * b·L pairs, so with b = 4K one unit of a 512K sequence can outweigh a whole rank's share. Unless
 * `fixedBlocks`, each sequence gets its own block size, the largest of blockSize, blockSize/2,
 * blockSize/4, ... (not below the minimum block size) that keeps its units under `maxUnitShare` of
 * the per-rank average compute: halving keeps the grids of different block sizes nested, so tiles
 * of several blocks stay squares. Blocks never exceed what memory allows (see {@link memoryBlockCap}).
 */
import { iota } from '../../../core/gather.ts';
import { attendedPairs, sequencePairs } from '../../../model/attention.ts';
import type { Mask } from '../../../plan/types.ts';
import type { FcpOptions } from '../options.ts';
import type { SeqRows } from './seq-rows.ts';

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
 * Block size for a sequence of length `len`: the largest of blockSize / 2^k (k >= 0, floored, not
 * below `minBlockSize`) whose units carry at most `target` pairs (see {@link largestUnitPairs});
 * the smallest such size when none fits; never above `maxBlock`.
 */
export function refinedBlockSize(
  len: number,
  causal: boolean,
  target: number,
  o: FcpOptions,
  maxBlock = o.blockSize,
): number {
  let b = o.blockSize;
  const cap = Math.max(1, maxBlock);
  while (b > cap) b = Math.max(1, Math.floor(b / 2));
  if (o.fixedBlocks) return b;
  const floor = Math.min(o.minBlockSize, b);
  while (largestUnitPairs(len, b, causal) > target && Math.floor(b / 2) >= floor) b = Math.floor(b / 2);
  return b;
}

/**
 * Attended pairs of the largest unit of a length-`len` sequence cut into blocks of `b`: causal, a
 * pair of full blocks j and m-1-j carries b·(b·m + 1) (m = ceil(len / b) blocks), or the whole
 * sequence when it is one block; full mask, b·len.
 */
export function largestUnitPairs(len: number, b: number, causal: boolean): number {
  if (!causal) return Math.min(b, len) * len;
  const m = Math.ceil(len / b);
  return m >= 2 ? b * (b * m + 1) : (len * (len + 1)) / 2;
}

/**
 * Largest block a rank's memory allows: a quarter of it, so that a unit (two blocks, or a middle
 * block shorter than two) takes at most half a rank's memory and units pack
 * (`--tokens-per-rank 1024` with the default 4096-token blocks would otherwise leave units that
 * fit nowhere).
 */
export const memoryBlockCap = (memoryTokens: number): number => Math.max(1, Math.floor(memoryTokens / 4));

/**
 * Splits every sequence into blocks and units (see the module comment). `capDivisor` shrinks the
 * memory cap on block sizes (the planner retries with smaller blocks when units do not pack).
 */
export function splitBlocks(
  sequences: Int32Array,
  mask: Mask,
  world: number,
  o: FcpOptions,
  memoryTokens = Number.POSITIVE_INFINITY,
  capDivisor = 1,
): Blocks {
  const maxBlock = Math.max(1, Math.floor(memoryBlockCap(memoryTokens) / capDivisor));
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
    const blocks = Math.ceil(len / b);
    seqBlocks[s + 1] = seqBlocks[s]! + blocks;
    seqUnits[s + 1] = seqUnits[s]! + (causal ? Math.ceil(blocks / 2) : blocks);
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
    const m = seqBlocks[s + 1]! - seqBlocks[s]!;
    for (let j = 0; j < m; j++) {
      // Causal: block j and its mirror m-1-j share a unit.
      const u = u0 + (causal ? Math.min(j, m - 1 - j) : j);
      put(j * b, Math.min(b, len - j * b), u);
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

/**
 * Blocks that are exactly the user layout's rows, each its own unit: the fallback when memory is
 * too tight for any block split to pack (a batch that fills every rank's memory exactly), since the
 * user layout itself always fits (no rank holds more than ceil(total / world) tokens there), and
 * the loader layout (mode (b): the user layout is the home layout, `blockSizeOfSeq` from the plan
 * that chose it).
 */
export function userLayoutBlocks(
  sequences: Int32Array,
  rows: SeqRows,
  mask: Mask,
  o: FcpOptions,
  blockSizeOfSeq: Int32Array = new Int32Array(sequences.length).fill(o.blockSize),
): Blocks {
  const causal = mask === 'causal';
  const S = sequences.length;
  const B = rows.rank.length;
  const seq = new Int32Array(B);
  const unitPairs = new Float64Array(B);
  let totalPairs = 0;
  let totalTokens = 0;
  for (let s = 0; s < S; s++) {
    totalPairs += sequencePairs(causal, sequences[s]!);
    totalTokens += sequences[s]!;
    for (let i = rows.off[s]!; i < rows.off[s + 1]!; i++) {
      seq[i] = s;
      unitPairs[i] = attendedPairs(causal, rows.start[i]!, rows.length[i]!, 0, sequences[s]!);
    }
  }
  const ids = iota(B);
  return {
    seq,
    start: rows.start,
    length: rows.length,
    unit: ids,
    seqBlocks: rows.off,
    blockSizeOfSeq,
    unitSeq: seq,
    unitTokens: rows.length,
    unitPairs,
    seqUnits: rows.off,
    unitBlockA: ids,
    unitBlockB: new Int32Array(B).fill(-1),
    totalPairs,
    totalTokens,
  };
}

/** Number of blocks. */
export const blockCount = (b: Blocks): number => b.seq.length;
/** Number of units. */
export const unitCount = (b: Blocks): number => b.unitSeq.length;

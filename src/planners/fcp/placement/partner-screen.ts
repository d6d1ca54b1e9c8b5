/**
 * The refinement's screen of partners (refine.ts): which ranks cannot take any block of the most
 * loaded rank M at an eligibility level, so that a step searching every partner skips them unread
 * (at 2048 ranks in mode (b) half the steps searched them all, a hundred million block checks of
 * which 0.3% passed). Built at every step's start from M's blocks: the nodes of the user ranks of
 * M's blocks that are off their user rank (level 0), and per rank the bits of M's sequences it
 * holds (one bit per sequence of several blocks on M, up to 31; `offBits`: those with a block off
 * its user rank): such a block may only go to a holder at levels 0, 1 and 3, a block of a
 * one-block sequence anywhere. The bits also answer whether a rank holds one of M's sequences
 * without the refinement's table.
 */
import type { Blocks } from './blocks.ts';

/** Partner screen of one refinement (module comment); `build` at every step, then the queries. */
export class PartnerScreen {
  private readonly nodeOk: Uint8Array;
  /** Step at which each sequence was last seen on M. */
  private readonly onM: Int32Array;
  /** Step at which each sequence got its bit, and the bit (0: past the 31 tracked). */
  private readonly bitAt: Int32Array;
  private readonly seqBit: Int32Array;
  /** Step at which each rank's mask was reset, and the bits of M's sequences it holds. */
  private readonly maskAt: Int32Array;
  private readonly seqMask: Int32Array;
  /** Node of each block's user rank. */
  private readonly userNode: Int32Array;
  private offBits = 0;
  private singleOff = false;
  private singleAny = false;
  /** Some sequence of M past the 31 bits (then the screen passes every partner at that level). */
  private untracked = false;
  private untrackedOff = false;
  private step = -1;

  /**
   * `pairs`: each block's compute (blocks without any are never moved); `single`: whether its
   * sequence has one block; `blockRank`: the refinement's block ranks, read at every build;
   * `nodeOf`: each rank's node.
   */
  constructor(
    private readonly blocks: Blocks,
    private readonly pairs: Float64Array,
    private readonly userOf: Int32Array,
    private readonly single: Uint8Array,
    private readonly blockRank: Int32Array,
    private readonly nodeOf: Int32Array,
  ) {
    const seqCount = blocks.seqBlocks.length - 1;
    const world = nodeOf.length;
    this.nodeOk = new Uint8Array(world > 0 ? nodeOf[world - 1]! + 1 : 0);
    this.onM = new Int32Array(seqCount).fill(-1);
    this.bitAt = new Int32Array(seqCount).fill(-1);
    this.seqBit = new Int32Array(seqCount);
    this.maskAt = new Int32Array(world).fill(-1);
    this.seqMask = new Int32Array(world);
    this.userNode = new Int32Array(blocks.seq.length);
    for (let b = 0; b < blocks.seq.length; b++) this.userNode[b] = nodeOf[userOf[b]!]!;
  }

  /** Node of block b's user rank. */
  userNodeOf(b: number): number {
    return this.userNode[b]!;
  }

  /** Builds the screen for step `step` from the blocks `mine` of the most loaded rank `M`. */
  build(M: number, mine: readonly number[], step: number): void {
    const { blocks, pairs, userOf, single, blockRank } = this;
    this.step = step;
    this.nodeOk.fill(0);
    this.singleOff = false;
    this.singleAny = false;
    this.untracked = false;
    this.untrackedOff = false;
    this.offBits = 0;
    let next = 0;
    for (const b of mine) {
      const s = blocks.seq[b]!;
      this.onM[s] = step;
      if (pairs[b]! <= 0) continue;
      const off = userOf[b] !== M;
      if (off) this.nodeOk[this.userNode[b]!] = 1;
      if (single[b] === 1) {
        this.singleAny = true;
        if (off) this.singleOff = true;
        continue;
      }
      if (this.bitAt[s] !== step) {
        this.bitAt[s] = step;
        const bit = next < 31 ? 1 << next : 0;
        next++;
        this.seqBit[s] = bit;
        if (bit === 0) this.untracked = true;
        for (let c = blocks.seqBlocks[s]!, e = blocks.seqBlocks[s + 1]!; bit !== 0 && c < e; c++) {
          const r = blockRank[c]!;
          if (this.maskAt[r] !== step) {
            this.maskAt[r] = step;
            this.seqMask[r] = 0;
          }
          this.seqMask[r]! |= bit;
        }
      }
      if (off) {
        this.offBits |= this.seqBit[s]!;
        if (this.seqBit[s] === 0) this.untrackedOff = true;
      }
    }
  }

  /** Whether partner m may take a block of M at `level` (a necessary condition; refine.ts's `eligible`). */
  mayTake(level: number, m: number): boolean {
    const mask = this.maskAt[m] === this.step ? this.seqMask[m]! : 0;
    const off = this.singleOff || this.untrackedOff || (mask & this.offBits) !== 0;
    if (level === 0) return this.nodeOk[this.nodeOf[m]!] === 1 && off;
    if (level === 1) return off;
    if (level === 3) return this.singleAny || this.untracked || mask !== 0;
    return true;
  }

  /** Whether M holds sequence q (any sequence M held at the build). */
  onMost(q: number): boolean {
    return this.onM[q] === this.step;
  }

  /** Whether rank r holds q, when q is one of M's tracked sequences: 1 or 0; -1 when not known here. */
  knownHolds(r: number, q: number): number {
    if (this.bitAt[q] !== this.step || this.seqBit[q] === 0) return -1;
    return this.maskAt[r] === this.step && (this.seqMask[r]! & this.seqBit[q]!) !== 0 ? 1 : 0;
  }
}

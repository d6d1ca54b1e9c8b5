/**
 * Send load of a block placement (issue 15, communication as a placement dimension), kept by the
 * refinement (refine.ts) under `capSend`: every holder of a sequence sends its tokens' K/V to the
 * sequence's other holders, so rank r sends about sum over s of tokens(r, s) x (holders(s) - 1).
 * A move may not raise the destination's send load above the largest one the placement started
 * with (the packed ranks of the longest sequence): refinement otherwise parks the light early
 * blocks of a 512K sequence on ranks outside it, each of which then sends them to ~120 holders
 * (simulated, longtail seed 3 at 256 ranks, mode (b): a rank with 8K such tokens sent 1.2M
 * tokens' K/V, 2.4x the mean, and forward MFU fell to 0.36). Loads follow the holder counts of
 * the moment: a rank joining a sequence raises its other holders' loads a little, which is not
 * tracked (test/planners/fcp-heavy.test.ts bounds the drift).
 */
export class SendLoad {
  /** Ranks holding each sequence. */
  private readonly holders: Int32Array;
  /** Send load of each rank (tokens of K/V). */
  private readonly send: Float64Array;
  /** The largest send load at the start: no move may raise a rank above it. */
  readonly cap: number;

  /** Loads of the placement `blockRank` (blocks' sequences `seqOf`, tokens `tok`). */
  constructor(seqOf: Int32Array, tok: Int32Array, blockRank: Int32Array, sequences: number, world: number) {
    this.holders = new Int32Array(sequences);
    this.send = new Float64Array(world);
    const tokOn = new Map<number, number>();
    for (let b = 0; b < seqOf.length; b++) {
      const k = seqOf[b]! * world + blockRank[b]!;
      tokOn.set(k, (tokOn.get(k) ?? 0) + tok[b]!);
    }
    for (const k of tokOn.keys()) this.holders[Math.floor(k / world)]!++;
    for (const [k, t] of tokOn) this.send[k % world]! += t * (this.holders[Math.floor(k / world)]! - 1);
    let cap = 0;
    for (let r = 0; r < world; r++) cap = Math.max(cap, this.send[r]!);
    this.cap = cap;
  }

  /** Send load of rank r. */
  of(r: number): number {
    return this.send[r]!;
  }

  /** Whether `tokens` of sequence s may join rank `to` (`joins`: `to` holds none of s yet) within the cap. */
  fits(s: number, tokens: number, to: number, joins: boolean): boolean {
    const h = this.holders[s]! - 1 + (joins ? 1 : 0);
    return this.send[to]! + tokens * h <= this.cap;
  }

  /** A block of `tokens` of sequence s leaves `from` (before the holder counts change). */
  leave(s: number, tokens: number, from: number): void {
    this.send[from]! -= tokens * (this.holders[s]! - 1);
  }

  /** The block arrives on `to`; `joined`: `to` held none of s; `emptied`: its old rank holds none now. */
  arrive(s: number, tokens: number, to: number, joined: boolean, emptied: boolean): void {
    if (joined) this.holders[s]!++;
    if (emptied) this.holders[s]!--;
    this.send[to]! += tokens * (this.holders[s]! - 1);
  }
}

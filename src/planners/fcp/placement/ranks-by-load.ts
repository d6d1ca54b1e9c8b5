/**
 * Ranks in ascending (load, rank) order, kept sorted as the refinement (refine.ts) changes two
 * loads per step: both ranks are taken out and put back by binary search, O(world) memory moves
 * per step (native copies). A heap query for all ranks in order, which a step makes when the least
 * loaded few fail, cost O(world log world) and was a third of the planning time at 2048 ranks in
 * mode (b). Positions are found by binary search on the load each rank was sorted with, not kept
 * per rank: rewriting every moved rank's position was 8% of mode (a)'s planning time at 4096 ranks
 * (a step moves a rank from near the end to the middle and another from near the start).
 */
export class RanksByLoad {
  /** Ranks in ascending (key, rank). */
  private readonly order: Int32Array;
  /** The load each rank was last sorted with. */
  private readonly key: Float64Array;
  /** The last rank asked for by {@link nthWithout} and its position (-1: none). */
  private skipRank = -1;
  private skipPos = -1;

  /** Sorts ranks 0..world-1 by `load`, which the caller keeps changing (read, never written). */
  constructor(
    private readonly load: Float64Array,
    world: number,
  ) {
    this.key = Float64Array.from(load.subarray(0, world));
    const key = this.key;
    this.order = new Int32Array(world);
    for (let r = 0; r < world; r++) this.order[r] = r;
    this.order.sort((x, y) => key[x]! - key[y]! || x - y);
  }

  /** The k-th rank in ascending order once rank `skip` is left out (k < world - 1). */
  nthWithout(k: number, skip: number): number {
    if (skip !== this.skipRank) {
      this.skipRank = skip;
      this.skipPos = this.slotFor(skip, this.order.length);
    }
    return this.order[k < this.skipPos ? k : k + 1]!;
  }

  /** Restores the order after the loads of ranks a and b (a !== b), and only theirs, changed. */
  update(a: number, b: number): void {
    const order = this.order;
    const world = order.length;
    // Found with the keys they were sorted with, before those change.
    const pa = this.slotFor(a, world);
    const pb = this.slotFor(b, world);
    const first = Math.min(pa, pb);
    const second = Math.max(pa, pb);
    // Take both out (the rest stays sorted), then put each back where it belongs.
    order.copyWithin(first, first + 1, second);
    order.copyWithin(second - 1, second + 1, world);
    this.key[a] = this.load[a]!;
    this.key[b] = this.load[b]!;
    const at = this.slotFor(a, world - 2);
    order.copyWithin(at + 1, at, world - 2);
    order[at] = a;
    const bt = this.slotFor(b, world - 1);
    order.copyWithin(bt + 1, bt, world - 1);
    order[bt] = b;
    this.skipRank = -1;
  }

  /** Position in `order[0, n)` (sorted by key, then rank) of rank r, or where it goes. */
  private slotFor(r: number, n: number): number {
    const key = this.key;
    const kr = key[r]!;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const q = this.order[mid]!;
      if (key[q]! < kr || (key[q] === kr && q < r)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

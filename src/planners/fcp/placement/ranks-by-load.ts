/**
 * Ranks in ascending (load, rank) order, kept sorted as the refinement (refine.ts) changes two
 * loads per step: both ranks are taken out and put back by binary search, O(world) memory moves
 * per step. A heap query for all ranks in order, which a step makes when the least loaded few
 * fail, cost O(world log world) and was a third of the planning time at 2048 ranks in mode (b).
 */
export class RanksByLoad {
  /** Ranks in ascending (load, rank). */
  private readonly order: Int32Array;
  /** Position of each rank in `order`. */
  private readonly pos: Int32Array;

  /** Sorts ranks 0..world-1 by `load`, which the caller keeps changing (read, never written). */
  constructor(
    private readonly load: Float64Array,
    world: number,
  ) {
    this.order = new Int32Array(world);
    for (let r = 0; r < world; r++) this.order[r] = r;
    this.order.sort((x, y) => load[x]! - load[y]! || x - y);
    this.pos = new Int32Array(world);
    for (let i = 0; i < world; i++) this.pos[this.order[i]!] = i;
  }

  /** The k-th rank in ascending order once rank `skip` is left out (k < world - 1). */
  nthWithout(k: number, skip: number): number {
    return this.order[k < this.pos[skip]! ? k : k + 1]!;
  }

  /** Restores the order after the loads of ranks a and b (a !== b) changed. */
  update(a: number, b: number): void {
    const order = this.order;
    const world = order.length;
    const first = Math.min(this.pos[a]!, this.pos[b]!);
    const second = Math.max(this.pos[a]!, this.pos[b]!);
    // Take both out (the rest stays sorted), then put each back where it belongs.
    order.copyWithin(first, first + 1, second);
    order.copyWithin(second - 1, second + 1, world);
    const at = this.slotFor(a, world - 2);
    order.copyWithin(at + 1, at, world - 2);
    order[at] = a;
    const bt = this.slotFor(b, world - 1);
    order.copyWithin(bt + 1, bt, world - 1);
    order[bt] = b;
    // Only positions between the lowest and highest one touched moved.
    const hi = Math.min(world - 1, Math.max(second, at + 1, bt));
    for (let i = Math.min(first, at, bt); i <= hi; i++) this.pos[order[i]!] = i;
  }

  /** Position in `order[0, n)` (sorted) where rank r goes. */
  private slotFor(r: number, n: number): number {
    const load = this.load;
    const lr = load[r]!;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const q = this.order[mid]!;
      if (load[q]! < lr || (load[q] === lr && q < r)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/**
 * Room per node for the home-first placement's greedy (home-first.ts): how much compute a node can
 * still take from other nodes once its own shed blocks are placed inside it.
 *
 * Why: home-first sheds blocks from ranks above the mean and places them at the least transfer cost,
 * over NVLink inside the source's node when a node mate has room. But the greedy places the heaviest
 * blocks first, and those come from the few nodes holding long sequences: they filled the ranks
 * under the mean of every other node, so the shed blocks of those nodes' own busy ranks (short
 * sequences, placed last) found no room at home and crossed the NIC instead. `longtail` at 1024
 * ranks, seed 1, PXN: 12.5M tokens of the reshuffle crossed nodes against 1.0M inside them; 5.2M of
 * those were short sequences (at most 32K tokens) leaving nodes whose total work was below the mean
 * (`npx tsx src/cli.ts plan --world 1024 --batch longtail --seed 1 --routing pxn`, home layout
 * against user layout per token).
 *
 * A node's room is its ranks' share of the mean (ranks x mean) minus their load and minus the work
 * still pending from its own shed blocks; a block from another node goes there only while it fits
 * that room, and elsewhere under the mean when no node has it (home-first.ts, step 3).
 */

/** Per-node load and pending shed work, kept in step with the placement's per-rank loads. */
export class NodeRoom {
  private readonly load: Float64Array;
  private readonly pending: Float64Array;
  private readonly capacity: Float64Array;

  /**
   * @param rankLoad the per-rank loads the greedy starts from (read once)
   * @param nodeSize ranks per node (the last node may hold fewer)
   * @param mean the mean load per rank
   */
  constructor(
    rankLoad: Float64Array,
    readonly nodeSize: number,
    mean: number,
  ) {
    const world = rankLoad.length;
    const nodes = Math.ceil(world / nodeSize);
    this.load = new Float64Array(nodes);
    this.pending = new Float64Array(nodes);
    this.capacity = new Float64Array(nodes);
    for (let r = 0; r < world; r++) {
      const n = this.nodeOf(r);
      this.load[n]! += rankLoad[r]!;
      this.capacity[n]! += mean;
    }
  }

  /** Node of rank r. */
  nodeOf(r: number): number {
    return Math.floor(r / this.nodeSize);
  }

  /** Work `w` shed by rank r that waits to be placed (its node keeps room for it). */
  shed(r: number, w: number): void {
    this.pending[this.nodeOf(r)]! += w;
  }

  /**
   * Work `w` placed on rank `to`; `reserved`: it was shed by rank `from`, whose node kept room for
   * it (a spread unit placed from no shed list passes false).
   */
  place(from: number, to: number, w: number, reserved: boolean): void {
    if (reserved) this.pending[this.nodeOf(from)]! -= w;
    this.load[this.nodeOf(to)]! += w;
  }

  /** Whether rank r's node takes work `w` from another node and keeps room for its own pending work. */
  takes(r: number, w: number): boolean {
    const n = this.nodeOf(r);
    return this.load[n]! + this.pending[n]! + w <= this.capacity[n]!;
  }
}

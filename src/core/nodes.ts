/**
 * Node membership of ranks: ranks are numbered node by node (rank r sits on node floor(r / n) for n
 * GPUs per node), the convention of every cluster preset, the planners and the report.
 */

/** Whether ranks `a` and `b` share a node of `nodeSize` GPUs (their messages go over NVLink). */
export function sameNode(a: number, b: number, nodeSize: number): boolean {
  return Math.floor(a / nodeSize) === Math.floor(b / nodeSize);
}

/**
 * The rank on `src`'s node with `dst`'s local id (the GPU on `dst`'s rail, whose NIC a PXN message
 * from `src` to `dst` leaves by), or -1 when that node, the last one filled only in part, has no
 * such rank (world 20, 8 per node: node 2 holds ranks 16-19).
 */
export function railRank(src: number, dst: number, nodeSize: number, world: number): number {
  const r = Math.floor(src / nodeSize) * nodeSize + (dst % nodeSize);
  return r < world ? r : -1;
}

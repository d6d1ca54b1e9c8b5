/**
 * Node membership of ranks: ranks are numbered node by node (rank r sits on node floor(r / n) for n
 * GPUs per node), the convention of every cluster preset, the planners and the report.
 */

/** Whether ranks `a` and `b` share a node of `nodeSize` GPUs (their messages go over NVLink). */
export function sameNode(a: number, b: number, nodeSize: number): boolean {
  return Math.floor(a / nodeSize) === Math.floor(b / nodeSize);
}

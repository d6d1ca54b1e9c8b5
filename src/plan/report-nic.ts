/**
 * NIC and NVLink-port congestion of one phase for the rule-6 report: the most messages across
 * nodes that leave by one NIC, or arrive at one, in one round, and the most messages into one GPU's
 * NVLink port in one round. Congestion (report-messages.ts) counts ranks; under
 * NCCL's PXN routing a message across nodes leaves by the NIC of the sender-node GPU on the
 * receiver's rail (its local index), not by the sender's own, so rounds that are matchings over
 * ranks may still put several messages on one NIC. Under direct routing every message leaves by
 * its sender's NIC, and this is at most the congestion.
 */

/** How messages across nodes reach the network: GPUs per node (NVLink domain) and NCCL's routing. */
export interface NicRoute {
  readonly gpusPerNode: number;
  readonly routing: 'direct' | 'pxn';
}

/**
 * The route a plan is reported under when none is given: the plan's `meta.gpusPerNode` (FCP
 * records one other than 8) else 8 GPUs per node (every preset's), and its `meta.routing` else direct.
 */
export function defaultNicRoute(meta: Record<string, unknown> | undefined): NicRoute {
  const g = meta?.gpusPerNode;
  return {
    gpusPerNode: typeof g === 'number' && Number.isInteger(g) && g >= 1 ? g : 8,
    routing: meta?.routing === 'pxn' ? 'pxn' : 'direct',
  };
}

/**
 * The GPU whose NIC a message from `src` to `dst` in another node leaves by under PXN: the one of
 * `src`'s node on `dst`'s rail (local index), or `src` itself when its node lacks that GPU (a
 * partial last node of `world` ranks). The simulator routes by it (cost/network.ts), the report
 * counts by it, and FCP plans for it (relays, rounds, timeline estimate).
 */
export function pxnNic(src: number, dst: number, gpusPerNode: number, world: number): number {
  const proxy = Math.floor(src / gpusPerNode) * gpusPerNode + (dst % gpusPerNode);
  return proxy < world ? proxy : src;
}

/** Calls `visit(round, src, dst)` once per distinct message of `keys` ((round * W + src) * W + dst). */
function eachMessage(
  keys: Float64Array,
  W: number,
  visit: (round: number, src: number, dst: number) => void,
): void {
  const uniq = Float64Array.from(keys).sort();
  for (let i = 0; i < uniq.length; i++) {
    const key = uniq[i]!;
    if (i > 0 && uniq[i - 1] === key) continue;
    const dst = key % W;
    const rs = (key - dst) / W;
    const src = rs % W;
    visit((rs - src) / W, src, dst);
  }
}

/**
 * Most messages across nodes on one NIC in one round (0 when none crosses nodes). `keys`: the
 * phase's (round * W + src) * W + dst message keys, duplicates allowed (rows travelling together).
 */
export function nicCongestion(keys: Float64Array, W: number, route: NicRoute): number {
  const g = Math.max(1, Math.floor(route.gpusPerNode));
  if (g >= W) return 0;
  const leave: number[] = [];
  const arrive: number[] = [];
  eachMessage(keys, W, (round, src, dst) => {
    if (Math.floor(src / g) === Math.floor(dst / g)) return;
    // NIC ids are rank ids (a GPU's own NIC).
    leave.push(round * W + (route.routing === 'pxn' ? pxnNic(src, dst, g, W) : src));
    arrive.push(round * W + dst);
  });
  return Math.max(longestRun(leave), longestRun(arrive));
}

/**
 * Most messages into one GPU's NVLink port in one round: those it receives from node mates and,
 * under PXN, those across nodes it forwards for a node mate (they leave by its NIC, reached over
 * its NVLink port). Under direct routing this is at most the congestion. `keys` as for
 * {@link nicCongestion}.
 */
export function nvlinkCongestion(keys: Float64Array, W: number, route: NicRoute): number {
  const g = Math.max(1, Math.floor(route.gpusPerNode));
  const port: number[] = [];
  eachMessage(keys, W, (round, src, dst) => {
    if (Math.floor(src / g) === Math.floor(dst / g)) port.push(round * W + dst);
    else if (route.routing === 'pxn') {
      const proxy = pxnNic(src, dst, g, W);
      if (proxy !== src) port.push(round * W + proxy);
    }
  });
  return longestRun(port);
}

/** Longest run of equal values once sorted. */
function longestRun(xs: number[]): number {
  const a = Float64Array.from(xs).sort();
  let best = 0;
  let run = 0;
  for (let i = 0; i < a.length; i++) {
    run = i > 0 && a[i] === a[i - 1] ? run + 1 : 1;
    if (run > best) best = run;
  }
  return best;
}

/**
 * Network model: which capacity-limited resources a message between two ranks uses, their
 * capacities, and the message's latency. Rates over shared resources are max-min fair (the
 * simulator's rate solver); this module only describes the resources.
 *
 * Switch topology (hopper-ib, ratio-*): each rank has four resources, NVLink egress/ingress and NIC
 * egress/ingress (per direction). A message inside a node (ranks r and s with floor(r/g) =
 * floor(s/g)) uses the sender's NVLink egress and the receiver's NVLink ingress; across nodes, the
 * sender's NIC egress and the receiver's NIC ingress (a rail-optimised, full-bisection fabric), plus
 * the nodes' aggregate NIC egress/ingress when `nodeNicGBps` caps it. So incast shows as several
 * flows sharing one ingress. Under `routing: 'pxn'` (NCCL's default for point-to-point, see
 * ClusterSpec.routing) a message across nodes leaves by the NIC of the sender's node on the
 * receiver's rail: the sender's NVLink egress, that proxy GPU's NVLink ingress and NIC egress, then
 * the receiver's NIC ingress, one fluid flow (NCCL pipelines the two hops in chunks) paying both
 * latencies; a sender already on the receiver's rail (or whose node lacks that GPU) goes direct.
 *
 * Torus: ranks on a torus (x fastest), each with one directed link per neighbour and direction;
 * messages follow dimension-order shortest paths (ties go the positive way) and use every link on
 * the path; latency grows per hop.
 *
 * Under the `contention` network model (cluster.network) the per-GPU NIC ports are marked in
 * {@link Network.contended}: the rate solver shrinks their capacity with the number of flows on
 * them and the simulator adds the per-message cost (src/cost/contention.ts). NVLink, the node caps
 * and torus links stay fluid: the measurements the model is fitted to are of NICs only.
 */
import { pxnNic } from '../plan/report-nic.ts';
import type { ClusterSpec } from '../problem/cluster.ts';
import { torusDimsFor } from '../problem/cluster.ts';

/** GB/s to bytes per millisecond. */
const GBPS = 1e6;

/** Resources and capacities of one cluster at one world size. */
export class Network {
  readonly resourceCount: number;
  /** Capacity of each resource, bytes per ms. */
  readonly capacity: Float64Array;
  /** 1 for the resources whose capacity falls with their concurrent flows (NIC ports under `contention`). */
  readonly contended: Uint8Array;
  private readonly dims: number[];
  private readonly intraMs: number;
  private readonly interMs: number;

  constructor(
    readonly cluster: ClusterSpec,
    readonly world: number,
  ) {
    this.intraMs = cluster.nvlinkLatencyUs / 1000;
    this.interMs = cluster.latencyUs / 1000;
    if (cluster.topology === 'torus') {
      this.dims = torusDimsFor(cluster, world);
      const per = 2 * this.dims.length;
      this.resourceCount = world * per;
      this.capacity = new Float64Array(this.resourceCount).fill(cluster.linkGBps * GBPS);
    } else {
      this.dims = [];
      const nodes = Math.ceil(world / cluster.gpusPerNode);
      this.resourceCount = 4 * world + (cluster.nodeNicGBps > 0 ? 2 * nodes : 0);
      this.capacity = new Float64Array(this.resourceCount);
      for (let r = 0; r < world; r++) {
        this.capacity[4 * r] = cluster.nvlinkGBps * GBPS;
        this.capacity[4 * r + 1] = cluster.nvlinkGBps * GBPS;
        this.capacity[4 * r + 2] = cluster.nicGBps * GBPS;
        this.capacity[4 * r + 3] = cluster.nicGBps * GBPS;
      }
      for (let i = 4 * world; i < this.resourceCount; i++) this.capacity[i] = cluster.nodeNicGBps * GBPS;
    }
    this.contended = new Uint8Array(this.resourceCount);
    if (cluster.network === 'contention' && cluster.topology !== 'torus')
      for (let r = 0; r < world; r++) {
        this.contended[4 * r + 2] = 1;
        this.contended[4 * r + 3] = 1;
      }
  }

  /** True when some resource is contended (the contention model is on and applies). */
  hasContention(): boolean {
    return this.contended.includes(1);
  }

  /** Torus dimensions (empty for the switch topology). */
  torusDims(): readonly number[] {
    return this.dims;
  }

  /** Pushes the resources a message src -> dst uses onto `out`; returns its latency in ms. */
  route(src: number, dst: number, out: number[]): number {
    const c = this.cluster;
    if (c.topology === 'torus') return this.routeTorus(src, dst, out);
    const g = c.gpusPerNode;
    const ns = Math.floor(src / g);
    const nd = Math.floor(dst / g);
    if (ns === nd) {
      out.push(4 * src, 4 * dst + 1);
      return this.intraMs;
    }
    const proxy = c.routing === 'pxn' ? pxnNic(src, dst, g, this.world) : src;
    if (proxy !== src) {
      out.push(4 * src, 4 * proxy + 1, 4 * proxy + 2, 4 * dst + 3);
      if (c.nodeNicGBps > 0) out.push(4 * this.world + 2 * ns, 4 * this.world + 2 * nd + 1);
      return this.interMs + this.intraMs;
    }
    out.push(4 * src + 2, 4 * dst + 3);
    if (c.nodeNicGBps > 0) out.push(4 * this.world + 2 * ns, 4 * this.world + 2 * nd + 1);
    return this.interMs;
  }

  private routeTorus(src: number, dst: number, out: number[]): number {
    const dims = this.dims;
    const per = 2 * dims.length;
    // Coordinates, x fastest.
    let cur = src;
    let stride = 1;
    let hops = 0;
    for (let d = 0; d < dims.length; d++) {
      const size = dims[d]!;
      const cs = Math.floor(src / stride) % size;
      const cd = Math.floor(dst / stride) % size;
      const fwd = (cd - cs + size) % size;
      const positive = fwd <= size - fwd;
      const steps = positive ? fwd : size - fwd;
      let x = cs;
      for (let i = 0; i < steps; i++) {
        out.push(cur * per + 2 * d + (positive ? 0 : 1));
        const nx = positive ? (x + 1) % size : (x - 1 + size) % size;
        cur += (nx - x) * stride;
        x = nx;
        hops++;
      }
      stride *= size;
    }
    return (this.cluster.latencyUs + hops * this.cluster.hopUs) / 1000;
  }
}

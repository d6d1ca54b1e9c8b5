/**
 * Max-min fair rates of active flows over capacity-limited resources (progressive filling /
 * water-filling, Bertsekas & Gallager, "Data Networks", 1992, section 6.5.2).
 *
 * Recomputing every rate at every flow start or finish costs O(active flows) per event, too much
 * for thousands of ranks. So a change is propagated through its neighbourhood: starting from the
 * resources whose flow set changed, collect the flows on them, then the flows on those flows' other
 * resources, and so on for `hops` levels (past the first, stopping early at `budget` flows); water-fill the
 * collected flows over the capacity the other flows leave free. Other flows keep their rates, so
 * the allocation stays feasible; it is exactly max-min fair whenever the connected component of the
 * change lies within the radius (mode `exact` always takes the whole component).
 *
 * Contention (optional): a marked resource with n active flows offers capacity * eta(n)
 * (src/cost/contention.ts). Its flow count changes only when a flow on it starts or ends, which
 * makes it dirty, and every flow on a dirty resource is re-solved, so the reduced capacity is
 * always respected.
 */
import { portEfficiency } from '../../cost/contention.ts';

/** How far a rate change propagates. */
export interface RateOptions {
  /** `local` (bounded neighbourhood, default) or `exact` (whole connected component). */
  mode: 'local' | 'exact';
  /** Levels of flows collected from a changed resource (local mode). */
  hops: number;
  /** Stop collecting past this many flows (local mode). */
  budget: number;
}

/** Resources whose capacity falls with their number of active flows. */
export interface RateContention {
  /** 1 for a contended resource. */
  readonly mask: Uint8Array;
  /** The contention model's bandwidth loss (eta(n) = 1 - loss * (1 - 1/n)). */
  readonly loss: number;
}

/** Defaults of {@link RateOptions}. */
export const RATE_DEFAULTS: RateOptions = { mode: 'local', hops: 1, budget: 1024 };

/** Active flows per resource and the water-filling over a neighbourhood. */
export class RateSolver {
  /** Active flows on each resource. */
  private readonly onRes: number[][];
  /** Position of flow slot k (CSR slot of flowRes) in its resource's list. */
  private readonly slotPos: Int32Array;
  private readonly resStamp: Int32Array;
  private readonly flowStamp: Int32Array;
  private stamp = 0;
  private readonly residual: Float64Array;
  private readonly count: Int32Array;
  /** Sum of the rates of the active flows on each resource. */
  private readonly used: Float64Array;
  /** Index of a resource in the current neighbourhood's resource list. */
  private readonly local: Int32Array;
  private csrOff: Int32Array = new Int32Array(256);
  private csr: Int32Array = new Int32Array(256);
  private fill: Int32Array = new Int32Array(256);
  private readonly frozen: Uint8Array;
  /** New rates of the flows of the last {@link solve}. */
  readonly newRate: Float64Array;
  /** Flows whose rates the last solve set. */
  readonly touched: number[] = [];
  private readonly resList: number[] = [];
  private readonly frontA: number[] = [];
  private readonly frontB: number[] = [];
  private heapS: Float64Array = new Float64Array(256);
  private heapR: Int32Array = new Int32Array(256);
  private heapN = 0;
  private readonly hops: number;
  private readonly budget: number;

  constructor(
    private readonly capacity: Float64Array,
    private readonly flowResOff: Int32Array,
    private readonly flowRes: Int32Array,
    private readonly rate: Float64Array,
    options: RateOptions,
    private readonly contention: RateContention | null = null,
  ) {
    const nRes = capacity.length;
    const nFlows = flowResOff.length - 1;
    this.onRes = Array.from({ length: nRes }, () => []);
    this.slotPos = new Int32Array(flowRes.length);
    this.resStamp = new Int32Array(nRes);
    this.flowStamp = new Int32Array(nFlows);
    this.residual = new Float64Array(nRes);
    this.count = new Int32Array(nRes);
    this.used = new Float64Array(nRes);
    this.local = new Int32Array(nRes);
    this.frozen = new Uint8Array(nFlows);
    this.newRate = new Float64Array(nFlows);
    const exact = options.mode === 'exact';
    this.hops = exact ? Number.POSITIVE_INFINITY : Math.max(1, options.hops);
    this.budget = exact ? Number.POSITIVE_INFINITY : Math.max(1, options.budget);
  }

  /** Number of active flows on resource r. */
  activeOn(r: number): number {
    return this.onRes[r]!.length;
  }

  /** Registers an active flow on its resources; pushes them onto `dirty`. */
  add(f: number, dirty: number[]): void {
    for (let k = this.flowResOff[f]!; k < this.flowResOff[f + 1]!; k++) {
      const r = this.flowRes[k]!;
      const list = this.onRes[r]!;
      this.slotPos[k] = list.length;
      list.push(f);
      dirty.push(r);
    }
  }

  /** Removes a finished flow from its resources (its rate drops to 0); pushes them onto `dirty`. */
  remove(f: number, dirty: number[]): void {
    this.setRate(f, 0);
    const off = this.flowResOff;
    const res = this.flowRes;
    for (let k = off[f]!; k < off[f + 1]!; k++) {
      const r = res[k]!;
      const list = this.onRes[r]!;
      const p = this.slotPos[k]!;
      const last = list.pop()!;
      if (p < list.length) {
        list[p] = last;
        // Fix the moved flow's slot for resource r.
        for (let q = off[last]!; q < off[last + 1]!; q++)
          if (res[q] === r && this.slotPos[q] === list.length) {
            this.slotPos[q] = p;
            break;
          }
      }
      if (list.length === 0) this.used[r] = 0;
      dirty.push(r);
    }
  }

  /** Sets a flow's rate, keeping each resource's used capacity current. */
  setRate(f: number, r: number): void {
    const d = r - this.rate[f]!;
    this.rate[f] = r;
    if (d === 0) return;
    for (let k = this.flowResOff[f]!; k < this.flowResOff[f + 1]!; k++) {
      const x = this.flowRes[k]!;
      // An idle resource is exactly idle (no drift from many small updates).
      this.used[x] = this.onRes[x]!.length === 0 ? 0 : this.used[x]! + d;
    }
  }

  /**
   * Water-fills the neighbourhood of the `dirty` resources. Results: {@link touched} flows and their
   * {@link newRate}s (bytes/ms). Flows outside keep their current `rate`.
   */
  solve(dirty: readonly number[]): void {
    const stamp = ++this.stamp;
    const { onRes, flowResOff: off, flowRes: res, resStamp, flowStamp } = this;
    const touched = this.touched;
    const resList = this.resList;
    const budget = this.budget;
    touched.length = 0;
    resList.length = 0;
    // Collect flows level by level.
    let frontier = this.frontA;
    let next = this.frontB;
    frontier.length = 0;
    for (const r of dirty)
      if (resStamp[r] !== stamp) {
        resStamp[r] = stamp;
        resList.push(r);
        frontier.push(r);
      }
    for (
      let level = 0;
      level < this.hops && frontier.length > 0 && (level === 0 || touched.length < budget);
      level++
    ) {
      next.length = 0;
      const expand = level + 1 < this.hops; // collect the next frontier only if it will be used
      outer: for (const r of frontier) {
        for (const f of onRes[r]!) {
          if (flowStamp[f] === stamp) continue;
          flowStamp[f] = stamp;
          touched.push(f);
          for (let k = off[f]!; k < off[f + 1]!; k++) {
            const r2 = res[k]!;
            if (resStamp[r2] !== stamp) {
              resStamp[r2] = stamp;
              resList.push(r2);
              if (expand) next.push(r2);
            }
          }
          // The first level is always complete: a new flow must get a rate.
          if (level > 0 && touched.length >= budget) break outer;
        }
      }
      const swap = frontier;
      frontier = next;
      next = swap;
    }
    if (touched.length === 0) return;
    // Per resource of the neighbourhood: the set's flows (CSR) and the capacity other flows leave.
    const residual = this.residual;
    const count = this.count;
    const local = this.local;
    const rate = this.rate;
    for (let i = 0; i < resList.length; i++) {
      const r = resList[i]!;
      local[r] = i;
      count[r] = 0;
      residual[r] = 0; // holds the set's current use until turned into the residual below
    }
    for (const f of touched)
      for (let k = off[f]!; k < off[f + 1]!; k++) {
        const r = res[k]!;
        count[r]!++;
        residual[r]! += rate[f]!;
      }
    if (this.csrOff.length < resList.length + 1) this.csrOff = new Int32Array(2 * resList.length + 2);
    const csrOff = this.csrOff;
    csrOff[0] = 0;
    for (let i = 0; i < resList.length; i++) {
      const r = resList[i]!;
      csrOff[i + 1] = csrOff[i]! + count[r]!;
      residual[r] = Math.max(0, this.capacityOf(r) - (this.used[r]! - residual[r]!));
    }
    const slots = csrOff[resList.length]!;
    if (this.csr.length < slots) this.csr = new Int32Array(2 * slots);
    const csr = this.csr;
    if (this.fill.length < resList.length) this.fill = new Int32Array(2 * resList.length);
    const fill = this.fill;
    for (let i = 0; i < resList.length; i++) fill[i] = csrOff[i]!;
    for (const f of touched)
      for (let k = off[f]!; k < off[f + 1]!; k++) {
        const i = local[res[k]!]!;
        csr[fill[i]!] = f;
        fill[i]!++;
      }
    // Progressive filling: saturate the resource with the smallest fair share first.
    this.heapN = 0;
    for (const r of resList) if (count[r]! > 0) this.heapPush(residual[r]! / count[r]!, r);
    const frozen = this.frozen;
    for (const f of touched) frozen[f] = 0;
    let left = touched.length;
    while (left > 0 && this.heapN > 0) {
      const share = this.heapS[0]!;
      const r = this.heapR[0]!;
      this.heapPop();
      if (count[r] === 0 || residual[r]! / count[r]! !== share) continue; // stale
      const s = Math.max(0, share);
      const i = local[r]!;
      for (let q = csrOff[i]!; q < csrOff[i + 1]!; q++) {
        const f = csr[q]!;
        if (frozen[f]) continue;
        frozen[f] = 1;
        left--;
        this.newRate[f] = s;
        for (let k = off[f]!; k < off[f + 1]!; k++) {
          const r2 = res[k]!;
          if (r2 === r) continue;
          residual[r2] = Math.max(0, residual[r2]! - s);
          count[r2]!--;
          if (count[r2]! > 0) this.heapPush(residual[r2]! / count[r2]!, r2);
        }
      }
      count[r] = 0;
    }
  }

  /** Capacity resource r offers to its current active flows. */
  private capacityOf(r: number): number {
    const c = this.contention;
    if (c === null || c.mask[r] !== 1) return this.capacity[r]!;
    return this.capacity[r]! * portEfficiency(c.loss, this.onRes[r]!.length);
  }

  private heapPush(s: number, r: number): void {
    if (this.heapN === this.heapS.length) {
      const ns = new Float64Array(this.heapN * 2);
      ns.set(this.heapS);
      const nr = new Int32Array(this.heapN * 2);
      nr.set(this.heapR);
      this.heapS = ns;
      this.heapR = nr;
    }
    const hs = this.heapS;
    const hr = this.heapR;
    let i = this.heapN++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (hs[p]! < s || (hs[p] === s && hr[p]! <= r)) break;
      hs[i] = hs[p]!;
      hr[i] = hr[p]!;
      i = p;
    }
    hs[i] = s;
    hr[i] = r;
  }

  private heapPop(): void {
    const hs = this.heapS;
    const hr = this.heapR;
    const n = --this.heapN;
    if (n === 0) return;
    const s = hs[n]!;
    const r = hr[n]!;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let c = l;
      if (l + 1 < n && (hs[l + 1]! < hs[l]! || (hs[l + 1] === hs[l] && hr[l + 1]! < hr[l]!))) c = l + 1;
      if (hs[c]! > s || (hs[c] === s && hr[c]! >= r)) break;
      hs[i] = hs[c]!;
      hr[i] = hr[c]!;
      i = c;
    }
    hs[i] = s;
    hr[i] = r;
  }
}

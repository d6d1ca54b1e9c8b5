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
  /** Per local resource of a solve: the capacity left to the set, and the set's unfrozen flows. */
  private readonly lResidual: Float64Array;
  private readonly lCount: Int32Array;
  /** Per flow t of a solve: its resources' local ids, tRes[tOff[t]..tOff[t+1]). */
  private readonly tOff: Int32Array;
  private readonly tRes: Int32Array;
  /** Sum of the rates of the active flows on each resource. */
  private readonly used: Float64Array;
  /** Index of a resource in the current neighbourhood's resource list. */
  private readonly local: Int32Array;
  /** Key of each local resource's live heap entry while filling (at most its share). */
  private readonly keyOf: Float64Array;
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
    this.lResidual = new Float64Array(nRes);
    this.lCount = new Int32Array(nRes);
    this.tOff = new Int32Array(nFlows + 1);
    this.tRes = new Int32Array(flowRes.length);
    this.used = new Float64Array(nRes);
    this.local = new Int32Array(nRes);
    this.keyOf = new Float64Array(nRes);
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
   * {@link setRate} for flow `t` of the last {@link solve}'s {@link touched} list: the same update
   * in the same order, read from the solve's local ids instead of the global flow arrays (at 1024
   * ranks those reads miss the cache).
   */
  setTouchedRate(t: number, r: number): void {
    const f = this.touched[t]!;
    const d = r - this.rate[f]!;
    this.rate[f] = r;
    if (d === 0) return;
    const { tOff, tRes, resList, used, onRes } = this;
    for (let j = tOff[t]!; j < tOff[t + 1]!; j++) {
      const x = resList[tRes[j]!]!;
      used[x] = onRes[x]!.length === 0 ? 0 : used[x]! + d;
    }
  }

  /**
   * Water-fills the neighbourhood of the `dirty` resources. Results: {@link touched} flows and their
   * {@link newRate}s (bytes/ms). Flows outside keep their current `rate`.
   */
  solve(dirty: readonly number[]): void {
    const stamp = ++this.stamp;
    const { onRes, flowResOff: off, flowRes: res, resStamp, flowStamp, rate } = this;
    const touched = this.touched;
    const resList = this.resList;
    const budget = this.budget;
    // Everything past the collection works on dense local ids: resource i of the neighbourhood
    // (resList[i]) and flow t of the set (touched[t]), whose resources are tRes[tOff[t]..tOff[t+1]).
    // The collection is the only pass over the global arrays, which at 1024 ranks hold hundreds of
    // thousands of flows and miss the cache on nearly every read.
    const { local, lCount, lResidual, tOff, tRes } = this;
    let tLen = 0;
    touched.length = 0;
    resList.length = 0;
    // Collect flows level by level.
    let frontier = this.frontA;
    let next = this.frontB;
    frontier.length = 0;
    for (const r of dirty)
      if (resStamp[r] !== stamp) {
        this.enter(r, stamp);
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
          tOff[touched.length] = tLen;
          touched.push(f);
          const fr = rate[f]!;
          for (let k = off[f]!; k < off[f + 1]!; k++) {
            const r2 = res[k]!;
            if (resStamp[r2] !== stamp) {
              this.enter(r2, stamp);
              if (expand) next.push(r2);
            }
            const i = local[r2]!;
            tRes[tLen++] = i;
            lCount[i]!++;
            lResidual[i]! += fr;
          }
          // The first level is always complete: a new flow must get a rate.
          if (level > 0 && touched.length >= budget) break outer;
        }
      }
      const swap = frontier;
      frontier = next;
      next = swap;
    }
    const T = touched.length;
    if (T === 0) return;
    tOff[T] = tLen;
    // Per resource of the neighbourhood: the set's flows (CSR) and the capacity other flows leave.
    const nLocal = resList.length;
    if (this.csrOff.length < nLocal + 1) this.csrOff = new Int32Array(2 * nLocal + 2);
    const csrOff = this.csrOff;
    csrOff[0] = 0;
    for (let i = 0; i < nLocal; i++) {
      const r = resList[i]!;
      csrOff[i + 1] = csrOff[i]! + lCount[i]!;
      lResidual[i] = Math.max(0, this.capacityOf(r) - (this.used[r]! - lResidual[i]!));
    }
    if (this.csr.length < tLen) this.csr = new Int32Array(2 * tLen);
    const csr = this.csr;
    if (this.fill.length < nLocal) this.fill = new Int32Array(2 * nLocal);
    const fill = this.fill;
    for (let i = 0; i < nLocal; i++) fill[i] = csrOff[i]!;
    for (let t = 0; t < T; t++)
      for (let j = tOff[t]!; j < tOff[t + 1]!; j++) {
        const i = tRes[j]!;
        csr[fill[i]!] = t;
        fill[i]!++;
      }
    // Progressive filling: saturate the resource with the least fair share first (ties: the lower
    // resource id). Freezing the flows of the resource with the least share s leaves every other
    // resource a share of (residual - s) / (count - 1) >= residual / count, so shares only rise (up
    // to rounding): a resource keeps one heap entry whose key may lag below its share, and a popped
    // entry whose key is not the share is pushed again with it. Only a share that falls below its
    // key (by rounding) is pushed at once, so the entries popped in (share, id) order are exactly
    // those an eager heap (one push per change) pops; the rates are bit-identical to it, at a push
    // per resource instead of one per flow and resource (bench/sim-hashes.ts; session 41).
    this.heapN = 0;
    const keyOf = this.keyOf;
    for (let i = 0; i < nLocal; i++)
      if (lCount[i]! > 0) {
        const s = lResidual[i]! / lCount[i]!;
        keyOf[i] = s;
        this.heapPush(s, resList[i]!);
      }
    const frozen = this.frozen;
    frozen.fill(0, 0, T);
    let left = T;
    while (left > 0 && this.heapN > 0) {
      const key = this.heapS[0]!;
      const i = local[this.heapR[0]!]!;
      this.heapPop();
      if (lCount[i] === 0 || key !== keyOf[i]) continue; // done, or superseded by a lower entry
      const share = lResidual[i]! / lCount[i]!;
      if (share !== key) {
        keyOf[i] = share;
        this.heapPush(share, resList[i]!);
        continue;
      }
      const s = Math.max(0, share);
      for (let q = csrOff[i]!; q < csrOff[i + 1]!; q++) {
        const t = csr[q]!;
        if (frozen[t]) continue;
        frozen[t] = 1;
        left--;
        this.newRate[touched[t]!] = s;
        for (let j = tOff[t]!; j < tOff[t + 1]!; j++) {
          const i2 = tRes[j]!;
          if (i2 === i) continue;
          lResidual[i2] = Math.max(0, lResidual[i2]! - s);
          const c2 = --lCount[i2]!;
          if (c2 > 0) {
            const s2 = lResidual[i2]! / c2;
            if (s2 < keyOf[i2]!) {
              keyOf[i2] = s2;
              this.heapPush(s2, resList[i2]!);
            }
          }
        }
      }
      lCount[i] = 0;
    }
  }

  /** Makes resource r the next local resource of the solve stamped `stamp`, with no flows yet. */
  private enter(r: number, stamp: number): void {
    const i = this.resList.length;
    this.resStamp[r] = stamp;
    this.local[r] = i;
    this.lCount[i] = 0;
    this.lResidual[i] = 0; // the set's current use until turned into the residual
    this.resList.push(r);
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

/**
 * Compute op order per rank (docs/design.md, FCP's planner): which work runs when, so that transfers
 * and compute overlap at both ends of a phase.
 *
 * A task either exports results (its output rows must move: forward O of queries whose user rank
 * is elsewhere; backward dQ of such queries and dK,dV partials of keys that are not this rank's
 * own, unmoved rows) or is local (nothing it writes leaves the rank). Exports should finish early,
 * so their pushes overlap the remaining compute; local work is what fills the gaps:
 *
 * 1. local work present from the start runs first, for about as long as the rank waits for its
 *    first exported work's data (the estimated end of that work's group); all of it on a rank
 *    that exports nothing (nothing at its end needs covering); with one fixed reserve, a rank
 *    short of local work splits it between the start's wait and the reserve in proportion;
 * 2. then exporting work, by ready group, keys (backward) or queries (forward) in position order,
 *    so that partials and rows complete progressively (the caller's `key`: the backward of a loader
 *    layout puts the launch shape first, launch-shapes.ts), cut into ops of at most `maxOpMs` so that
 *    each push can leave after a short op rather than a long one (in the backward, longer far from
 *    the rank's end: up to a tenth of its work still to come, TAIL_FRACTION; work that exports nothing is
 *    cut only where the ready group changes: no push waits for it, and every op pays its
 *    launches; in the forward no op waits for a later group than its first task's);
 *    where the estimate sees the rank wait for the next group, local work beyond the reserve
 *    fills the wait; before an op is cut, available tasks of its launch shapes (exporting as it
 *    does or not) complete its batches to powers of two (`completeBatches`);
 * 3. local work last (at least `reserve` ms of it when there is that much, none on a rank that
 *    exports nothing): it covers the last pushes and the `out` reshuffle instead of leaving them
 *    exposed.
 *
 * Every op waits for the latest group of its tasks; ops of a rank run in table order.
 */
import type { ComputeTable } from '../../plan/types.ts';
import { ShapeCounts } from './launch-carry.ts';
import { POW2_OP_FACTOR, TAIL_FRACTION, UNIT_OP_FACTOR } from './op-cut.ts';
import { RunHeap } from './run-heap.ts';

/** Per task: rank, ready group (-1: from the start), export flag, estimated ms, position key. */
export interface OrderInput {
  readonly rank: Int32Array;
  readonly ready: Int32Array;
  readonly exported: Uint8Array;
  readonly ms: Float64Array;
  /** Sort key inside a ready group (e.g. sequence and key start). */
  readonly key: Float64Array;
  /**
   * Per task, the push its results join, which leaves after the last op feeding it (phase-ops.ts: in
   * the backward the home run of its keys, one `dkv` partial; in the forward the reshuffle piece of
   * its queries, one `out` push); undefined: every task its own.
   */
  readonly unit?: Int32Array | undefined;
  /**
   * Per task, a key of the kernel launches it makes (launch-shapes.ts, `batchShapes`): the GPU runtime
   * batches an op's identical dense pieces, split into powers of two, one launch each
   * (python/fcp_torch/kernels.py, `plan_launches`); undefined: ops are cut by time alone.
   */
  readonly shape?: Float64Array | undefined;
}

/**
 * Builds the ops (module comment). `groupEnd[g * world + r]`: estimated end of group g on rank r,
 * ms; `reserveMs`: the local work kept for the end, one value or one per rank; `fillGaps`: local
 * work beyond the reserve fills estimated waits between groups (step 2); `extend`: an op of
 * exporting work under `maxOpMs` may take a task of a later ready group and wait for that group,
 * if the estimate has that group arrived by the end of the op's work so far (else the task opens
 * the next op).
 */
export function orderOps(
  t: OrderInput,
  groupEnd: Float64Array,
  groups: number,
  world: number,
  maxOpMs: number,
  reserveMs: number | Float64Array,
  fillGaps = true,
  extend = true,
): { compute: ComputeTable; opOfTask: Int32Array } {
  const n = t.rank.length;
  // Tasks by rank (counting sort, ids ascending).
  const off = new Int32Array(world + 1);
  for (let i = 0; i < n; i++) off[t.rank[i]! + 1]!++;
  for (let r = 0; r < world; r++) off[r + 1]! += off[r]!;
  const byRank = new Int32Array(n);
  const fill = off.slice(0, world);
  for (let i = 0; i < n; i++) byRank[fill[t.rank[i]!]!++] = i;

  // Every task joins one op (at most n ops): columns of that size, cut to length at the end
  // (IntColumn pushes: 69 -> 61-65 ms on the captured calls above).
  const rank = new Int32Array(n);
  const after = new Int32Array(n);
  const offsets = new Int32Array(n + 1);
  const ids = new Int32Array(n);
  let ops = 0;
  let idsN = 0;
  const opOfTask = new Int32Array(n);
  let opAfter = -2;
  let opMs = 0;
  /** Whether the open op holds exporting work (1), only other work (0), or nothing yet (-1). */
  let opExports = -1;
  const open = (r: number, a: number): void => {
    offsets[ops] = idsN;
    rank[ops] = r;
    after[ops++] = a;
    opAfter = a;
    opMs = 0;
    opExports = -1;
  };
  let lastTask = -1;
  /** The open rank's estimated work, ms: all of it, and what its ops hold so far. */
  let rankMs = 0;
  let doneMs = 0;
  const add = (task: number): void => {
    lastTask = task;
    opOfTask[task] = ops - 1;
    ids[idsN++] = task;
    opMs += t.ms[task]!;
    doneMs += t.ms[task]!;
    if (opExports !== 1) opExports = t.exported[task]!;
  };
  // Per rank: local tasks (in id order), exporting tasks by ready group (counting sort), each
  // group's run then sorted by (key, id), and the available runs in a heap (run-heap.ts).
  const local = new Int32Array(n);
  const exp = new Int32Array(n);
  let maxReady = -1;
  for (let i = 0; i < n; i++) if (t.ready[i]! > maxReady) maxReady = t.ready[i]!;
  const bucket = new Int32Array(maxReady + 3);
  const key = t.key;
  const heap = new RunHeap(maxReady + 2, exp, key);
  /** Tasks in the heap's runs. */
  let avail = 0;
  /** Makes the tasks exp[a..b) (one group's run, sorted) available. */
  const pushRun = (a: number, b: number): void => {
    heap.push(a, b);
    avail += b - a;
  };
  /** Tasks taken out of their run ahead of their turn (`completeBatches`); skipped when popped. */
  const taken = new Uint8Array(n);
  const counts = new ShapeCounts();
  /** Tasks found to complete a batch (never more than the op's tasks: n is enough). */
  const found = new Int32Array(n);
  /** The available task of least (key, id) not taken yet. */
  const popLive = (): number => {
    for (;;) {
      const x = pop();
      if (taken[x] === 0) return x;
      avail++; // counted off when it was taken
    }
  };
  /**
   * Before an op is cut: for each launch shape of the op whose task count is not a power of two,
   * available tasks of that shape (exporting as the op does or not) from groups the op already
   * waits for join it up to the next power of two, where enough of them are available (the
   * runtime splits a batch into powers of two, one launch each: launch-carry.ts). They are ready,
   * so the rank idles no more than before; their own pushes leave no later (they would have run
   * in a later op), the op's others by the pulled tasks' time. `longtail` seed 1, forward / backward
   * launches at 256 ranks: mode (b) 14684 / 22790 -> 11534 / 21725, mode (a)
   * 18144 / 21813 -> 16685 / 20178; simulated MFU in docs/results.md, "Session 20".
   */
  const completeBatches = (): number => {
    const shape = t.shape;
    let ms = 0;
    if (shape === undefined) return ms;
    counts.clear();
    for (let j = offsets[ops - 1]!; j < idsN; j++) if (!counts.add(shape[ids[j]!]!)) return ms;
    // The op's shapes as they were before any task joins (a joining task adds to its own shape).
    const shapes = counts.n;
    for (let h = 0; h < shapes; h++) {
      const s = counts.key[h]!;
      const c = counts.count[h]!;
      if ((c & (c - 1)) === 0) continue;
      let need = 1;
      while (need < c) need *= 2;
      need -= c;
      let nf = 0;
      for (let e = 0; e < heap.size && nf < need; e++) {
        if (t.ready[exp[heap.pos[e]!]!]! > opAfter) continue;
        for (let q = heap.pos[e]!; q < heap.end[e]! && nf < need; q++) {
          const x = exp[q]!;
          if (taken[x] === 0 && shape[x] === s && t.exported[x] === opExports) found[nf++] = x;
        }
      }
      if (nf < need) continue;
      for (let f = 0; f < nf; f++) {
        const x = found[f]!;
        taken[x] = 1;
        avail--;
        add(x);
        ms += t.ms[x]!;
      }
    }
    return ms;
  };
  /** The available task of least (key, id), taken. */
  const pop = (): number => {
    avail--;
    return heap.pop();
  };
  /**
   * Whether task i would bring the open op's tasks of its launch shape to a power of two, or
   * towards one: the op holds some of them but not a power of two (a batch of 3 runs as 2 + 1,
   * two launches; of 4 as one).
   */
  const completesBatch = (i: number): boolean => {
    const shape = t.shape;
    if (shape === undefined || ops === 0) return false;
    const s = shape[i]!;
    let k = 0;
    for (let j = offsets[ops - 1]!; j < idsN; j++) if (shape[ids[j]!] === s) k++;
    return k > 0 && (k & (k - 1)) !== 0;
  };
  const readyAt = groupArrival(groupEnd, groups, world);
  for (let r = 0; r < world; r++) {
    let nl = 0;
    let ne = 0;
    let localMs = 0;
    let exports = false;
    rankMs = 0;
    doneMs = 0;
    bucket.fill(0);
    for (let k = off[r]!; k < off[r + 1]!; k++) {
      const i = byRank[k]!;
      rankMs += t.ms[i]!;
      if (t.exported[i] !== 0) exports = true;
      if (t.exported[i] === 0 && t.ready[i]! < 0) {
        local[nl++] = i;
        localMs += t.ms[i]!;
      } else {
        bucket[t.ready[i]! + 2]!++;
        ne++;
      }
    }
    for (let g = 0; g <= maxReady + 1; g++) bucket[g + 1]! += bucket[g]!;
    for (let k = off[r]!; k < off[r + 1]!; k++) {
      const i = byRank[k]!;
      if (!(t.exported[i] === 0 && t.ready[i]! < 0)) exp[bucket[t.ready[i]! + 1]!++] = i;
    }
    // Each group's run by (key, id): insertion sorts (runs are short, and mostly in order).
    for (let a = 0; a < ne; ) {
      const g = t.ready[exp[a]!]!;
      let b = a + 1;
      while (b < ne && t.ready[exp[b]!] === g) b++;
      for (let j = a + 1; j < b; j++) {
        const x = exp[j]!;
        const kx = key[x]!;
        let q = j - 1;
        for (; q >= a; q--) {
          const y = exp[q]!;
          const ky = key[y]!;
          if (!(kx < ky || (kx === ky && x < y))) break;
          exp[q + 1] = y;
        }
        exp[q + 1] = x;
      }
      a = b;
    }
    // 1. Local work while the first exported work's data is on its way, keeping the reserve. A
    //    rank that exports nothing has no pushes to cover at the end (the forward of a loader
    //    layout): it keeps no reserve, else it would idle at the start waiting for K/V with its
    //    local work held back for a tail that needs none.
    //    It runs all of its local work first: its transfers never wait for its compute, so
    //    earliest-release-first (local work, then by arrival) minimises its end.
    const wait = ne > 0 ? readyAt(t.ready[exp[0]!]!, r) : 0;
    const reserve = !exports ? 0 : typeof reserveMs === 'number' ? reserveMs : reserveMs[r]!;
    // With one fixed reserve (mode (a)'s backward) a rank with less local work than the wait and
    // the reserve together splits it between them in proportion, rather than keeping it all for
    // the end and idling at the start: after spread sequences took their own user ranks first
    // (home-first.ts), such ranks waited 3.0-3.3 ms at the start of the backward (`magi` 16 ranks
    // seeds 1-2, PXN, `npx tsx bench/fcp-gaps.ts --pxn --batch magi --worlds 16 --seeds 1,2 --dir
    // backward`). Measured in session 33 (docs/results.md); session 29 had measured it mixed.
    const split =
      typeof reserveMs === 'number' && wait + reserve > 0 ? (localMs * wait) / (wait + reserve) : 0;
    const head = exports ? Math.min(wait, Math.max(localMs - reserve, split, 0)) : localMs;
    let li = 0;
    let now = 0;
    let localLeft = localMs;
    if (head > 0 && nl > 0) {
      open(r, -1);
      while (li < nl && opMs < head) {
        localLeft -= t.ms[local[li]!]!;
        add(local[li++]!);
      }
      now = opMs;
    }
    // 2. Exporting (and late-ready) work as a list schedule over the estimated timeline: of the
    //    tasks whose group has (by the estimate) arrived, the one with the smallest position key;
    //    so the order follows positions once the data is in, and arrival while it is not.
    heap.size = 0;
    avail = 0;
    let next = 0;
    /** When the work taken so far ends, by the estimate (before any wait for the next arrival). */
    let busyUntil = now;
    opAfter = -2;
    while (next < ne || avail > 0) {
      if (avail === 0) {
        // Nothing has arrived (by the estimate): fill the wait with local work beyond the
        // reserve rather than idle (a gap between two groups' arrivals, not only the first).
        const arrival = readyAt(t.ready[exp[next]!]!, r);
        if (fillGaps && now < arrival && li < nl && localLeft - t.ms[local[li]!]! >= reserve - 1e-9) {
          if (opAfter === -2 || opMs >= maxOpMs) open(r, -1);
          localLeft -= t.ms[local[li]!]!;
          now += t.ms[local[li]!]!;
          add(local[li++]!);
          busyUntil = now;
          continue;
        }
        now = Math.max(now, arrival);
      }
      while (next < ne && readyAt(t.ready[exp[next]!]!, r) <= now) {
        const g = t.ready[exp[next]!]!;
        let b = next + 1;
        while (b < ne && t.ready[exp[b]!] === g) b++;
        pushRun(next, b);
        next = b;
      }
      const i = popLive();
      const a = t.ready[i]!;
      // An op of exporting work is cut every `maxOpMs` (its pushes wait for its end) and where
      // work that exports nothing follows or precedes it; an op of work that exports nothing (on
      // a rank that exports nothing, the forward of a loader layout: all of its ops) is cut only
      // where the ready group changes: no push waits for it, and each op pays its launches (one
      // per batch shape). Measured, simulated, fluid, 3 batches, fwd MFU at 16-256 ranks, ops
      // cut at 2 ms -> this: mode (b) longtail 0.606/0.602/0.620/0.602/0.596 ->
      // 0.613/0.613/0.632/0.615/0.610, magi 0.602/0.605/0.577/0.551/0.535 ->
      // 0.607/0.618/0.591/0.578/0.560, bimodal (16-128) 0.614/0.614/0.611/0.608 ->
      // 0.628/0.625/0.624/0.624, backward unchanged; mode (a) fwd/bwd: magi 64 0.337/0.387 ->
      // 0.348/0.397, longtail 128 0.481 -> 0.485 fwd, bimodal 256 0.449 -> 0.453 fwd, magi 256
      // 0.272 -> 0.270 fwd, the rest within 0.002.
      // Without `extend` a task of a later group than its op's opens the next op, so the op's
      // earlier-ready tasks do not wait for that group's arrival, which the estimate places too
      // early when `in` transfers share a NIC (mode (a), 16 ranks, longtail seed 1: the critical
      // rank's first op held a tile ready at 1.7 ms until its next group arrived at 10.1 ms).
      const ex = t.exported[i]!;
      // With `extend` (the backward) an op may still take a task of a later group, but not one whose
      // group the estimate has arriving after the op's work so far would end: the op's earlier
      // tasks would idle for it (mode (a), bimodal 16 ranks seed 2, PXN: a rank's first op, an
      // exporting tile ready from the start, took the tiles of group 0 and waited 2.7 ms for it
      // with 27 ms of local work kept for the end). Simulated, mode (a), backward MFU over paired
      // batches (`bench/quality-ab.ts`, 16 / 32 ranks): PXN +0.0011 / +0.0003 (seeds 1-6), +0.0029
      // / +0.0015 (seeds 7-12), contention +0.0010 / +0.0019, direct +0.0011 / +0.0015; 64-256
      // PXN +0.0008; mode (b) unchanged.
      const later = a > opAfter && (!extend || (opAfter !== -2 && readyAt(a, r) > busyUntil));
      // A cut between two tasks of one push unit lets no push leave earlier (the unit's partial
      // waits for its last task) but costs the next op its launches, one per batch shape: in the
      // backward a 4K x 4K square alone takes about 2.5 ms, so at `maxOpMs` (2) nearly every op
      // was one square and one launch (bimodal, 16 ranks, seed 1, mode (b): 678 ops, 2.4% of the
      // kernels' time in launches against MagiAttention's 0.8%, `npx tsx bench/launch-share.ts
      // --loader-layout`). Such an op grows to UNIT_OP_FACTOR x `maxOpMs` instead; without the
      // bound (one op per unit) a long home run's op delayed its other pushes: bimodal fluid (b)
      // backward MFU at 64-256 ranks fell by 0.008-0.012.
      const same = t.unit !== undefined && lastTask >= 0 && t.unit[lastTask] === t.unit[i];
      const cap = same ? UNIT_OP_FACTOR * maxOpMs : maxOpMs;
      // Far from the rank's end a push has time to travel, and every cut costs the next op its
      // launches: with `extend` (the backward) an op grows past its cut while its next task waits
      // for no later group than the op does, up to TAIL_FRACTION of the rank's work still to come.
      const early = extend && a <= opAfter && opMs < TAIL_FRACTION * (rankMs - doneMs);
      const full = opMs >= cap && !(opMs < POW2_OP_FACTOR * cap && completesBatch(i)) && !early;
      const cut = opExports === 1 || ex === 1 ? opExports !== ex || full || later : a > opAfter;
      // Batches completed before a cut: an exporting op's pulled tasks export too (they would run
      // in a later op, so no push leaves later but this op's, by their time).
      if (cut && opAfter !== -2 && ((opExports === 0 && ex === 0) || opExports === 1))
        now += completeBatches();
      if (opAfter === -2 || cut) open(r, a);
      else if (a > opAfter) {
        opAfter = a;
        after[ops - 1] = a;
      }
      add(i);
      now += t.ms[i]!;
      busyUntil = now;
    }
    // 3. The rest of the local work.
    if (li < nl) {
      open(r, -1);
      while (li < nl) add(local[li++]!);
    }
  }
  offsets[ops] = idsN;
  return {
    compute: {
      rank: rank.slice(0, ops),
      after: after.slice(0, ops),
      taskOffsets: offsets.slice(0, ops + 1),
      taskIds: ids.slice(0, idsN),
    },
    opOfTask,
  };
}

/**
 * Estimated arrival of group g on rank r, ms, from `groupEnd[g * world + r]` (the group's estimated
 * end): 0 for g < 0 (from the start), never for a group past the last.
 */
export function groupArrival(
  groupEnd: Float64Array,
  groups: number,
  world: number,
): (g: number, r: number) => number {
  return (g, r) => (g < 0 ? 0 : g < groups ? groupEnd[g * world + r]! : Number.POSITIVE_INFINITY);
}

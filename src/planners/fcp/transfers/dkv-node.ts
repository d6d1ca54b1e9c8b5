/**
 * Node-level sums of the backward's `dkv` partials (issue 15, deliverable 1: topology-aware
 * transfers). Every rank that computed with keys it is not home for pushes its dK/dV partial of
 * that range to the range's home (backward.ts), one push per home run. When several ranks of one
 * node push partials of one home run to a home on another node, each push crossed the NICs: the
 * ranks of a long sequence's node all need nearly all of its prefix (`longtail` 256 ranks seed 1,
 * mode (a): 79.0M `dkv` tokens across nodes, 3.06M distinct per receiving node; `magi` 64 seed 1:
 * 3.99M and 0.50M). Here such a set is summed on one rank of the sending node, the aggregator,
 * which pushes the sum across once: a `dkv` moves the sender's whole accumulated partial of its
 * range, the partials it received included (docs/plan-format.md), so the aggregator's push covers
 * the union of the set's ranges (`longtail` 256 seed 1: 79.0M -> 30.7M tokens across nodes).
 * MagiAttention's native group-reduce sums a node's partials the same way before one RDMA send
 * (docs/baselines.md, `native_grpcoll.md:90-104`).
 *
 * The aggregator is the rank of the sending node on the home's rail (local id of the home), as in
 * Magi: under PXN the message leaves by that GPU's NIC whoever sends it, and the sets of different
 * homes spread over the node's ranks (the pusher whose op ends last as the aggregator of every run
 * of its sequence received up to 7 partials per run and ended the backward later: `longtail`
 * 128-256 ranks -0.0060 ± 0.0028 backward MFU, simulated). It need not compute with the keys: a
 * rank's partial of keys it never used is zero. Pushes ready in the set's last ready group go
 * straight home: summing them would add a group between the last op and the end of the backward,
 * where `out` pushes wait for every partial into their piece (summing all, +0.0003 ± 0.0008
 * backward at 128-256; the rule: +0.0015 ± 0.0007; docs/results.md, "Session 34").
 */
import { assert } from '../../../core/assert.ts';
import { gatherInt32 } from '../../../core/gather.ts';
import { railRank, sameNode } from '../../../core/nodes.ts';
import type { GroupPlacer } from './groups.ts';
import type { LinkModel } from './links.ts';
import { degreeOf, distinctSlots, placePushes } from './rounds.ts';

/** The `dkv` pushes as backward.ts lists them (one row per pushing rank and home run). */
export interface DkvRows {
  readonly src: Int32Array;
  readonly dst: Int32Array;
  readonly seq: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  /** Home run receiving the push. */
  readonly run: Int32Array;
  /** Last op of the sender using keys of the push; -1: none (an aggregator that used none). */
  readonly op: Int32Array;
}

/** The pushes once a node's partials are summed: the rows given, rerouted, then the added aggregators. */
export interface DkvRoutes extends DkvRows {
  /** Group each push is ready in (an aggregator's is raised once the pushes into it are placed). */
  readonly ready: Int32Array;
  /** For each push into an aggregator, the aggregator's row; else -1. */
  readonly into: Int32Array;
  /** 1 for an aggregator's row (it waits for the pushes `into` it). */
  readonly aggregates: Uint8Array;
}

/**
 * Routes the pushes `d`, ready in groups `ready` (module comment). Pushes of one home run from one
 * rank start at the run's start (a rank's key span is a prefix of its sequence, and its own runs
 * never overlap another home's run), so a set's union is its longest range. One node (or a torus)
 * returns the rows unchanged.
 */
export function dkvRoutes(d: DkvRows, ready: Int32Array, links: LinkModel, world: number): DkvRoutes {
  const n = d.src.length;
  const { src, start, length, run } = d;
  const dst = Int32Array.from(d.dst);
  const len = Int32Array.from(length);
  const into = new Int32Array(n).fill(-1);
  const aggregates = new Uint8Array(n);
  // Aggregators added for sets whose rail rank pushes nothing: [rail, first push of the set].
  const added: number[] = [];
  const addedLen: number[] = [];
  const ns = links.nodeSize;
  if (ns > 1 && world > ns) {
    const node = (r: number): number => Math.floor(r / ns);
    const nodes = Math.ceil(world / ns);
    let runs = 0;
    for (let e = 0; e < n; e++) runs = Math.max(runs, run[e]! + 1);
    assert(runs * nodes * n < 2 ** 53, 'dkv set keys fit a double exactly');
    // Cross-node pushes by (run, sending node, index), one numeric key each (a native numeric
    // sort: the comparator sort was a tenth of mode (b)'s planning at 256 ranks), so each set is a
    // contiguous span.
    const all = new Float64Array(n);
    let m = 0;
    for (let e = 0; e < n; e++)
      if (!sameNode(src[e]!, d.dst[e]!, ns)) all[m++] = (run[e]! * nodes + node(src[e]!)) * n + e;
    const keys = all.subarray(0, m).sort();
    const set: number[] = [];
    const hops: number[] = [];
    for (let i = 0; i < m; ) {
      const set0 = Math.floor(keys[i]! / n);
      set.length = 0;
      let j = i;
      for (; j < m && Math.floor(keys[j]! / n) === set0; j++) set.push(keys[j]! - set0 * n);
      const e0 = set[0]!;
      const rail = railRank(src[e0]!, d.dst[e0]!, ns, world);
      // A last node with fewer ranks than the others may lack the GPU on the home's rail; its
      // pushes then go straight home, as PXN sends such a message by the sender's own NIC
      // (plan/report-nic.ts, pxnNic).
      if (rail < 0) {
        i = j;
        continue;
      }
      // The set's last ready group: its pushes there go straight home, the rest hop to the rail.
      let latest = 0;
      let agg = -1;
      for (const e of set) {
        latest = Math.max(latest, ready[e]!);
        if (src[e] === rail) agg = e;
      }
      hops.length = 0;
      let end = agg >= 0 ? start[agg]! + length[agg]! : 0;
      for (const e of set)
        if (ready[e]! < latest && src[e] !== rail) {
          hops.push(e);
          end = Math.max(end, start[e]! + length[e]!);
        }
      if (hops.length > 0 && (agg >= 0 || hops.length >= 2)) {
        let a = agg;
        if (a < 0) {
          a = n + added.length / 2;
          added.push(rail, e0);
          addedLen.push(end - start[e0]!);
        } else {
          len[a] = end - start[a]!;
          aggregates[a] = 1;
        }
        for (const e of hops) {
          assert(start[e] === start[e0], 'dkv pushes of one run start at the run start');
          dst[e] = rail;
          into[e] = a;
        }
      }
      i = j;
    }
  }
  const k = addedLen.length;
  if (k === 0) return { ...d, dst, length: len, ready, into, aggregates };
  /** Column `col` of the given rows, then `pick(rail, first push of its set, x)` for added row x. */
  const extend = (col: Int32Array, pick: (rail: number, e0: number, x: number) => number): Int32Array => {
    const out = new Int32Array(n + k);
    out.set(col);
    for (let x = 0; x < k; x++) out[n + x] = pick(added[2 * x]!, added[2 * x + 1]!, x);
    return out;
  };
  const aggregatesAll = new Uint8Array(n + k).fill(1);
  aggregatesAll.set(aggregates);
  return {
    src: extend(src, (rail) => rail),
    dst: extend(dst, (_, e0) => d.dst[e0]!),
    seq: extend(d.seq, (_, e0) => d.seq[e0]!),
    start: extend(start, (_, e0) => start[e0]!),
    length: extend(len, (_, __, x) => addedLen[x]!),
    run: extend(run, (_, e0) => run[e0]!),
    op: extend(d.op, () => -1),
    ready: extend(ready, () => 0),
    into: extend(into, () => -1),
    aggregates: aggregatesAll,
  };
}

/**
 * Places routed pushes (transfers/rounds.ts `placePushes`, first-fit from each ready group): every
 * push but the aggregators' first, then each aggregator's from the group after the last push into
 * it. Returns each row's slot, the distinct slots used and the Δ of the routed pushes.
 */
export function placeDkvRoutes(
  placer: GroupPlacer,
  r: DkvRoutes,
  world: number,
  mode: 'matching' | 'naive',
): { slot: Int32Array; rounds: number; delta: number } {
  const n = r.src.length;
  let sums = 0;
  for (let e = 0; e < n; e++) sums += r.aggregates[e]!;
  if (sums === 0) return placePushes(placer, r.src, r.dst, r.ready, world, mode);
  const first = new Int32Array(n - sums);
  const second = new Int32Array(sums);
  for (let e = 0, i1 = 0, i2 = 0; e < n; e++) {
    if (r.aggregates[e] === 1) second[i2++] = e;
    else first[i1++] = e;
  }
  const slot = new Int32Array(n);
  const p1 = placePushes(
    placer,
    gatherInt32(r.src, first),
    gatherInt32(r.dst, first),
    gatherInt32(r.ready, first),
    world,
    mode,
  );
  for (let k = 0; k < first.length; k++) slot[first[k]!] = p1.slot[k]!;
  const ready = Int32Array.from(r.ready);
  for (let k = 0; k < first.length; k++) {
    const a = r.into[first[k]!]!;
    if (a >= 0) ready[a] = Math.max(ready[a]!, placer.groupOf(p1.slot[k]!) + 1);
  }
  const p2 = placePushes(
    placer,
    gatherInt32(r.src, second),
    gatherInt32(r.dst, second),
    gatherInt32(ready, second),
    world,
    mode,
  );
  for (let k = 0; k < second.length; k++) slot[second[k]!] = p2.slot[k]!;
  return { slot, rounds: distinctSlots(slot, placer.slots), delta: degreeOf(r.src, r.dst, world) };
}

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

/** Growable columns of {@link DkvRoutes}. */
type Columns = { -readonly [K in keyof DkvRoutes]: number[] };

/**
 * Routes the pushes `d`, ready in groups `ready` (module comment). Pushes of one home run from one
 * rank start at the run's start (a rank's key span is a prefix of its sequence, and its own runs
 * never overlap another home's run), so a set's union is its longest range. One node (or a torus)
 * returns the rows unchanged.
 */
export function dkvRoutes(d: DkvRows, ready: Int32Array, links: LinkModel, world: number): DkvRoutes {
  const n = d.src.length;
  const { src, dst, start, length, run } = d;
  const c: Columns = {
    src: Array.from(src),
    dst: Array.from(dst),
    seq: Array.from(d.seq),
    start: Array.from(start),
    length: Array.from(length),
    run: Array.from(run),
    op: Array.from(d.op),
    ready: Array.from(ready),
    into: new Array<number>(n).fill(-1),
    aggregates: new Array<number>(n).fill(0),
  };
  const ns = links.nodeSize;
  if (ns > 1 && world > ns) {
    const node = (r: number): number => Math.floor(r / ns);
    // Cross-node pushes by (run, sending node, index): each set is a contiguous span.
    const cross: number[] = [];
    for (let e = 0; e < n; e++) if (node(src[e]!) !== node(dst[e]!)) cross.push(e);
    cross.sort((a, b) => run[a]! - run[b]! || node(src[a]!) - node(src[b]!) || a - b);
    for (let i = 0; i < cross.length; ) {
      const e0 = cross[i]!;
      let j = i + 1;
      while (j < cross.length && run[cross[j]!] === run[e0] && node(src[cross[j]!]!) === node(src[e0]!)) j++;
      sumSet(c, cross.slice(i, j), node(src[e0]!) * ns + (dst[e0]! % ns), ready);
      i = j;
    }
  }
  return {
    src: Int32Array.from(c.src),
    dst: Int32Array.from(c.dst),
    seq: Int32Array.from(c.seq),
    start: Int32Array.from(c.start),
    length: Int32Array.from(c.length),
    run: Int32Array.from(c.run),
    op: Int32Array.from(c.op),
    ready: Int32Array.from(c.ready),
    into: Int32Array.from(c.into),
    aggregates: Uint8Array.from(c.aggregates),
  };
}

/** Sums the set `set` (pushes of one run from one node) on `rail` where two or more partials meet. */
function sumSet(c: Columns, set: readonly number[], rail: number, ready: Int32Array): void {
  let latest = 0;
  for (const e of set) latest = Math.max(latest, ready[e]!);
  // Pushes that hop to the rail rank: ready before the set's last group, and not its own.
  const hops = set.filter((e) => ready[e]! < latest && c.src[e] !== rail);
  let agg = set.find((e) => c.src[e] === rail) ?? -1;
  if (hops.length === 0 || (agg < 0 && hops.length < 2)) return;
  const e0 = set[0]!;
  if (agg < 0) {
    agg = c.src.length;
    c.src.push(rail);
    c.dst.push(c.dst[e0]!);
    c.seq.push(c.seq[e0]!);
    c.start.push(c.start[e0]!);
    c.length.push(0);
    c.run.push(c.run[e0]!);
    c.op.push(-1);
    c.ready.push(0);
    c.into.push(-1);
    c.aggregates.push(0);
  }
  let end = c.start[agg]! + c.length[agg]!;
  for (const e of hops) {
    assert(c.start[e] === c.start[agg], 'dkv pushes of one run start at the run start');
    end = Math.max(end, c.start[e]! + c.length[e]!);
    c.dst[e] = rail;
    c.into[e] = agg;
  }
  c.length[agg] = end - c.start[agg]!;
  c.aggregates[agg] = 1;
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
  const first: number[] = [];
  const second: number[] = [];
  for (let e = 0; e < n; e++) (r.aggregates[e] === 1 ? second : first).push(e);
  const pick = (ids: readonly number[], a: Int32Array): Int32Array => Int32Array.from(ids, (e) => a[e]!);
  const slot = new Int32Array(n);
  const p1 = placePushes(placer, pick(first, r.src), pick(first, r.dst), pick(first, r.ready), world, mode);
  for (let k = 0; k < first.length; k++) slot[first[k]!] = p1.slot[k]!;
  const ready = Int32Array.from(r.ready);
  for (const e of first) {
    const a = r.into[e]!;
    if (a >= 0) ready[a] = Math.max(ready[a]!, placer.groupOf(slot[e]!) + 1);
  }
  const p2 = placePushes(placer, pick(second, r.src), pick(second, r.dst), pick(second, ready), world, mode);
  for (let k = 0; k < second.length; k++) slot[second[k]!] = p2.slot[k]!;
  return { slot, rounds: distinctSlots(slot, placer.slots), delta: degreeOf(r.src, r.dst, world) };
}

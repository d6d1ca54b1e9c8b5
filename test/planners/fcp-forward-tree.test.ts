/**
 * Forwarding trees for hot K/V senders (src/planners/fcp/transfers/forward-tree.ts): every
 * receiver still gets each range once, a forwarder sends only a range it receives itself (a
 * covering one, brought by the edge `relay` names), chains stay acyclic within `depth` hops and
 * `fan` forwards, total bytes are unchanged and the busiest rank's load never grows; in plans,
 * forwarded ranges arrive before they are forwarded and before their first consumer (the
 * validator's rule 3), rounds stay congestion-free and no receiver gets a position twice.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import type { KvEdges } from '../../src/planners/fcp/transfers/fetch.ts';
import { forwardTrees, hopLevels, type TreeOptions } from '../../src/planners/fcp/transfers/forward-tree.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** Random direct edges: ranges of a few sequences, each sent by one owner to distinct receivers. */
const edgesArb = fc
  .record({
    world: fc.integer({ min: 3, max: 24 }),
    ranges: fc.array(
      fc.record({
        seq: fc.integer({ min: 0, max: 3 }),
        start: fc.integer({ min: 0, max: 7 }).map((x) => 64 * x),
        owner: fc.nat(),
        receivers: fc.array(fc.record({ rank: fc.nat(), length: fc.integer({ min: 1, max: 64 }) }), {
          minLength: 1,
          maxLength: 12,
        }),
      }),
      { minLength: 1, maxLength: 40 },
    ),
  })
  .map(({ world, ranges }) => {
    const cols: Record<'src' | 'dst' | 'seq' | 'start' | 'length' | 'rs' | 'dep', number[]> = {
      src: [],
      dst: [],
      seq: [],
      start: [],
      length: [],
      rs: [],
      dep: [],
    };
    const seen = new Set<string>();
    for (const r of ranges) {
      const owner = r.owner % world;
      for (const v of r.receivers) {
        const d = v.rank % world;
        const key = `${r.seq}:${r.start}:${d}`;
        if (d === owner || seen.has(key)) continue; // one fetch of a range per receiver
        seen.add(key);
        cols.src.push(owner);
        cols.dst.push(d);
        cols.seq.push(r.seq);
        cols.start.push(r.start);
        cols.length.push(v.length);
        cols.rs.push(cols.rs.length);
        cols.dep.push(cols.rs.length % 3 === 0 ? 7 : -1);
      }
    }
    const n = cols.src.length;
    const edges: KvEdges = {
      src: Int32Array.from(cols.src),
      dst: Int32Array.from(cols.dst),
      seq: Int32Array.from(cols.seq),
      start: Int32Array.from(cols.start),
      length: Int32Array.from(cols.length),
      rs: Int32Array.from(cols.rs),
      dep: Int32Array.from(cols.dep),
      relay: new Int32Array(n).fill(-1),
    };
    return { world, edges };
  });

const optsArb = fc.record({
  slack: fc.constantFrom(0, 0.05, 0.3),
  fan: fc.integer({ min: 1, max: 3 }),
  depth: fc.integer({ min: 2, max: 4 }),
});

/** Sent plus received tokens per rank. */
function loads(e: KvEdges, world: number): Float64Array {
  const out = new Float64Array(world);
  for (let i = 0; i < e.src.length; i++) {
    out[e.src[i]!]! += e.length[i]!;
    out[e.dst[i]!]! += e.length[i]!;
  }
  return out;
}

const max = (a: Float64Array): number => a.reduce((m, v) => Math.max(m, v), 0);

/** The tree invariants of `out` against the direct edges `e` (throws on the first broken one). */
function checkTrees(e: KvEdges, out: KvEdges, world: number, o: TreeOptions): void {
  const n = e.src.length;
  for (const k of ['dst', 'seq', 'start', 'length', 'rs'] as const)
    assert.deepEqual(out[k], e[k], `${k} changed: every receiver keeps its range`);
  const level = hopLevels(out.relay);
  const forwards = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const f = out.relay[i]!;
    if (f < 0) {
      assert.equal(out.src[i], e.src[i], 'a direct edge keeps its sender');
      assert.equal(out.dep[i], e.dep[i]);
      continue;
    }
    assert.ok(f !== i && f < n);
    assert.equal(out.src[i], out.dst[f], 'a forwarder sends what it receives');
    assert.equal(out.seq[f], out.seq[i]);
    assert.equal(out.start[f], out.start[i]);
    assert.ok(out.length[f]! >= out.length[i]!, 'the feed covers the forwarded range');
    assert.equal(out.dep[i], -1, 'a forward waits for its feed, not for a reshuffle piece');
    forwards[f]!++;
  }
  for (let i = 0; i < n; i++) {
    // hopLevels follows chains; a cycle would never reach a direct edge.
    let x = i;
    for (let h = 0; out.relay[x]! >= 0; h++) {
      assert.ok(h <= n, 'relay chains are acyclic');
      x = out.relay[x]!;
    }
    assert.ok(level[i]! <= o.depth, `hop ${level[i]} > depth ${o.depth}`);
    assert.ok(forwards[i]! <= o.fan, `${forwards[i]} forwards > fan ${o.fan}`);
  }
  const before = loads(e, world);
  const after = loads(out, world);
  assert.equal(
    after.reduce((s, v) => s + v, 0),
    before.reduce((s, v) => s + v, 0),
    'total bytes unchanged',
  );
  assert.ok(max(after) <= max(before), `busiest load grew: ${max(before)} -> ${max(after)}`);
}

test('forwardTrees: each receiver keeps its range, forwarders hold what they send, acyclic within depth and fan, the max load never grows', () => {
  let forwarded = 0;
  fc.assert(
    fc.property(edgesArb, optsArb, fc.constantFrom(1, 2, 4), ({ world, edges }, o, g) => {
      const out = forwardTrees(edges, world, g, null, o);
      checkTrees(edges, out, world, o);
      for (let i = 0; i < out.relay.length; i++) if (out.relay[i]! >= 0) forwarded++;
    }),
    { numRuns: 300 },
  );
  assert.ok(forwarded > 0, 'some ranges were forwarded');
});

test('forwardTrees: a hot owner of a range many ranks need sends it to fewer of them', () => {
  // Rank 0 sends one range to ranks 1..12; nothing else moves: the busiest load must fall.
  const k = 12;
  const edges: KvEdges = {
    src: new Int32Array(k),
    dst: Int32Array.from({ length: k }, (_, i) => i + 1),
    seq: new Int32Array(k),
    start: new Int32Array(k),
    length: new Int32Array(k).fill(100),
    rs: Int32Array.from({ length: k }, (_, i) => i),
    dep: new Int32Array(k).fill(-1),
    relay: new Int32Array(k).fill(-1),
  };
  const o = { slack: 0, fan: 2, depth: 4 };
  const out = forwardTrees(edges, k + 1, 1, null, o);
  checkTrees(edges, out, k + 1, o);
  const l = loads(out, k + 1);
  assert.ok(l[0]! < 600, `owner still sends ${l[0]} of 1200 tokens`);
  assert.deepEqual(Array.from(hopLevels(Int32Array.from([-1, 0, 1, -1, 3]))), [1, 2, 3, 1, 2]);
});

/** Receptions of one phase's `kv` rows that repeat a position a receiver already gets. */
function repeatedPositions(plan: Plan, dir: 'forward' | 'backward'): number {
  const t = plan[dir].transfers;
  const got = new Map<string, number[]>();
  let repeats = 0;
  for (let i = 0; i < t.src.length; i++) {
    if (t.kind[i] !== Kind.kv) continue;
    const key = `${t.dst[i]}:${t.seq[i]}`;
    const list = got.get(key) ?? [];
    const a = t.start[i]!;
    const b = a + t.length[i]!;
    for (let j = 0; j < list.length; j += 2) if (list[j]! < b && a < list[j + 1]!) repeats++;
    list.push(a, b);
    got.set(key, list);
  }
  return repeats;
}

test('plans with forwarding trees: valid (ranges held before sent and before use), congestion-free, each position received once', () => {
  let forwardedRows = 0;
  for (const seed of [1, 2, 3])
    for (const mask of ['causal', 'full'] as const)
      for (const loaderLayout of [false, true]) {
        const p = resolveProblem({ batch: 'longtail', world: 24, tokensPerRank: 4096, seed, mask });
        const o: FcpPlannerOptions = { blockSize: 512, loaderLayout, fanOut: true, tune: false };
        const plan = fcpPlanner.plan(p, o);
        const label = `seed ${seed} ${mask} ${loaderLayout ? '(b)' : '(a)'}`;
        const { issues, report } = validatePlan(plan);
        assert.deepEqual(issues.slice(0, 3).map(formatIssue), [], label);
        assert.equal(report.attendedPairs, report.expectedPairs, label);
        for (const dir of ['forward', 'backward'] as const) {
          assert.ok(report[dir].congestion <= 1, `${label} ${dir}: congestion ${report[dir].congestion}`);
          assert.equal(repeatedPositions(plan, dir), 0, `${label} ${dir}: a position received twice`);
        }
        // Forwarded rows: senders holding no layout row of the range (relays or tree forwards).
        const t = plan.forward.transfers;
        for (let i = 0; i < t.src.length; i++) {
          if (t.kind[i] !== Kind.kv) continue;
          let held = false;
          for (const l of [plan.homeLayout, plan.userLayout])
            for (let j = 0; j < l.rank.length && !held; j++)
              held =
                l.rank[j] === t.src[i] &&
                l.seq[j] === t.seq[i] &&
                l.start[j]! <= t.start[i]! &&
                l.start[j]! + l.length[j]! >= t.start[i]! + t.length[i]!;
          if (!held) forwardedRows++;
        }
      }
  assert.ok(forwardedRows > 0, 'some K/V was forwarded');
});

/**
 * Same-slot forwarding (src/planners/fcp/transfers/same-slot.ts): a hot sender's `kv` transfer is
 * handed, in its own round, to a rank that received a covering copy in an earlier group. Checked
 * on random placed rounds: every receiver keeps its range and round, a new sender holds the range
 * before the transfer's group and adds no NIC crossing (in the receiver's node when the direct
 * sender is), rounds stay matchings, bytes are unchanged and the busiest load never grows; and in
 * plans (mode (a) and (b)): valid, congestion-free, kv rounds = Δ of the direct graph
 * (`kvOrigin`), each position received once, and some transfers are handed over.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import { type SameSlotInput, sameSlotForward } from '../../src/planners/fcp/transfers/same-slot.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/**
 * Random placed transfers: ranges of a few sequences, each sent by its owner to distinct
 * receivers, placed first-fit into rounds (a matching each) of `per` rounds per group.
 */
const placedArb = fc
  .record({
    world: fc.integer({ min: 3, max: 20 }),
    g: fc.constantFrom(1, 2, 4),
    per: fc.integer({ min: 1, max: 4 }),
    ranges: fc.array(
      fc.record({
        seq: fc.integer({ min: 0, max: 2 }),
        start: fc.integer({ min: 0, max: 5 }).map((x) => 32 * x),
        owner: fc.nat(),
        receivers: fc.array(fc.record({ rank: fc.nat(), length: fc.integer({ min: 1, max: 32 }) }), {
          minLength: 1,
          maxLength: 10,
        }),
      }),
      { minLength: 1, maxLength: 30 },
    ),
  })
  .map(({ world, g, per, ranges }) => {
    const cols: number[][] = [[], [], [], [], [], []]; // src dst seq start length slot
    const seen = new Set<string>();
    const busy = new Set<string>(); // `${slot}:s${rank}` / `${slot}:r${rank}`
    for (const r of ranges) {
      const owner = r.owner % world;
      for (const v of r.receivers) {
        const d = v.rank % world;
        const key = `${r.seq}:${r.start}:${d}`;
        if (d === owner || seen.has(key)) continue;
        seen.add(key);
        let slot = 0;
        while (busy.has(`${slot}:s${owner}`) || busy.has(`${slot}:r${d}`)) slot++;
        busy.add(`${slot}:s${owner}`);
        busy.add(`${slot}:r${d}`);
        for (const [k, x] of [owner, d, r.seq, r.start, v.length, slot].entries()) cols[k]!.push(x);
      }
    }
    const [src, dst, seq, start, length, slot] = cols.map((c) => Int32Array.from(c)) as Int32Array[];
    const group = Int32Array.from(slot!, (s) => Math.floor(s / per));
    const sendCount = new Int32Array((Math.max(-1, ...slot!) + 1) * world);
    for (let e = 0; e < slot!.length; e++) sendCount[slot![e]! * world + src![e]!]!++;
    const input: SameSlotInput = {
      src: src!,
      dst: dst!,
      seq: seq!,
      start: start!,
      length: length!,
      group,
      slot: slot!,
      sendCount,
      world,
      gpusPerNode: g,
      baseLoad: null,
      slack: 0,
    };
    return input;
  });

function loads(x: SameSlotInput, src: Int32Array): Float64Array {
  const out = new Float64Array(x.world);
  for (let e = 0; e < src.length; e++) {
    out[src[e]!]! += x.length[e]!;
    out[x.dst[e]!]! += x.length[e]!;
  }
  return out;
}

const max = (a: ArrayLike<number>): number => Array.from(a).reduce((m, v) => Math.max(m, v), 0);

/** The hand-over invariants of `src` against the input (throws on the first broken one). */
function checkHandOver(x: SameSlotInput, src: Int32Array): number {
  const n = x.src.length;
  const g = x.gpusPerNode;
  const sends = new Set<string>();
  let moved = 0;
  for (let e = 0; e < n; e++) {
    const key = `${x.slot[e]}:${src[e]}`;
    assert.ok(!sends.has(key), `rank ${src[e]} sends twice in slot ${x.slot[e]}`);
    sends.add(key);
    if (src[e] === x.src[e]) continue;
    moved++;
    const f = src[e]!;
    assert.notEqual(f, x.dst[e], 'a rank does not send to itself');
    // No hand-over adds a NIC crossing: a transfer inside the receiver's node stays inside it.
    const node = (r: number): number => Math.floor(r / g);
    if (node(x.src[e]!) === node(x.dst[e]!))
      assert.equal(node(f), node(x.dst[e]!), 'a forwarder outside the receiver node');
    let held = false;
    for (let h = 0; h < n && !held; h++)
      held =
        x.dst[h] === f &&
        x.seq[h] === x.seq[e] &&
        x.start[h] === x.start[e] &&
        x.length[h]! >= x.length[e]! &&
        x.group[h]! < x.group[e]!;
    assert.ok(held, `rank ${f} forwards a range it does not hold before group ${x.group[e]}`);
  }
  const before = loads(x, x.src);
  const after = loads(x, src);
  assert.equal(
    after.reduce((s, v) => s + v, 0),
    before.reduce((s, v) => s + v, 0),
  );
  assert.ok(max(after) <= max(before), `busiest load grew: ${max(before)} -> ${max(after)}`);
  return moved;
}

test('sameSlotForward: holders forward in the same round without a new NIC crossing, rounds stay matchings, the max load never grows', () => {
  let moved = 0;
  fc.assert(
    fc.property(placedArb, (x) => {
      moved += checkHandOver(x, sameSlotForward(x));
    }),
    { numRuns: 300 },
  );
  assert.ok(moved > 0, 'some transfers were handed over');
});

/** `kv` rows of a phase that repeat a position their receiver already gets. */
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

/** `kv` rows whose sender holds no layout row of the range: forwarded. */
function forwardedRows(plan: Plan, dir: 'forward' | 'backward'): number {
  const t = plan[dir].transfers;
  let out = 0;
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
    if (!held) out++;
  }
  return out;
}

test('plans with same-slot forwarding: valid, congestion-free, kv rounds = direct Δ, each position received once', () => {
  let forwarded = 0;
  for (const seed of [1, 2, 3])
    for (const mask of ['causal', 'full'] as const)
      for (const loaderLayout of [false, true]) {
        const p = resolveProblem({ batch: 'longtail', world: 24, tokensPerRank: 4096, seed, mask });
        const o: FcpPlannerOptions = { blockSize: 512, loaderLayout, tune: false };
        const plan = fcpPlanner.plan(p, o);
        const label = `seed ${seed} ${mask} ${loaderLayout ? '(b)' : '(a)'}`;
        const { issues, report } = validatePlan(plan);
        assert.deepEqual(issues.slice(0, 3).map(formatIssue), [], label);
        assert.equal(report.attendedPairs, report.expectedPairs, label);
        for (const dir of ['forward', 'backward'] as const) {
          const r = report[dir];
          assert.ok(r.congestion <= 1, `${label} ${dir}: congestion ${r.congestion}`);
          assert.equal(r.kvRounds, r.kvDirectDelta, `${label} ${dir}: kv rounds = direct Δ`);
          assert.ok(r.kvDelta <= r.kvRounds, `${label} ${dir}: Δ within the rounds`);
          assert.equal(repeatedPositions(plan, dir), 0, `${label} ${dir}: a position received twice`);
          forwarded += forwardedRows(plan, dir);
        }
      }
  assert.ok(forwarded > 0, 'some K/V was forwarded');
});

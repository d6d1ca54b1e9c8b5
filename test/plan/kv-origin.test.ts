/**
 * Direct senders (`Phase.kvOrigin`, docs/plan-format.md): FCP writes them when it hands `kv`
 * transfers over within their rounds (same-slot.ts); they survive the JSON round trip, the report
 * rebuilds the direct graph's Δ from them (`kvDirectDelta` = kv rounds >= kvDelta), and the
 * validator rejects a wrong length, a non-rank, a non-`kv` row with another sender than its own,
 * an origin that is the row's receiver and one that does not hold the range (code `plan.kvOrigin`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planFromJson, planToJson } from '../../src/plan/io.ts';
import { planReport } from '../../src/plan/report.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const options: FcpPlannerOptions = { blockSize: 512, loaderLayout: true, tune: false };
const plan: Plan = fcpPlanner.plan(
  resolveProblem({ batch: 'longtail', world: 24, tokensPerRank: 4096, seed: 1 }),
  options,
);

test('kvOrigin: written for hand-overs, kept by the JSON round trip, read by the report', () => {
  const o = plan.forward.kvOrigin;
  assert.ok(o instanceof Int32Array, 'the forward hands transfers over');
  const t = plan.forward.transfers;
  assert.equal(o.length, t.src.length);
  let handed = 0;
  for (let i = 0; i < o.length; i++) if (o[i] !== t.src[i]) handed++;
  assert.ok(handed > 0);
  const back = planFromJson(JSON.parse(planToJson(plan)));
  assert.deepEqual(back.forward.kvOrigin, o);
  const r = planReport(back);
  for (const dir of ['forward', 'backward'] as const) {
    assert.equal(r[dir].kvRounds, r[dir].kvDirectDelta, dir);
    assert.ok(r[dir].kvDelta <= r[dir].kvDirectDelta, dir);
  }
  assert.deepEqual(validatePlan(back).issues, []);
  // Without the field the direct graph is the plan's own.
  const { kvOrigin: _o, ...fwd } = plan.forward;
  const bare = planReport({ ...plan, forward: fwd });
  assert.equal(bare.forward.kvDirectDelta, bare.forward.kvDelta);
});

test('kvOrigin: the validator rejects a wrong length, non-ranks, other senders of non-kv rows, self-loops', () => {
  let nonKv = 0;
  for (const name of ['forward', 'backward'] as const) {
    const ph = plan[name];
    const o = ph.kvOrigin;
    assert.ok(o, `${name} hands transfers over`);
    const t = ph.transfers;
    const codes = (kvOrigin: Int32Array): string[] =>
      validatePlan({ ...plan, [name]: { ...ph, kvOrigin } }).issues.map((x) => x.code);
    assert.deepEqual(codes(o.subarray(1)), ['plan.kvOrigin']);
    const bad = o.slice();
    bad[0] = plan.world;
    assert.deepEqual(codes(bad), ['plan.kvOrigin']);
    const kv = t.kind.indexOf(Kind.kv);
    const self = o.slice();
    self[kv] = t.dst[kv]!;
    assert.deepEqual(codes(self), ['plan.kvOrigin']);
    const other = t.kind.findIndex((k) => k !== Kind.kv);
    if (other >= 0) {
      nonKv++;
      const moved = o.slice();
      moved[other] = t.src[other] === 0 ? 1 : 0;
      if (moved[other] === t.dst[other]) moved[other] = 2;
      assert.deepEqual(codes(moved), ['plan.kvOrigin']);
    }
  }
  assert.ok(nonKv > 0, 'a phase with rows of other kinds (the backward: dkv)');
});

test('kvOrigin: the validator rejects a direct sender that does not hold the range before its group', () => {
  for (const name of ['forward', 'backward'] as const) {
    const ph = plan[name];
    const o = ph.kvOrigin!;
    const t = ph.transfers;
    // A handed-over row's origin moved to a rank that neither keeps the range in the layout nor
    // receives it before the row's group.
    let done = false;
    for (let i = 0; i < o.length && !done; i++) {
      if (t.kind[i] !== Kind.kv || o[i] === t.src[i]) continue;
      const holds = (r: number): boolean => {
        const l = plan.homeLayout;
        for (let j = 0; j < l.rank.length; j++)
          if (
            l.rank[j] === r &&
            l.seq[j] === t.seq[i] &&
            l.start[j]! <= t.start[i]! &&
            l.start[j]! + l.length[j]! >= t.start[i]! + t.length[i]!
          )
            return true;
        for (let k = 0; k < t.src.length; k++)
          if (
            t.kind[k] === Kind.kv &&
            t.dst[k] === r &&
            t.seq[k] === t.seq[i] &&
            t.start[k]! <= t.start[i]! &&
            t.start[k]! + t.length[k]! >= t.start[i]! + t.length[i]!
          )
            return true;
        return false;
      };
      for (let r = 0; r < plan.world && !done; r++) {
        if (r === t.dst[i] || r === t.src[i] || holds(r)) continue;
        const bad = o.slice();
        bad[i] = r;
        const codes = validatePlan({ ...plan, [name]: { ...ph, kvOrigin: bad } }).issues.map((x) => x.code);
        assert.deepEqual(codes, ['plan.kvOrigin'], `${name} row ${i} origin ${r}`);
        done = true;
      }
    }
    assert.ok(done, `${name}: a handed-over row and a rank without its range`);
  }
});

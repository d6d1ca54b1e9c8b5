/**
 * FCP plans for the cluster of the problem (`--cluster`): the timeline estimate reads the link
 * bandwidths and latency from it (links.ts), so a faster NIC shortens the estimated groups and
 * changes where pushes go, while the placement (which does not model the network) stays put.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatIssue } from '../../src/core/issues.ts';
import { attendedPairs, kvBytesPerToken, LLAMA3_70B } from '../../src/model/attention.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { planFcp } from '../../src/planners/fcp/index.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { GroupPlacer } from '../../src/planners/fcp/transfers/groups.ts';
import { linkModel } from '../../src/planners/fcp/transfers/links.ts';
import { estimateGroups, type TimelineContext } from '../../src/planners/fcp/transfers/timeline.ts';
import { TransferList } from '../../src/planners/fcp/transfers/transfer-list.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

test('link model follows the cluster preset', () => {
  const h = linkModel(resolveCluster('hopper-ib'), 8);
  assert.deepEqual(
    [h.nodeSize, h.interBytesPerMs, h.intraBytesPerMs, h.groupLatencyMs, h.computeSlowdown],
    [8, 50e6, 400e6, 0.01, 132 / 126],
  );
  const r = linkModel(resolveCluster('ratio-5920'), 8);
  assert.equal(r.interBytesPerMs, resolveCluster('ratio-5920').nicGBps * 1e6);
  assert.ok(r.interBytesPerMs > 3 * h.interBytesPerMs);
  const t = linkModel(resolveCluster('torus'), 8);
  assert.equal(t.nodeSize, 1, 'a torus has no NVLink node');
  assert.equal(t.intraBytesPerMs, t.interBytesPerMs);
});

test('estimated group time is bytes over the link class of the cluster, plus one latency', () => {
  const tokens = 8192;
  const bytes = tokens * kvBytesPerToken(LLAMA3_70B);
  for (const name of ['hopper-ib', 'ratio-5920', 'torus']) {
    const links = linkModel(resolveCluster(name), 8);
    const ctx: TimelineContext = {
      world: 16,
      links,
      model: LLAMA3_70B,
      causal: true,
      dir: 'forward',
      tm: new KernelTime(LLAMA3_70B),
    };
    const placer = new GroupPlacer(4, 16);
    const list = new TransferList();
    // Group 0: rank 0 -> 9 (across nodes on the switch); group 1: rank 0 -> 1 (inside a node).
    const s0 = placer.place(0);
    placer.mark(s0, 0, 9);
    list.add(s0, 0, 9, Kind.kv, 0, 0, tokens);
    const s1 = placer.place(1);
    placer.mark(s1, 0, 1);
    list.add(s1, 0, 1, Kind.kv, 0, 0, tokens);
    const { groupEnd } = estimateGroups(ctx, placer, list);
    const g0 = bytes / links.interBytesPerMs + links.groupLatencyMs;
    const g1 = bytes / links.intraBytesPerMs + links.groupLatencyMs;
    assert.ok(Math.abs(groupEnd[0 * 16 + 0]! - g0) < 1e-9, `${name}: group 0`);
    assert.ok(Math.abs(groupEnd[1 * 16 + 0]! - (g0 + g1)) < 1e-9, `${name}: group 1`);
    assert.equal(groupEnd[0 * 16 + 5], 0, `${name}: an idle rank spends nothing`);
  }
});

/** Attended (causal) query-key pairs of each rank's tasks. */
function pairsPerRank(plan: Plan): number[] {
  const t = plan.tasks;
  const out = new Array<number>(plan.world).fill(0);
  for (let i = 0; i < t.rank.length; i++)
    out[t.rank[i]!]! += attendedPairs(true, t.qStart[i]!, t.qLength[i]!, t.kvStart[i]!, t.kvLength[i]!);
  return out;
}

test('fcp plans differ by cluster where the network enters, and stay valid', () => {
  const plans = ['hopper-ib', 'ratio-5920', 'torus'].map((cluster) => {
    const problem = resolveProblem({ batch: 'longtail', world: 32, tokensPerRank: 8192, seed: 3, cluster });
    // The self-tuner picks its group size by the estimated timeline, which reads the links, and
    // the group size shapes the tasks; the comparison below is of one candidate (budget 0), the
    // tuned plan is checked for validity as well.
    const plan = planFcp(problem, { planBudgetMs: 0 }).plan;
    for (const p of [plan, planFcp(problem).plan]) {
      const { issues, report } = validatePlan(p);
      assert.deepEqual(issues.slice(0, 3).map(formatIssue), [], `${cluster}: plan breaks a rule`);
      assert.ok(report.forward.congestion <= 1 && report.backward.congestion <= 1);
    }
    return plan;
  });
  const [hopper, ratio, torus] = plans as [(typeof plans)[0], (typeof plans)[0], (typeof plans)[0]];
  // Placement ignores link speeds on a switch: same home layout, the same work on every rank (the
  // tasks' tile merges follow the `kv` groups, which the need order places by the links: need.ts).
  assert.deepEqual(ratio.homeLayout, hopper.homeLayout);
  assert.deepEqual(pairsPerRank(ratio), pairsPerRank(hopper));
  assert.ok(
    pairsPerRank(hopper).every((x) => x > 0),
    'every rank has work',
  );
  // The push placement and the op order read the estimated timeline, which reads the links.
  const same = (a: typeof hopper, b: typeof hopper): boolean =>
    JSON.stringify([a.forward, a.backward]) === JSON.stringify([b.forward, b.backward]);
  assert.ok(!same(hopper, ratio), 'ratio-5920 (3.3x the NIC) must change the phases');
  // A torus has no NVLink node: the locality tie-break and the sender choice change.
  assert.ok(!same(hopper, torus) || JSON.stringify(hopper.homeLayout) !== JSON.stringify(torus.homeLayout));
});

test('a receiver of a busy sender waits for the sender: the group ends with its busiest partner', () => {
  const links = linkModel(resolveCluster('hopper-ib'), 8);
  const ctx: TimelineContext = {
    world: 32,
    links,
    model: LLAMA3_70B,
    causal: true,
    dir: 'forward',
    tm: new KernelTime(LLAMA3_70B),
  };
  const placer = new GroupPlacer(16, 32);
  const list = new TransferList();
  // Rank 0 sends 1024 tokens to each of ranks 8, 16, 24 (three nodes away) in one group.
  for (const d of [8, 16, 24]) {
    const slot = placer.place(0);
    placer.mark(slot, 0, d);
    list.add(slot, 0, d, Kind.kv, 0, 0, 1024);
  }
  const { groupEnd } = estimateGroups(ctx, placer, list);
  const one = (1024 * kvBytesPerToken(LLAMA3_70B)) / links.interBytesPerMs;
  const sender = 3 * one + links.groupLatencyMs;
  assert.ok(Math.abs(groupEnd[0]! - sender) < 1e-9);
  // Each receiver's own bytes take `one`, but its flow shares rank 0's NIC with two others.
  for (const d of [8, 16, 24]) assert.ok(Math.abs(groupEnd[d]! - sender) < 1e-9, `rank ${d}`);
});

test('under the contention network a port with k flows is slower by the fitted efficiency and message cost', () => {
  const cluster = resolveCluster('hopper-ib', { network: 'contention' });
  const links = linkModel(cluster, 8);
  assert.ok(links.contentionLoss > 0 && links.contentionMsgMs > 0);
  assert.equal(linkModel(resolveCluster('hopper-ib'), 8).contentionLoss, 0, 'fluid: no contention');
  const ctx: TimelineContext = {
    world: 32,
    links,
    model: LLAMA3_70B,
    causal: true,
    dir: 'forward',
    tm: new KernelTime(LLAMA3_70B),
  };
  const placer = new GroupPlacer(16, 32);
  const list = new TransferList();
  for (const d of [8, 16, 24]) {
    const slot = placer.place(0);
    placer.mark(slot, 0, d);
    list.add(slot, 0, d, Kind.kv, 0, 0, 1024);
  }
  const { groupEnd } = estimateGroups(ctx, placer, list);
  const bytes = 3 * 1024 * kvBytesPerToken(LLAMA3_70B);
  const eff = 1 - links.contentionLoss * (1 - 1 / 3);
  const expected = bytes / (links.interBytesPerMs * eff) + 2 * links.contentionMsgMs + links.groupLatencyMs;
  assert.ok(Math.abs(groupEnd[0]! - expected) < 1e-9, `${groupEnd[0]} vs ${expected}`);
});

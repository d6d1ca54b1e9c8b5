/**
 * The simulator against hand-computed answers. A toy model (1 head, head dim 1, 1 byte per element:
 * K+V = 2 bytes per token) on a toy cluster: one GPU per node, NIC 10 bytes/ms, no latency, no SMs
 * for communication, peak 8e-6 TFLOP/s; kernels run at exactly 0.5 of peak (a synthetic calibration)
 * with no launch overhead. So a full 200 x 500 task (1e5 pairs, 4e5 FLOPs) takes 100 ms, and a
 * `kv` transfer of 500 tokens (1000 bytes) alone on its link takes 100 ms.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { calibrationFromJson } from '../../src/cost/calibration.ts';
import { getExecutor } from '../../src/executors/registry.ts';
import { type SimOptions, type SimResult, simulatePlan } from '../../src/executors/sim/index.ts';
import { expandChunks } from '../../src/plan/expand.ts';
import { emptyPhase, Kind, type Phase, PLAN_FORMAT, type Plan } from '../../src/plan/types.ts';
import { planRing } from '../../src/planners/ring/index.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

const CAL = (() => {
  const rows = [];
  for (const lq of [128, 4096])
    for (const r of [1, 8])
      for (const causal of [true, false]) {
        const lk = lq * r;
        const pairs = causal ? lq * (lk - lq) + (lq * (lq + 1)) / 2 : lq * lk;
        const ms = (d: number): number => (pairs * 4 * 64 * 128 * d) / (989e9 * 0.5);
        rows.push({ kernel: 'flash', lq, lk, causal, segments: 1, fwd_ms: ms(1), bwd_ms: ms(2.5) });
      }
  return calibrationFromJson([{ path: 'synthetic-0.5', json: { peak_tflops: 989, rows } }]);
})();

const toyCluster = (o: Parameters<typeof resolveCluster>[1] = {}) =>
  resolveCluster('hopper-ib', {
    gpusPerNode: 1,
    nicGBps: 1e-5,
    latencyUs: 0,
    nvlinkLatencyUs: 0,
    commSms: 0,
    peakTflops: 8e-6,
    ...o,
  });

// Toy plans break rules on purpose (one transfer, no backward): only the engine is under test.
const OPTS: SimOptions = {
  cluster: toyCluster(),
  calibration: CAL,
  launchMs: { forward: 0, backward: 0 },
  skipValidation: true,
};

interface X {
  src: number;
  dst: number;
  tokens: number;
  round: number;
  kind?: number;
}
interface Op {
  rank: number;
  after: number;
  tasks: number[];
}

/** A forward-only plan from transfers, compute ops and sendAfter pairs ([transfer, op]). */
function toyPlan(
  world: number,
  xs: X[],
  groupOfRound: number[],
  ops: Op[],
  sendAfter: [number, number][] = [],
): Plan {
  // Tasks: task i is the full 200 x 500 task of sequence 0 (queries [600, 800), keys [0, 500)).
  const nTasks = ops.reduce((m, o) => Math.max(m, ...o.tasks.map((t) => t + 1)), 0);
  const col = (v: number[]): Int32Array => Int32Array.from(v);
  const fwd: Phase = {
    transfers: {
      round: col(xs.map((x) => x.round)),
      src: col(xs.map((x) => x.src)),
      dst: col(xs.map((x) => x.dst)),
      kind: Uint8Array.from(xs.map((x) => x.kind ?? Kind.kv)),
      seq: col(xs.map(() => 0)),
      start: col(xs.map(() => 0)),
      length: col(xs.map((x) => x.tokens)),
    },
    groupOfRound: col(groupOfRound),
    compute: {
      rank: col(ops.map((o) => o.rank)),
      after: col(ops.map((o) => o.after)),
      taskOffsets: col([
        0,
        ...ops.map((_, i) => ops.slice(0, i + 1).reduce((s, o) => s + o.tasks.length, 0)),
      ]),
      taskIds: col(ops.flatMap((o) => o.tasks)),
    },
    sendAfter: { transfer: col(sendAfter.map((p) => p[0])), compute: col(sendAfter.map((p) => p[1])) },
  };
  const layout = { rank: col([0]), seq: col([0]), start: col([0]), length: col([1000]) };
  return {
    format: PLAN_FORMAT,
    strategy: 'toy',
    world,
    mask: 'causal',
    model: { qHeads: 1, kvHeads: 1, headDim: 1, bytesPerElement: 1 },
    sequences: col([1000]),
    userLayout: layout,
    homeLayout: layout,
    tasks: {
      rank: col(Array.from({ length: nTasks }, (_, i) => ops.find((o) => o.tasks.includes(i))?.rank ?? 0)),
      seq: col(Array(nTasks).fill(0)),
      qStart: col(Array(nTasks).fill(600)),
      qLength: col(Array(nTasks).fill(200)),
      kvStart: col(Array(nTasks).fill(0)),
      kvLength: col(Array(nTasks).fill(500)),
    },
    forward: fwd,
    backward: emptyPhase(),
  };
}

const near = (a: number, b: number, what = ''): void =>
  assert.ok(Math.abs(a - b) < 1e-6 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

test('one transfer: bytes / bandwidth, plus latency', () => {
  const plan = toyPlan(2, [{ src: 0, dst: 1, tokens: 500, round: 0 }], [0], []);
  near(simulatePlan(plan, OPTS).forward.makespanMs, 100, 'no latency');
  const r = simulatePlan(plan, { ...OPTS, cluster: toyCluster({ latencyUs: 2000 }) });
  near(r.forward.makespanMs, 102, 'with 2 ms latency');
  near(r.forward.bytes.kv, 1000);
  // An `in` transfer moves Q, K and V: 3 bytes per token here.
  const inPlan = toyPlan(2, [{ src: 0, dst: 1, tokens: 500, round: 0, kind: Kind.in }], [0], []);
  near(simulatePlan(inPlan, OPTS).forward.makespanMs, 150, 'in');
});

test('two flows sharing an ingress split it fairly, then the survivor speeds up', () => {
  // 0 -> 2 (1000 B) and 1 -> 2 (2000 B): 5 B/ms each until t = 200, then 10 B/ms for the last 1000 B.
  const plan = toyPlan(
    3,
    [
      { src: 0, dst: 2, tokens: 500, round: 0 },
      { src: 1, dst: 2, tokens: 1000, round: 1 },
    ],
    [0, 0],
    [],
  );
  for (const mode of ['local', 'exact'] as const) {
    const r = simulatePlan(plan, { ...OPTS, rates: { mode } });
    near(r.forward.makespanMs, 300, mode);
    near(r.forward.commMs[0]!, 200, `${mode} rank 0 busy`);
    near(r.forward.commMs[1]!, 300, `${mode} rank 1 busy`);
  }
  // The same two flows from one sender share its egress the same way.
  const egress = toyPlan(
    3,
    [
      { src: 0, dst: 1, tokens: 500, round: 0 },
      { src: 0, dst: 2, tokens: 1000, round: 1 },
    ],
    [0, 0],
    [],
  );
  near(simulatePlan(egress, OPTS).forward.makespanMs, 300);
});

test('a ring step: every rank sends to its successor at full rate, then computes, then the next step', () => {
  const n = 4;
  const xs: X[] = [];
  for (let r = 0; r < n; r++) xs.push({ src: r, dst: (r + 1) % n, tokens: 500, round: 0 });
  for (let r = 0; r < n; r++) xs.push({ src: r, dst: (r + 1) % n, tokens: 500, round: 1 });
  const ops: Op[] = Array.from({ length: n }, (_, r) => ({ rank: r, after: 0, tasks: [r] }));
  // Step 2 forwards what step 1 computed on: sendAfter the op.
  const plan = toyPlan(
    n,
    xs,
    [0, 1],
    ops,
    Array.from({ length: n }, (_, r) => [n + r, r] as [number, number]),
  );
  const r = simulatePlan(plan, OPTS);
  near(r.forward.makespanMs, 300);
  for (let k = 0; k < n; k++) {
    near(r.forward.computeMs[k]!, 100);
    near(r.forward.commMs[k]!, 200);
    near(r.forward.exposedCommMs[k]!, 200);
  }
  assert.equal(r.forward.commImbalance, 0);
  assert.equal(r.forward.computeImbalance, 0);
});

test('compute and communication overlap', () => {
  // Rank 0 computes (100 ms, no wait) while its group-0 send runs (100 ms); rank 1 computes after receiving.
  const plan = toyPlan(
    2,
    [{ src: 0, dst: 1, tokens: 500, round: 0 }],
    [0],
    [
      { rank: 0, after: -1, tasks: [0] },
      { rank: 1, after: 0, tasks: [1] },
    ],
  );
  const r = simulatePlan(plan, OPTS);
  near(r.forward.makespanMs, 200);
  near(r.forward.exposedCommMs[0]!, 0, 'rank 0 hides its send');
  near(r.forward.exposedCommMs[1]!, 100, 'rank 1 waits for its receive');
  near(r.forward.idleMs[0]!, 100);
  // Waiting for the group instead (after = 0) serialises rank 0: 100 + 100.
  const serial = toyPlan(
    2,
    [{ src: 0, dst: 1, tokens: 500, round: 0 }],
    [0],
    [
      { rank: 0, after: 0, tasks: [0] },
      { rank: 1, after: 0, tasks: [1] },
    ],
  );
  near(simulatePlan(serial, OPTS).forward.makespanMs, 200);
  near(simulatePlan(serial, OPTS).forward.exposedCommMs[0]!, 100);
});

test('a sendAfter chain runs compute, transfer, compute, ... in sequence', () => {
  // r0 op -> 0->1 (after op 0) -> r1 op -> 1->2 -> r2 op -> 2->3 -> r3 op: 7 x 100 ms.
  const xs: X[] = [0, 1, 2].map((r) => ({ src: r, dst: r + 1, tokens: 500, round: r }));
  const ops: Op[] = [0, 1, 2, 3].map((r) => ({ rank: r, after: r - 1, tasks: [r] }));
  const plan = toyPlan(4, xs, [0, 1, 2], ops, [
    [0, 0],
    [1, 1],
    [2, 2],
  ]);
  const r = simulatePlan(plan, OPTS);
  near(r.forward.makespanMs, 700);
  near(r.forward.mfu, r.forward.usefulFlops / (4 * 8e-6 * 1e9 * 700));
});

test('MFU: one rank running the whole causal sequence reaches the kernel efficiency; comm SMs slow it', () => {
  const plan = toyPlan(1, [], [], [{ rank: 0, after: -1, tasks: [0] }]);
  plan.tasks.qStart[0] = 0;
  plan.tasks.qLength[0] = 1000;
  plan.tasks.kvStart[0] = 0;
  plan.tasks.kvLength[0] = 1000;
  const r = simulatePlan(plan, OPTS);
  near(r.forward.mfu, 0.5);
  near(r.forward.makespanMs, (500500 * 4) / (8e-6 * 1e9 * 0.5));
  const slow = simulatePlan(plan, { ...OPTS, cluster: toyCluster({ commSms: 6 }) });
  near(slow.forward.makespanMs / r.forward.makespanMs, 132 / 126);
});

test('pushStream: a push held by its op no longer holds the next group of its receiver', () => {
  // Rank 0 computes 100 ms, then pushes 500 tokens of O (1 byte each: 50 ms) to rank 1 in group 0;
  // rank 2 sends rank 1 500 tokens of K/V (100 ms) in group 1, and rank 1 computes on them.
  const plan = toyPlan(
    3,
    [
      { src: 0, dst: 1, tokens: 500, round: 0, kind: Kind.out },
      { src: 2, dst: 1, tokens: 500, round: 1 },
    ],
    [0, 1],
    [
      { rank: 0, after: -1, tasks: [0] },
      { rank: 1, after: 1, tasks: [1] },
    ],
    [[0, 0]],
  );
  // One stream: rank 1 enters group 1 when the push is done (150), K/V by 250, its op by 350.
  near(simulatePlan(plan, OPTS).forward.makespanMs, 350, 'one stream');
  // Two: K/V arrives by 100 beside the op of rank 0, rank 1 computes 100-200, the push runs 100-150.
  plan.forward.pushStream = true;
  const two = simulatePlan(plan, OPTS).forward;
  near(two.makespanMs, 200, 'two streams');
  near(two.computeMs[1]!, 100);
  // An op naming a group where its rank has only pushes waits for nothing on the first stream:
  // it runs 0-100, and the push 100-150 ends the phase.
  plan.forward.compute.after[1] = 0;
  near(simulatePlan(plan, OPTS).forward.makespanMs, 150, 'after a push-only group');
  plan.forward.pushStream = false;
  near(simulatePlan(plan, OPTS).forward.makespanMs, 250, 'one stream, after group 0');
  // A push from an op that waits for a later group: a deadlock with one stream, none with two.
  const late = toyPlan(
    3,
    [
      { src: 2, dst: 0, tokens: 500, round: 0 },
      { src: 0, dst: 1, tokens: 500, round: 1, kind: Kind.dkv },
      { src: 2, dst: 0, tokens: 500, round: 2 },
    ],
    [0, 1, 2],
    [{ rank: 0, after: 2, tasks: [0] }],
    [[1, 0]],
  );
  assert.throws(
    () => simulatePlan(late, OPTS),
    (e: unknown) => e instanceof FcpError && e.code === 'sim.deadlock',
  );
  late.forward.pushStream = true;
  // K/V 0-100 and 100-200 on rank 0's first stream, its op 200-300, the dK,dV push (2 bytes a
  // token: 100 ms) 300-400.
  near(simulatePlan(late, OPTS).forward.makespanMs, 400, 'late push, two streams');
});

test('a plan that waits on itself is reported as a deadlock', () => {
  // Rank 0's op waits for group 0, whose transfer waits for that op.
  const plan = toyPlan(
    2,
    [{ src: 0, dst: 1, tokens: 500, round: 0 }],
    [0],
    [{ rank: 0, after: 0, tasks: [0] }],
    [[0, 0]],
  );
  assert.throws(
    () => simulatePlan(plan, OPTS),
    (e: unknown) => e instanceof FcpError && e.code === 'sim.deadlock',
  );
  const badRound = toyPlan(2, [{ src: 0, dst: 1, tokens: 500, round: 3 }], [0], []);
  assert.throws(
    () => simulatePlan(badRound, OPTS),
    (e: unknown) => e instanceof FcpError && e.code === 'sim.plan.round',
  );
});

const strip = (r: SimResult): string => JSON.stringify(r);

test('deterministic: the same plan gives the same result, byte for byte', () => {
  const problem = resolveProblem({ world: 8, batch: 'longtail', seed: 3 });
  for (const plan of [simplePlan(problem), planRing(problem)]) {
    const a = simulatePlan(plan, { trace: true });
    const b = simulatePlan(plan, { trace: true });
    assert.equal(strip(a), strip(b));
  }
});

test('local and exact rate solvers agree where the neighbourhood covers the component', () => {
  for (const seed of [1, 2, 3]) {
    const plan = simplePlan(resolveProblem({ world: 6, batch: 'longtail', seed, tokensPerRank: 8192 }));
    const exact = simulatePlan(plan, { rates: { mode: 'exact' } });
    const wide = simulatePlan(plan, { rates: { mode: 'local', hops: 64, budget: 1e9 } });
    near(wide.forward.makespanMs, exact.forward.makespanMs);
    near(wide.backward.makespanMs, exact.backward.makespanMs);
    const local = simulatePlan(plan);
    assert.ok(Math.abs(local.backward.makespanMs / exact.backward.makespanMs - 1) < 0.05);
  }
});

test('chunk rows simulate exactly like their expansion when nothing is padded', () => {
  // Lengths multiples of 2N = 8: TE adds no padding.
  const problem = resolveProblem({ world: 4, batch: [8000, 16, 40960, 1200, 800] });
  const plan = planRing(problem);
  const a = simulatePlan(plan);
  const b = simulatePlan(expandChunks(plan));
  near(a.forward.makespanMs, b.forward.makespanMs);
  near(a.backward.makespanMs, b.backward.makespanMs);
  near(a.backward.bytes.total, b.backward.bytes.total);
});

test('the trace has one process per rank with compute and comm threads', () => {
  const plan = simplePlan(resolveProblem({ world: 4, batch: 'longtail', seed: 1, tokensPerRank: 4096 }));
  const r = simulatePlan(plan, { trace: true });
  const ev = (
    r.trace as { traceEvents: { ph: string; pid: number; name: string; tid: number; ts?: number }[] }
  ).traceEvents;
  assert.equal(ev.filter((e) => e.name === 'process_name').length, 4);
  assert.equal(ev.filter((e) => e.name === 'thread_name').length, 8);
  const xs = ev.filter((e) => e.ph === 'X');
  assert.equal(
    xs.filter((e) => e.tid === 1).length,
    plan.forward.compute.rank.length + plan.backward.compute.rank.length,
  );
  // Backward events come after the forward makespan.
  const fwdEnd = r.forward.makespanMs * 1000;
  assert.ok(xs.filter((e) => e.name.startsWith('backward')).every((e) => e.ts! >= fwdEnd - 1e-3));
});

test('the sim executor is registered and reports phase times', async () => {
  const plan = simplePlan(resolveProblem({ world: 4, batch: 'longtail', seed: 1, tokensPerRank: 4096 }));
  const ex = getExecutor('sim');
  assert.equal(ex.numeric, false);
  const r = await ex.run(plan, undefined, {});
  const direct = simulatePlan(plan);
  assert.equal(r.executor, 'sim');
  assert.equal(r.forwardMs, direct.forward.makespanMs);
  assert.equal(r.perRank.backward.length, 4);
  assert.equal(r.outputs, undefined);
});

/**
 * Two-hop `in` across nodes (src/planners/fcp/transfers/in-relays.ts): the relay choice on a hand
 * case, and over random batches under PXN routing: plans valid, every relay a node mate of the
 * home that received the range across nodes and sends it on in a later group, rounds still
 * matchings, byte-identical plans, none under direct routing or with the ablation; the validator
 * rejects a relay that does not send on or sends before it received; the CPU and torch runtimes
 * give the reference outputs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng } from '../../src/core/rng.ts';
import { cpuExecutor } from '../../src/executors/cpu/executor.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { runTorchMany } from '../../src/executors/torch/index.ts';
import { torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { planToJson } from '../../src/plan/io.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import { inRelays } from '../../src/planners/fcp/transfers/in-relays.ts';
import type { LinkModel } from '../../src/planners/fcp/transfers/links.ts';
import type { Pieces } from '../../src/planners/fcp/transfers/reshuffle.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { numericLaw } from '../laws/laws.ts';

const LINKS: LinkModel = {
  nodeSize: 2,
  intraBytesPerMs: 4e8,
  interBytesPerMs: 5e7,
  groupLatencyMs: 0.01,
  computeSlowdown: 1,
  contentionLoss: 0,
  contentionMsgMs: 0,
  pxn: true,
};

/** Moving pieces user -> home of `len` tokens each (only the fields in-relays.ts reads). */
function pieces(rows: [user: number, home: number, len: number][]): Pieces {
  const n = rows.length;
  return {
    seq: new Int32Array(n),
    start: Int32Array.from(rows, (_, i) => 1000 * i),
    length: Int32Array.from(rows, (r) => r[2]),
    user: Int32Array.from(rows, (r) => r[0]),
    home: Int32Array.from(rows, (r) => r[1]),
    run: new Int32Array(n),
    runOff: new Int32Array(2),
    moving: Int32Array.from(rows, (_, i) => i),
    movingIndex: Int32Array.from(rows, (_, i) => i),
  };
}

/** A problem of `world` ranks, 2 GPUs per node unless given, under `routing`. */
function problem(batch: string, world: number, seed: number, routing: 'direct' | 'pxn', gpusPerNode = 2) {
  return resolveProblem({
    batch,
    world,
    seed,
    tokensPerRank: 256,
    gpusPerNode,
    model: SMALL_MODEL,
    cluster: resolveCluster('hopper-ib', { routing }),
  });
}

/** Home rank of token `pos` of sequence `seq`. */
function homeOf(plan: Plan, seq: number, pos: number): number {
  const h = plan.homeLayout;
  for (let j = 0; j < h.rank.length; j++)
    if (h.seq[j] === seq && h.start[j]! <= pos && pos < h.start[j]! + h.length[j]!) return h.rank[j]!;
  return -1;
}

/** Rows of `in` transfers whose receiver is not the range's home (the relays' first hops). */
function relayRows(plan: Plan, dir: 'forward' | 'backward'): number[] {
  const t = plan[dir].transfers;
  const out: number[] = [];
  for (let i = 0; i < t.kind.length; i++)
    if (t.kind[i] === Kind.in && homeOf(plan, t.seq[i]!, t.start[i]!) !== t.dst[i]) out.push(i);
  return out;
}

describe('in relays: the choice', () => {
  it('relays the second of three pieces into one home, through the node mate whose NICs are idle', () => {
    // Nodes {0,1} and {2,3}; rank 0 sends three pieces to rank 2.
    const p = pieces([
      [0, 2, 100],
      [0, 2, 100],
      [0, 2, 100],
    ]);
    assert.deepEqual(Array.from(inRelays(p, 4, LINKS)), [-1, 3, -1]);
  });

  it('relays nothing under direct routing, on one-GPU nodes, or inside a node', () => {
    const p = pieces([
      [0, 2, 100],
      [0, 2, 100],
      [0, 2, 100],
    ]);
    assert.deepEqual(Array.from(inRelays(p, 4, { ...LINKS, pxn: false })), [-1, -1, -1]);
    assert.deepEqual(Array.from(inRelays(p, 4, { ...LINKS, nodeSize: 1 })), [-1, -1, -1]);
    const inside = pieces([
      [0, 1, 100],
      [0, 1, 100],
    ]);
    assert.deepEqual(Array.from(inRelays(inside, 4, LINKS)), [-1, -1]);
  });

  it('never leaves a NIC busier than sending every piece straight to its home (random cases)', () => {
    let relayed = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const rng = new Rng(seed);
      const rows: [number, number, number][] = [];
      for (let k = 0; k < 24; k++) rows.push([rng.int(0, 7), rng.int(0, 7), rng.int(1, 500)]);
      const world = 8;
      const links = { ...LINKS, nodeSize: 4 };
      const p = pieces(rows);
      const relay = inRelays(p, world, links);
      // Busiest NIC (received, or sent as the PXN proxy on the receiver's rail) of a choice.
      const busiest = (first: (i: number) => number): number => {
        const load = new Float64Array(2 * world);
        rows.forEach(([u, h], i) => {
          const t = first(i);
          if (Math.floor(u / 4) === Math.floor(h / 4)) return;
          load[t]! += rows[i]![2];
          load[world + Math.floor(u / 4) * 4 + (t % 4)]! += rows[i]![2];
        });
        return Math.max(...load);
      };
      rows.forEach(([u, h], i) => {
        const t = relay[i]!;
        if (t < 0) return;
        relayed++;
        assert.notEqual(Math.floor(u / 4), Math.floor(h / 4), 'only pieces across nodes are relayed');
        assert.equal(Math.floor(t / 4), Math.floor(h / 4), 'the relay is a node mate of the home');
        assert.notEqual(t, h);
      });
      assert.ok(
        busiest((i) => (relay[i]! >= 0 ? relay[i]! : rows[i]![1])) <= busiest((i) => rows[i]![1]),
        `seed ${seed}`,
      );
    }
    assert.ok(relayed > 0, 'some piece was relayed');
  });
});

describe('in relays: plans', () => {
  it('valid plans whose relays receive across nodes and send on over NVLink in a later group', () => {
    let relays = 0;
    for (const batch of ['longtail', 'bimodal'])
      for (const world of [4, 8])
        for (const seed of [1, 2, 4]) {
          const plan = fcpPlanner.plan(problem(batch, world, seed, 'pxn'), { blockSize: 64 });
          assert.deepEqual(validatePlan(plan).issues, [], `${batch} ${world} ${seed}`);
          for (const dir of ['forward', 'backward'] as const) {
            const ph = plan[dir];
            const t = ph.transfers;
            const group = (i: number): number => ph.groupOfRound[t.round[i]!]!;
            for (const i of relayRows(plan, dir)) {
              relays++;
              const home = homeOf(plan, t.seq[i]!, t.start[i]!);
              const relay = t.dst[i]!;
              assert.notEqual(t.src[i]! >> 1, relay >> 1, 'the first hop crosses nodes');
              assert.equal(relay >> 1, home >> 1, 'the relay is a node mate of the home');
              let on = -1;
              for (let j = 0; j < t.kind.length; j++)
                if (
                  t.kind[j] === Kind.in &&
                  t.src[j] === relay &&
                  t.dst[j] === home &&
                  t.seq[j] === t.seq[i] &&
                  t.start[j] === t.start[i] &&
                  t.length[j] === t.length[i]
                )
                  on = j;
              assert.ok(on >= 0, 'the relay sends the range on to its home');
              assert.ok(group(on) > group(i), 'one group later at least');
            }
            // Every round is still a matching: a rank sends and receives at most once per round.
            const seen = new Set<string>();
            for (let i = 0; i < t.kind.length; i++)
              for (const k of [`s${t.round[i]}:${t.src[i]}`, `r${t.round[i]}:${t.dst[i]}`]) {
                assert.ok(!seen.has(k), `${dir} round ${t.round[i]}: ${k}`);
                seen.add(k);
              }
          }
        }
    assert.ok(relays > 0, 'some plan relays');
  });

  it('same input, same bytes; no relay under direct routing or with noInRelays', () => {
    const a = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), { blockSize: 64 });
    const b = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), { blockSize: 64 });
    assert.equal(planToJson(a), planToJson(b));
    assert.ok(relayRows(a, 'forward').length > 0);
    const direct = fcpPlanner.plan(problem('longtail', 8, 1, 'direct'), { blockSize: 64 });
    const off = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), {
      blockSize: 64,
      noInRelays: true,
    } as FcpPlannerOptions);
    for (const p of [direct, off]) {
      assert.deepEqual(relayRows(p, 'forward'), []);
      assert.deepEqual(relayRows(p, 'backward'), []);
    }
    assert.equal((off.meta?.options as Record<string, unknown> | undefined)?.noInRelays, true);
  });

  it('the validator rejects a relay that keeps the range, or sends it on before it arrived', () => {
    const plan = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), { blockSize: 64 });
    const t = plan.forward.transfers;
    const i = relayRows(plan, 'forward')[0]!;
    const home = homeOf(plan, t.seq[i]!, t.start[i]!);
    let on = -1;
    for (let j = 0; j < t.kind.length; j++)
      if (t.kind[j] === Kind.in && t.src[j] === t.dst[i] && t.dst[j] === home && t.start[j] === t.start[i])
        on = j;
    assert.ok(on >= 0);
    // The relay keeps it: its hop to the home carries K,V only.
    const kept = structuredClone(plan);
    kept.forward.transfers.kind[on] = Kind.kv;
    const codes = (p: Plan): string[] => validatePlan(p).issues.map((x) => x.code);
    const k = codes(kept);
    assert.ok(k.includes('plan.rule3.inNotHome') && k.includes('plan.rule3.qMissing'), k.join(','));
    // The relay sends on in the group its copy arrives in.
    const early = structuredClone(plan);
    early.forward.transfers.round[on] = t.round[i]!;
    assert.ok(codes(early).includes('plan.rule3.senderMissing'), codes(early).join(','));
  });

  it('the CPU runtime gives the reference outputs of a plan with relays', async () => {
    const plan = fcpPlanner.plan(problem('bimodal', 8, 2, 'pxn'), { blockSize: 64 });
    assert.ok(relayRows(plan, 'forward').length > 0);
    const inputs = randomInputsForPlan(plan, 3);
    const res = await cpuExecutor.run(plan, inputs);
    numericLaw(plan, inputs, res.outputs);
  });

  it('the torch runtime gives the reference outputs of a plan with relays', {
    skip: torchSuiteSkip(),
  }, async () => {
    const plan = fcpPlanner.plan(problem('longtail', 4, 1, 'pxn'), { blockSize: 64 });
    assert.ok(relayRows(plan, 'forward').length > 0);
    const inputs = randomInputsForPlan(plan, 4);
    const [r] = await runTorchMany([{ plan, inputs }], { device: 'cpu', kernel: 'math', timeoutMs: 120000 });
    numericLaw(plan, inputs, r?.outputs);
  });
});

/**
 * Two-hop reshuffle across nodes (src/planners/fcp/transfers/relays.ts): the relay choice on a hand
 * case and random cases, and over random batches under PXN routing: plans valid, every `in` relay a
 * node mate of the home and every `out` relay a node mate of the user rank, each receiving the
 * range across nodes and sending it on in a later group, rounds still matchings, byte-identical
 * plans, none under direct routing or with the ablations; the validator rejects a relay that does
 * not send on or sends before it received; the CPU and torch runtimes give the reference outputs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { routingNote } from '../../src/cli/simulate.ts';
import { Rng } from '../../src/core/rng.ts';
import { cpuExecutor } from '../../src/executors/cpu/executor.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { runTorchMany } from '../../src/executors/torch/index.ts';
import { torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { planToJson } from '../../src/plan/io.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import type { LinkModel } from '../../src/planners/fcp/transfers/links.ts';
import { crossNodeRelays } from '../../src/planners/fcp/transfers/relays.ts';
import { testLinks } from '../fixtures/links.ts';
import { twoHopProblem } from '../fixtures/relayed.ts';
import { numericLaw } from '../laws/laws.ts';

const LINKS: LinkModel = testLinks({ nodeSize: 2, pxn: true });

/** Relays of messages [src, dst, tokens]. */
function relaysOf(rows: [number, number, number][], world: number, links: LinkModel): number[] {
  const col = (k: number): Int32Array => Int32Array.from(rows, (r) => r[k]!);
  return Array.from(crossNodeRelays(col(0), col(1), col(2), world, links));
}

const problem = twoHopProblem;

/** Rank of token `pos` of sequence `seq` in `layout`. */
function rankIn(layout: Plan['homeLayout'], seq: number, pos: number): number {
  for (let j = 0; j < layout.rank.length; j++)
    if (layout.seq[j] === seq && layout.start[j]! <= pos && pos < layout.start[j]! + layout.length[j]!)
      return layout.rank[j]!;
  return -1;
}

/** Where a transfer of `kind` ends: the home for `in`, the user rank for `out`. */
function endOf(plan: Plan, kind: number, seq: number, pos: number): number {
  return rankIn(kind === Kind.in ? plan.homeLayout : plan.userLayout, seq, pos);
}

/** Rows of `kind` (in or out) whose receiver is not where the range ends (the relays' first hops). */
function relayRows(plan: Plan, dir: 'forward' | 'backward', kind: number = Kind.in): number[] {
  const t = plan[dir].transfers;
  const out: number[] = [];
  for (let i = 0; i < t.kind.length; i++)
    if (t.kind[i] === kind && endOf(plan, kind, t.seq[i]!, t.start[i]!) !== t.dst[i]) out.push(i);
  return out;
}

/**
 * Rows that send row i's range on from its receiver to `to` (adjacent pieces may share a row on
 * either hop), or [] when they do not cover the whole range.
 */
function onward(plan: Plan, dir: 'forward' | 'backward', i: number, to: number): number[] {
  const t = plan[dir].transfers;
  const a = t.start[i]!;
  const e = a + t.length[i]!;
  const rows: number[] = [];
  for (let j = 0; j < t.kind.length; j++)
    if (
      t.kind[j] === t.kind[i] &&
      t.src[j] === t.dst[i] &&
      t.dst[j] === to &&
      t.seq[j] === t.seq[i] &&
      t.start[j]! < e &&
      t.start[j]! + t.length[j]! > a
    )
      rows.push(j);
  rows.sort((x, y) => t.start[x]! - t.start[y]!);
  let at = a;
  for (const j of rows) if (t.start[j]! <= at) at = Math.max(at, t.start[j]! + t.length[j]!);
  return at >= e ? rows : [];
}

describe('relays: the choice', () => {
  it('relays the second of three pieces into one home, through the node mate whose NICs are idle', () => {
    // Nodes {0,1} and {2,3}; rank 0 sends three pieces to rank 2.
    const p: [number, number, number][] = [
      [0, 2, 100],
      [0, 2, 100],
      [0, 2, 100],
    ];
    assert.deepEqual(relaysOf(p, 4, LINKS), [-1, 3, -1]);
  });

  it('relays nothing under direct routing, on one-GPU nodes, or inside a node', () => {
    const p: [number, number, number][] = [
      [0, 2, 100],
      [0, 2, 100],
      [0, 2, 100],
    ];
    assert.deepEqual(relaysOf(p, 4, { ...LINKS, pxn: false }), [-1, -1, -1]);
    assert.deepEqual(relaysOf(p, 4, { ...LINKS, nodeSize: 1 }), [-1, -1, -1]);
    const inside: [number, number, number][] = [
      [0, 1, 100],
      [0, 1, 100],
    ];
    assert.deepEqual(relaysOf(inside, 4, LINKS), [-1, -1]);
  });

  it('never leaves a NIC busier than sending every piece straight to its home (random cases)', () => {
    let relayed = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const rng = new Rng(seed);
      const rows: [number, number, number][] = [];
      for (let k = 0; k < 24; k++) rows.push([rng.int(0, 7), rng.int(0, 7), rng.int(1, 500)]);
      const world = 8;
      const links = { ...LINKS, nodeSize: 4 };
      const relay = relaysOf(rows, world, links);
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

describe('relays: plans', () => {
  it('valid plans whose relays receive across nodes and send on over NVLink in a later group', () => {
    const relays = { [Kind.in]: 0, [Kind.out]: 0 };
    for (const batch of ['longtail', 'bimodal'])
      for (const world of [4, 8])
        for (const seed of [1, 2, 4]) {
          const plan = fcpPlanner.plan(problem(batch, world, seed, 'pxn'), { blockSize: 64 });
          assert.deepEqual(validatePlan(plan).issues, [], `${batch} ${world} ${seed}`);
          for (const dir of ['forward', 'backward'] as const) {
            const ph = plan[dir];
            const t = ph.transfers;
            const group = (i: number): number => ph.groupOfRound[t.round[i]!]!;
            for (const kind of [Kind.in, Kind.out] as const)
              for (const i of relayRows(plan, dir, kind)) {
                relays[kind]++;
                const end = endOf(plan, kind, t.seq[i]!, t.start[i]!);
                const relay = t.dst[i]!;
                assert.notEqual(t.src[i]! >> 1, relay >> 1, 'the first hop crosses nodes');
                assert.equal(relay >> 1, end >> 1, 'the relay is a node mate of the receiver');
                const on = onward(plan, dir, i, end);
                assert.ok(on.length > 0, 'the relay sends the range on');
                for (const j of on) assert.ok(group(j) > group(i), 'one group later at least');
              }
            // Every round is still a matching per link class: a rank sends and receives at most
            // once per round over NVLink and once over its NIC (a plan whose forward relays K/V,
            // the self-tuner's relay candidate, may use both in one round: test/planners/fcp-plan.test.ts).
            const seen = new Set<string>();
            for (let i = 0; i < t.kind.length; i++) {
              const link = t.src[i]! >> 1 === t.dst[i]! >> 1 ? 'nvl' : 'nic';
              for (const k of [`s${t.round[i]}:${t.src[i]}:${link}`, `r${t.round[i]}:${t.dst[i]}:${link}`]) {
                assert.ok(!seen.has(k), `${dir} round ${t.round[i]}: ${k}`);
                seen.add(k);
              }
            }
          }
        }
    assert.ok(relays[Kind.in] > 0 && relays[Kind.out] > 0, JSON.stringify(relays));
  });

  it('same input, same bytes; no relay under direct routing or with the ablations', () => {
    const a = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), { blockSize: 64 });
    const b = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), { blockSize: 64 });
    assert.equal(planToJson(a), planToJson(b));
    assert.ok(relayRows(a, 'forward').length > 0 && relayRows(a, 'forward', Kind.out).length > 0);
    const direct = fcpPlanner.plan(problem('longtail', 8, 1, 'direct'), { blockSize: 64 });
    const off = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), {
      blockSize: 64,
      noInRelays: true,
      noOutRelays: true,
    } as FcpPlannerOptions);
    for (const p of [direct, off])
      for (const dir of ['forward', 'backward'] as const)
        for (const kind of [Kind.in, Kind.out]) assert.deepEqual(relayRows(p, dir, kind), []);
    const o = off.meta?.options as Record<string, unknown> | undefined;
    assert.equal(o?.noInRelays, true);
    assert.equal(o?.noOutRelays, true);
    // The statistics count the relayed messages, and say nothing when there are none.
    type Stats = { forward: { relays?: { in: number; out: number } } };
    const relays = (p: Plan) => (p.meta?.stats as Stats | undefined)?.forward.relays;
    // (A row may carry adjacent pieces: at least as many relayed pieces as first-hop rows.)
    const r = relays(a);
    assert.ok(
      r && r.in >= relayRows(a, 'forward').length && r.out >= relayRows(a, 'forward', Kind.out).length,
    );
    assert.equal(relays(direct), undefined);
    assert.equal(relays(off), undefined);
    // The routing a plan was made for is recorded when not the default; `fcp simulate` notes a mismatch.
    assert.equal(a.meta?.routing, 'pxn');
    assert.equal(direct.meta?.routing, undefined);
    assert.equal(routingNote(a, 'pxn'), '');
    assert.match(routingNote(a, 'direct'), /made for --routing pxn/);
    assert.match(routingNote(direct, 'pxn'), /made for --routing direct/);
    assert.equal(routingNote({ ...direct, strategy: 'ring' }, 'pxn'), '');
  });

  it('the validator rejects a relay that keeps the range, or sends it on before it arrived', () => {
    const plan = fcpPlanner.plan(problem('longtail', 8, 1, 'pxn'), { blockSize: 64 });
    const t = plan.forward.transfers;
    const codes = (p: Plan): string[] => validatePlan(p).issues.map((x) => x.code);
    // `in`: the relay keeps it (its hop to the home carries K,V only), or sends it early.
    const i = relayRows(plan, 'forward')[0]!;
    const on = onward(plan, 'forward', i, endOf(plan, Kind.in, t.seq[i]!, t.start[i]!))[0]!;
    assert.ok(on >= 0);
    const kept = structuredClone(plan);
    kept.forward.transfers.kind[on] = Kind.kv;
    const k = codes(kept);
    assert.ok(k.includes('plan.rule3.inNotHome') && k.includes('plan.rule3.qMissing'), k.join(','));
    const early = structuredClone(plan);
    early.forward.transfers.round[on] = t.round[i]!;
    assert.ok(codes(early).includes('plan.rule3.senderMissing'), codes(early).join(','));
    // `out`: the relay's hop goes back to the home's node instead of the user, or leaves early.
    const j = relayRows(plan, 'forward', Kind.out)[0]!;
    const on2 = onward(plan, 'forward', j, endOf(plan, Kind.out, t.seq[j]!, t.start[j]!))[0]!;
    assert.ok(on2 >= 0);
    const lost = structuredClone(plan);
    lost.forward.transfers.dst[on2] = t.src[j]!;
    const l = codes(lost);
    assert.ok(l.includes('plan.rule4.outNotUser') && l.includes('plan.rule4.outMissing'), l.join(','));
    const early2 = structuredClone(plan);
    early2.forward.transfers.round[on2] = t.round[j]!;
    assert.ok(codes(early2).includes('plan.rule3.senderMissing'), codes(early2).join(','));
  });

  it('the CPU runtime gives the reference outputs of a plan with relays', async () => {
    const plan = fcpPlanner.plan(problem('bimodal', 8, 2, 'pxn'), { blockSize: 64 });
    assert.ok(relayRows(plan, 'forward').length > 0 && relayRows(plan, 'backward', Kind.out).length > 0);
    const inputs = randomInputsForPlan(plan, 3);
    const res = await cpuExecutor.run(plan, inputs);
    numericLaw(plan, inputs, res.outputs);
  });

  it('the torch runtime gives the reference outputs of a plan with relays', {
    skip: torchSuiteSkip(),
  }, async () => {
    const plan = fcpPlanner.plan(problem('longtail', 4, 3, 'pxn'), { blockSize: 32 });
    assert.ok(relayRows(plan, 'forward').length > 0 && relayRows(plan, 'forward', Kind.out).length > 0);
    const inputs = randomInputsForPlan(plan, 4);
    const [r] = await runTorchMany([{ plan, inputs }], { device: 'cpu', kernel: 'math', timeoutMs: 120000 });
    numericLaw(plan, inputs, r?.outputs);
  });
});

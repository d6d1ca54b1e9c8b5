/**
 * Node-level sums of the backward's `dkv` partials (src/planners/fcp/transfers/dkv-node.ts): the
 * routing on a hand case and on random rows (property tests), the placement (an aggregator's push
 * in a group after every push into it), and over random batches on nodes of two GPUs: plans valid,
 * partials summed on the home's rail before crossing, fewer `dkv` tokens across nodes than one
 * push per rank; the validator rejects an aggregator that pushes before a partial into it has
 * arrived; the CPU and torch runtimes give the reference outputs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { cpuExecutor } from '../../src/executors/cpu/executor.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { runTorchMany } from '../../src/executors/torch/index.ts';
import { torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { type DkvRows, dkvRoutes, placeDkvRoutes } from '../../src/planners/fcp/transfers/dkv-node.ts';
import { GroupPlacer } from '../../src/planners/fcp/transfers/groups.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { testLinks } from '../fixtures/links.ts';
import { twoHopProblem } from '../fixtures/relayed.ts';
import { numericLaw } from '../laws/laws.ts';

/** Rows [src, dst, run, length, ready]: sequence = run, start 0, op = 100 + row. */
function rows(r: readonly (readonly [number, number, number, number, number])[]): {
  d: DkvRows;
  ready: Int32Array;
} {
  const col = (k: number): Int32Array => Int32Array.from(r, (x) => x[k]!);
  return {
    d: {
      src: col(0),
      dst: col(1),
      seq: col(2),
      start: new Int32Array(r.length),
      length: col(3),
      run: col(2),
      op: Int32Array.from(r, (_, i) => 100 + i),
    },
    ready: col(4),
  };
}

/** Random push rows [src, home, run, length, ready] with ranks up to `maxRank`. */
const rawRows = (maxRank: number) =>
  fc.array(
    fc.tuple(
      fc.integer({ min: 0, max: maxRank }),
      fc.integer({ min: 0, max: maxRank }),
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 1, max: 500 }),
      fc.integer({ min: 0, max: 6 }),
    ),
    { maxLength: 60 },
  );

/**
 * Rows as backward.ts lists them: one home per run (its first row's), one push per (rank, run),
 * none from the home itself; ranks taken modulo `world`. Returns the rows and each run's home.
 */
function pushList(
  raw: readonly (readonly [number, number, number, number, number])[],
  world: number,
): { list: [number, number, number, number, number][]; homeOf: Map<number, number> } {
  const homeOf = new Map<number, number>();
  const seen = new Set<string>();
  const list: [number, number, number, number, number][] = [];
  for (const [s0, h0, run, len, rd] of raw) {
    const s = s0 % world;
    const home = homeOf.get(run) ?? h0 % world;
    homeOf.set(run, home);
    if (s === home || seen.has(`${s}:${run}`)) continue;
    seen.add(`${s}:${run}`);
    list.push([s, home, run, len, rd]);
  }
  return { list, homeOf };
}

describe('dkv partials summed per node: routing', () => {
  const links = testLinks({ nodeSize: 4 });

  it('sums on the home-rail rank, keeps the last group direct, adds an aggregator where needed', () => {
    const { d, ready } = rows([
      // Run 0, home 1: rail rank on node 1 is 5, a pusher; 6 is ready last.
      [4, 1, 0, 100, 2],
      [5, 1, 0, 300, 3],
      [6, 1, 0, 200, 5],
      [7, 1, 0, 400, 1],
      // Run 1, home 2: rail rank 6 pushes nothing; 4 and 5 hop to a new row, 7 (last) direct.
      [4, 2, 1, 50, 1],
      [5, 2, 1, 80, 1],
      [7, 2, 1, 60, 4],
      // Run 2, home 3: one partial would hop to a rank without its own: unchanged.
      [4, 3, 2, 10, 1],
      [5, 3, 2, 20, 2],
      // Run 3: home 4 on the pushers' node.
      [5, 4, 3, 30, 1],
      [6, 4, 3, 30, 1],
    ]);
    const r = dkvRoutes(d, ready, links, 8);
    assert.deepEqual(Array.from(r.dst), [5, 1, 1, 5, 6, 6, 2, 3, 3, 4, 4, 2]);
    assert.deepEqual(Array.from(r.into), [1, -1, -1, 1, 11, 11, -1, -1, -1, -1, -1, -1]);
    assert.deepEqual(Array.from(r.aggregates), [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    assert.equal(r.length[1], 400, "the rail pusher's push covers the union");
    assert.deepEqual(
      [r.src[11], r.seq[11], r.start[11], r.length[11], r.run[11], r.op[11]],
      [6, 1, 0, 80, 1, -1],
      'a new aggregator row, no op of its own',
    );
    // One node: nothing changes.
    const one = dkvRoutes(d, ready, testLinks({ nodeSize: 8 }), 8);
    assert.deepEqual(Array.from(one.dst), Array.from(d.dst));
    assert.equal(one.src.length, d.src.length);
  });

  it('places every aggregator in a group after the pushes into it', () => {
    const { d, ready } = rows([
      [4, 1, 0, 100, 0],
      [5, 1, 0, 300, 0],
      [7, 1, 0, 400, 1],
      [6, 1, 0, 100, 2],
    ]);
    const r = dkvRoutes(d, ready, links, 8);
    const placer = new GroupPlacer(2, 8);
    const p = placeDkvRoutes(placer, r, 8, 'matching');
    for (let e = 0; e < r.src.length; e++) {
      const a = r.into[e]!;
      if (a >= 0) assert.ok(placer.groupOf(p.slot[a]!) > placer.groupOf(p.slot[e]!), `row ${e}`);
    }
    assert.ok(r.into.some((a) => a >= 0));
  });

  it('random rows: partials reach home once, sums cover their inputs, hops stay on the node', () => {
    fc.assert(
      fc.property(rawRows(15), (raw) => {
        const { list, homeOf } = pushList(raw, 16);
        const { d, ready } = rows(list);
        const r = dkvRoutes(d, ready, links, 16);
        const node = (x: number): number => Math.floor(x / 4);
        for (let e = 0; e < r.src.length; e++) {
          const a = r.into[e]!;
          if (e < d.src.length) assert.equal(r.src[e], d.src[e]);
          if (a < 0) {
            assert.equal(r.dst[e], homeOf.get(r.run[e]!), 'straight home');
            continue;
          }
          assert.equal(r.aggregates[a], 1);
          assert.equal(r.dst[e], r.src[a]);
          assert.equal(node(r.src[e]!), node(r.src[a]!), 'the hop stays on the node');
          assert.notEqual(node(r.src[e]!), node(r.dst[a]!), 'the sum crosses nodes');
          assert.equal(r.src[a]! % 4, r.dst[a]! % 4, "the aggregator is on the home's rail");
          assert.equal(r.into[a], -1, 'one hop at most');
          assert.ok(r.start[a]! + r.length[a]! >= r.start[e]! + r.length[e]!, 'the sum covers the partial');
          assert.ok(
            r.ready[e]! <
              Math.max(
                ...list.filter((x) => x[2] === r.run[e] && node(x[0]) === node(r.src[e]!)).map((x) => x[4]),
              ),
          );
        }
        for (let e = d.src.length; e < r.src.length; e++) {
          assert.equal(r.op[e], -1);
          assert.ok(
            r.into.filter((a) => a === e).length >= 2,
            'an added aggregator sums two partials or more',
          );
        }
      }),
      { numRuns: 200, seed: 34 },
    );
  });

  it('a last node with fewer ranks: no push reaches a rank beyond the world', () => {
    // Nodes of 4, world 7: node 1 holds ranks 4-6 only. Home 3's rail on node 1 would be rank 7.
    const { d, ready } = rows([
      [4, 3, 0, 100, 1],
      [5, 3, 0, 200, 1],
      [6, 3, 0, 300, 3],
      // Home 1: rail rank 5 exists and pushes; 4 hops to it, 6 (last) goes straight home.
      [4, 1, 1, 50, 1],
      [5, 1, 1, 80, 2],
      [6, 1, 1, 30, 3],
    ]);
    const r = dkvRoutes(d, ready, links, 7);
    assert.deepEqual(Array.from(r.dst), [3, 3, 3, 5, 1, 1], 'no rail on node 1 for home 3: straight home');
    assert.equal(r.src.length, d.src.length, 'no aggregator added');
    fc.assert(
      fc.property(fc.integer({ min: 5, max: 15 }), rawRows(14), (world, raw) => {
        const { list } = pushList(raw, world);
        const { d: dr, ready: rr } = rows(list);
        const routed = dkvRoutes(dr, rr, links, world);
        for (let e = 0; e < routed.src.length; e++) {
          assert.ok(routed.src[e]! < world && routed.dst[e]! < world, `row ${e} within ${world} ranks`);
        }
        // And they place (the placer indexes ranks and groups by them).
        const placer = new GroupPlacer(2, world);
        placeDkvRoutes(placer, routed, world, 'matching');
      }),
      { numRuns: 200, seed: 38 },
    );
  });
});

/** Rank holding token `pos` of sequence `seq` in the home layout. */
function homeOf(plan: Plan, seq: number, pos: number): number {
  const l = plan.homeLayout;
  for (let j = 0; j < l.rank.length; j++)
    if (l.seq[j] === seq && l.start[j]! <= pos && pos < l.start[j]! + l.length[j]!) return l.rank[j]!;
  return -1;
}

/** Backward `dkv` rows that go to a rank other than the range's home (partials into a sum). */
function hops(plan: Plan): number[] {
  const t = plan.backward.transfers;
  const out: number[] = [];
  for (let i = 0; i < t.src.length; i++)
    if (t.kind[i] === Kind.dkv && homeOf(plan, t.seq[i]!, t.start[i]!) !== t.dst[i]) out.push(i);
  return out;
}

describe('dkv partials summed per node: plans', () => {
  const plan = (seed: number, routing: 'direct' | 'pxn'): Plan =>
    fcpPlanner.plan(twoHopProblem('longtail', 8, seed, routing), { blockSize: 32 });

  it('plans on nodes of two GPUs sum partials on a node mate and stay valid', () => {
    for (const routing of ['direct', 'pxn'] as const)
      for (const seed of [1, 2, 3]) {
        const p = plan(seed, routing);
        assert.deepEqual(validatePlan(p).issues, [], `${routing} seed ${seed}`);
        const h = hops(p);
        assert.ok(h.length > 0, `${routing} seed ${seed}: some partials are summed`);
        const t = p.backward.transfers;
        for (const i of h)
          assert.equal(Math.floor(t.src[i]! / 2), Math.floor(t.dst[i]! / 2), 'a hop stays on its node');
        assert.equal(JSON.stringify(plan(seed, routing)), JSON.stringify(p), 'byte-identical');
      }
  });

  it('worlds that fill their last node only in part plan valid plans in both modes', () => {
    // The cases that stopped the planner with a TypeError before session 38 (a `dkv` sum routed to
    // a rail rank the last node does not have): world 20 with 8 GPUs a node, mode (a); 53, mode (b).
    const cases = [
      { batch: 'weak-longtail', world: 20, tokensPerRank: 4096, seed: 5, loaderLayout: false },
      { batch: 'magi', world: 53, tokensPerRank: 2048, seed: 42, loaderLayout: true },
      { batch: 'longtail', world: 12, tokensPerRank: 2048, seed: 3, loaderLayout: false },
    ];
    for (const c of cases) {
      const problem = resolveProblem({
        batch: c.batch,
        world: c.world,
        tokensPerRank: c.tokensPerRank,
        seed: c.seed,
      });
      const p = fcpPlanner.plan(problem, c.loaderLayout ? { loaderLayout: true } : {});
      assert.deepEqual(validatePlan(p).issues, [], `${c.batch} ${c.world}`);
    }
  });

  it('the validator rejects an aggregator that pushes before a partial into it arrives', () => {
    const p = plan(3, 'pxn');
    const t = p.backward.transfers;
    const g = (i: number): number => p.backward.groupOfRound[t.round[i]!]!;
    const i = hops(p)[0]!;
    // The aggregator's push of the same range home.
    const a = Array.from(t.src.keys()).find(
      (k) =>
        t.kind[k] === Kind.dkv && t.src[k] === t.dst[i] && t.seq[k] === t.seq[i] && t.start[k] === t.start[i],
    )!;
    assert.ok(g(a) > g(i));
    // Move the hop to the aggregator push's round: the partial arrives after it has left.
    t.round[i] = t.round[a]!;
    const codes = validatePlan(p).issues.map((x) => x.code);
    assert.ok(codes.includes('plan.rule4.dkvLost'), JSON.stringify(codes));
  });

  it('the CPU runtime gives the reference outputs', async () => {
    const p = plan(3, 'pxn');
    assert.ok(hops(p).length > 0);
    const inputs = randomInputsForPlan(p, 5);
    const res = await cpuExecutor.run(p, inputs);
    numericLaw(p, inputs, res.outputs);
  });

  it('the torch runtime gives the reference outputs', { skip: torchSuiteSkip() }, async () => {
    const p = plan(3, 'direct');
    assert.ok(hops(p).length > 0);
    const inputs = randomInputsForPlan(p, 6);
    const [r] = await runTorchMany([{ plan: p, inputs }], {
      device: 'cpu',
      kernel: 'math',
      timeoutMs: 120000,
    });
    numericLaw(p, inputs, r?.outputs);
  });
});

/**
 * Rounds congestion-free on the NICs under PXN (src/planners/fcp/transfers/rail-rounds.ts) and the
 * report's NIC congestion (src/plan/report-nic.ts): the split on a hand case and on random
 * matchings (every sub-round a matching with at most one message across nodes per NIC, groups and
 * round order kept, a message's rows together); the NIC count on hand cases under both routings;
 * FCP plans for PXN on 3 and 4 nodes in both modes valid with NIC congestion 1, where the rounds
 * without the split put several messages on one NIC.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng } from '../../src/core/rng.ts';
import { planReport } from '../../src/plan/report.ts';
import { nicCongestion, nvlinkCongestion, pxnNic } from '../../src/plan/report-nic.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { groupCount } from '../../src/plan/validate-structure.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import { railRounds } from '../../src/planners/fcp/transfers/rail-rounds.ts';
import { twoHopProblem } from '../fixtures/relayed.ts';

/** Message keys (round * W + src) * W + dst of rows [round, src, dst]. */
const keysOf = (rows: [number, number, number][], W: number): Float64Array =>
  Float64Array.from(rows, ([r, s, d]) => (r * W + s) * W + d);

describe('report: NIC congestion', () => {
  // 12 ranks, nodes of 4: ranks 0-3, 4-7, 8-11.
  const W = 12;
  it('counts two messages of one node to one rail as one NIC under PXN, two NICs under direct', () => {
    const keys = keysOf(
      [
        [0, 0, 5], // node 0 -> rail 1 of node 1: leaves by GPU 1 under PXN
        [0, 2, 9], // node 0 -> rail 1 of node 2: leaves by GPU 1 under PXN too
        [0, 4, 6], // inside node 1: no NIC
      ],
      W,
    );
    assert.equal(nicCongestion(keys, W, { gpusPerNode: 4, routing: 'pxn' }), 2);
    assert.equal(nicCongestion(keys, W, { gpusPerNode: 4, routing: 'direct' }), 1);
    // One node for all: nothing crosses.
    assert.equal(nicCongestion(keys, W, { gpusPerNode: 12, routing: 'pxn' }), 0);
  });

  it('counts rows between one pair in one round once, and rounds apart', () => {
    const keys = keysOf(
      [
        [0, 0, 5],
        [0, 0, 5],
        [1, 2, 9],
      ],
      W,
    );
    assert.equal(nicCongestion(keys, W, { gpusPerNode: 4, routing: 'pxn' }), 1);
  });

  it('NVLink ports: a GPU receiving from a node mate while it forwards across nodes under PXN', () => {
    const keys = keysOf(
      [
        [0, 0, 5], // node 0 -> rail 1 of node 1: forwarded by GPU 1 (its NVLink port)
        [0, 2, 1], // inside node 0: into GPU 1
      ],
      W,
    );
    assert.equal(nvlinkCongestion(keys, W, { gpusPerNode: 4, routing: 'pxn' }), 2);
    assert.equal(nvlinkCongestion(keys, W, { gpusPerNode: 4, routing: 'direct' }), 1);
    // The sender on the receiver's rail forwards nothing: its own NIC.
    const own = keysOf(
      [
        [0, 1, 5],
        [0, 2, 1],
      ],
      W,
    );
    assert.equal(nvlinkCongestion(own, W, { gpusPerNode: 4, routing: 'pxn' }), 1);
  });

  it('counts arrivals: two senders to one receiver across nodes', () => {
    const keys = keysOf(
      [
        [3, 0, 9],
        [3, 5, 9],
      ],
      W,
    );
    assert.equal(nicCongestion(keys, W, { gpusPerNode: 4, routing: 'direct' }), 2);
  });
});

describe('rail rounds: the split', () => {
  it('splits a hand case: the second message on NIC (node 0, rail 1) moves to a sub-round', () => {
    // Round 0 (group 0): 0->5, 2->9 (both leave by GPU 1 of node 0), 1->3 (NVLink), two rows 0->5.
    // Round 1 (group 1): 6->11 alone.
    const rows: [number, number, number][] = [
      [0, 0, 5],
      [0, 2, 9],
      [0, 1, 3],
      [0, 0, 5],
      [1, 6, 11],
    ];
    const col = (k: number): Int32Array => Int32Array.from(rows, (r) => r[k]!);
    const s = railRounds(col(0), col(1), col(2), Int32Array.from([0, 1]), 4, 12);
    assert.ok(s);
    assert.equal(s.added, 1);
    assert.deepEqual(Array.from(s.roundOf), [0, 1, 0, 0, 2]);
    assert.deepEqual(Array.from(s.groupOfRound), [0, 0, 1]);
    // Nothing to split: null.
    const none = railRounds(
      Int32Array.from([0, 0]),
      Int32Array.from([0, 1]),
      Int32Array.from([4, 6]),
      Int32Array.from([0]),
      4,
      12,
    );
    assert.equal(none, null);
    // 6 ranks on nodes of 4: node 1 (ranks 4, 5) lacks rails 2 and 3, so 4 -> 2 and 5 -> 3 leave by
    // their senders' own NICs (as the simulator routes them) and share none.
    const partial = railRounds(
      Int32Array.from([0, 0]),
      Int32Array.from([4, 5]),
      Int32Array.from([2, 3]),
      Int32Array.from([0]),
      4,
      6,
    );
    assert.equal(partial, null);
  });

  it('random matchings: sub-rounds are matchings, one message per NIC, groups and order kept', () => {
    const rng = new Rng(7);
    let splits = 0;
    for (let trial = 0; trial < 60; trial++) {
      const g = 2 + rng.int(0, 3);
      const W = g * (2 + rng.int(0, 3)) + rng.int(0, g - 1); // sometimes a partial last node
      const rounds = 1 + rng.int(0, 7);
      const groupOfRound = new Int32Array(rounds);
      for (let r = 1; r < rounds; r++) groupOfRound[r] = groupOfRound[r - 1]! + (rng.next() < 0.5 ? 1 : 0);
      const roundOf: number[] = [];
      const src: number[] = [];
      const dst: number[] = [];
      for (let r = 0; r < rounds; r++) {
        // A random matching: a permutation's pairs, about half of them, some repeated as extra rows.
        const perm = Array.from({ length: W }, (_, i) => i);
        for (let i = W - 1; i > 0; i--) {
          const j = rng.int(0, i);
          [perm[i], perm[j]] = [perm[j]!, perm[i]!];
        }
        for (let s = 0; s < W; s++) {
          if (perm[s] === s || rng.next() < 0.5) continue;
          const copies = 1 + rng.int(0, 1);
          for (let c = 0; c < copies; c++) {
            roundOf.push(r);
            src.push(s);
            dst.push(perm[s]!);
          }
        }
      }
      const R = Int32Array.from(roundOf);
      const S = Int32Array.from(src);
      const D = Int32Array.from(dst);
      const out = railRounds(R, S, D, groupOfRound, g, W);
      const newRound = out ? out.roundOf : R;
      const newGroups = out ? out.groupOfRound : groupOfRound;
      for (let r = 1; r < newGroups.length; r++) assert.ok(newGroups[r]! >= newGroups[r - 1]!);
      const seen = new Map<string, number>();
      for (let i = 0; i < R.length; i++) {
        // Same group as before; sub-rounds keep the order of their parents.
        assert.equal(newGroups[newRound[i]!], groupOfRound[R[i]!]);
        for (let k = 0; k < R.length; k++)
          if (R[k]! < R[i]!) assert.ok(newRound[k]! < newRound[i]!, 'round order kept');
        // A message's rows stay together.
        const m = `${R[i]} ${S[i]} ${D[i]}`;
        const prev = seen.get(m);
        if (prev !== undefined) assert.equal(newRound[i], prev);
        seen.set(m, newRound[i]!);
      }
      // Every new round: each rank sends and receives at most one message; NIC congestion 1 under PXN.
      const keys = Float64Array.from(newRound, (r, i) => (r * W + S[i]!) * W + D[i]!);
      assert.ok(nicCongestion(keys, W, { gpusPerNode: g, routing: 'pxn' }) <= 1, `trial ${trial}`);
      assert.ok(nvlinkCongestion(keys, W, { gpusPerNode: g, routing: 'pxn' }) <= 1, `trial ${trial}`);
      const sendsOf = new Map<string, Set<number>>();
      for (let i = 0; i < R.length; i++) {
        const k = `${newRound[i]} s${S[i]}`;
        const set = sendsOf.get(k) ?? new Set();
        set.add(D[i]!);
        sendsOf.set(k, set);
      }
      for (const set of sendsOf.values()) assert.equal(set.size, 1);
      if (out) assert.equal(out.added, newGroups.length - rounds);
      if (out) splits++;
    }
    assert.ok(splits >= 20, `${splits} of 60 cases split`);
  });

  it('pxnNic: the sender node GPU on the receiver rail', () => {
    assert.equal(pxnNic(2, 13, 8, 16), 5);
    assert.equal(pxnNic(9, 3, 8, 16), 11);
    // A partial last node without the receiver's rail: the sender's own NIC.
    assert.equal(pxnNic(9, 3, 8, 10), 9);
  });
});

describe('rail rounds: FCP plans for PXN', () => {
  const pxn = { gpusPerNode: 2, routing: 'pxn' as const };
  /** An FCP plan for PXN or direct routing on nodes of two GPUs. */
  const planOf = (
    world: number,
    seed: number,
    routing: 'direct' | 'pxn',
    loaderLayout: boolean,
    more: FcpPlannerOptions = {},
  ): Plan =>
    fcpPlanner.plan(twoHopProblem('longtail', world, seed, routing), {
      blockSize: 32,
      ...(loaderLayout ? { loaderLayout: true } : {}),
      ...more,
    });

  for (const loaderLayout of [false, true])
    it(`mode (${loaderLayout ? 'b' : 'a'}): valid, congestion 1 and NIC congestion 1 on 3 and 4 nodes`, () => {
      let sharedWithoutSplit = 0;
      for (const world of [6, 8])
        for (const seed of [1, 2, 3]) {
          const plan = planOf(world, seed, 'pxn', loaderLayout);
          const { issues, report } = validatePlan(plan, { nic: pxn });
          assert.deepEqual(
            issues.map((x) => x.code),
            [],
          );
          for (const dir of ['forward', 'backward'] as const) {
            assert.equal(report[dir].congestion, 1, `${world} ${seed} ${dir}`);
            assert.ok(
              report[dir].nicCongestion <= 1,
              `${world} ${seed} ${dir}: ${report[dir].nicCongestion}`,
            );
            assert.ok(
              report[dir].nvlinkCongestion <= 1,
              `${world} ${seed} ${dir}: NVLink ${report[dir].nvlinkCongestion}`,
            );
            assert.ok(report[dir].kvRounds >= report[dir].kvDirectDelta);
          }
          // The report defaults to the plan's recorded routing and node size (FCP records both).
          assert.deepEqual(planReport(plan).nicRoute, pxn);
          // The ablation keeps the rounds as placed: valid, groups alike, but NICs shared.
          const placed = planOf(world, seed, 'pxn', loaderLayout, { noRailRounds: true });
          assert.deepEqual(
            validatePlan(placed).issues.map((x) => x.code),
            [],
          );
          for (const dir of ['forward', 'backward'] as const)
            assert.equal(groupCount(placed[dir].groupOfRound), groupCount(plan[dir].groupOfRound));
          sharedWithoutSplit = Math.max(sharedWithoutSplit, planReport(placed, pxn).nicCongestion);
          // Under direct routing no round is split: the ablation changes nothing but the options.
          const direct = planOf(world, seed, 'direct', loaderLayout);
          const directPlaced = planOf(world, seed, 'direct', loaderLayout, { noRailRounds: true });
          assert.deepEqual(direct.forward.transfers.round, directPlaced.forward.transfers.round);
          assert.deepEqual(direct.backward.transfers.round, directPlaced.backward.transfers.round);
        }
      // Without the split the rounds do share NICs under PXN: the check above can fail.
      assert.ok(sharedWithoutSplit >= 2, `worst NIC congestion without the split ${sharedWithoutSplit}`);
    });

  it('byte-identical plans for PXN', () => {
    const a = JSON.stringify(planOf(8, 2, 'pxn', false));
    const b = JSON.stringify(planOf(8, 2, 'pxn', false));
    assert.equal(a, b);
  });
});

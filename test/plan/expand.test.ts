import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { expandChunks, hasChunkRows } from '../../src/plan/expand.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { chunkPlan } from '../executors/cpu-plans.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

const problem = (world: number, batch: number[]) =>
  resolveProblem({ batch, world, mask: 'causal', model: SMALL_MODEL, seed: 1 });

describe('expandChunks', () => {
  it('leaves a plan without chunk rows unchanged', () => {
    const plan = simplePlan(problem(3, [50, 20, 9]));
    assert.equal(hasChunkRows(plan), false);
    const ex = expandChunks(plan);
    assert.equal(ex.tasks, plan.tasks);
    assert.equal(ex.forward.transfers, plan.forward.transfers);
    assert.deepEqual(ex.backward.sendAfter, plan.backward.sendAfter);
  });

  it('cuts parts as [i*c, min((i+1)*c, L)) with c = ceil(L/P), skipping empty parts', () => {
    // World 2: P = 4 parts. Length 5: c = 2 -> [0,2) [2,4) [4,5) and an empty part 3.
    const plan = chunkPlan(problem(2, [5, 8, 1]));
    assert.equal(hasChunkRows(plan), true);
    const ex = expandChunks(plan);
    const rows = (l: Plan['homeLayout'], seq: number) =>
      Array.from(l.rank.keys())
        .filter((i) => l.seq[i] === seq)
        .map((i) => [l.rank[i], l.start[i], l.length[i]])
        .sort((a, b) => a[1]! - b[1]!);
    // Parts 0 and 3 live on rank 0, parts 1 and 2 on rank 1.
    assert.deepEqual(rows(ex.homeLayout, 0), [
      [0, 0, 2],
      [1, 2, 2],
      [1, 4, 1],
    ]);
    assert.deepEqual(rows(ex.userLayout, 1), [
      [0, 0, 2],
      [1, 2, 2],
      [1, 4, 2],
      [0, 6, 2],
    ]);
    assert.deepEqual(rows(ex.homeLayout, 2), [[0, 0, 1]]);
    for (const k of ['seqSets', 'homeChunks', 'userChunks', 'chunkTasks'] as const)
      assert.equal(ex[k], undefined);
    for (const ph of [ex.forward, ex.backward]) {
      assert.equal(ph.chunkTransfers, undefined);
      assert.equal(ph.compute.chunkTaskIds, undefined);
      assert.equal(ph.sendAfter.chunkTransfer, undefined);
    }
  });

  it('expands tasks, transfers and sendAfter pairs so that the explicit plan is valid too', () => {
    const plan = chunkPlan(problem(3, [40, 7, 13, 2, 30]));
    assert.deepEqual(validatePlan(plan).issues, []);
    const ex = expandChunks(plan);
    assert.deepEqual(validatePlan(ex).issues, []);
    // Every expanded task keeps its chunk task's rank and covers non-empty parts.
    for (let t = 0; t < ex.tasks.rank.length; t++)
      assert.ok(ex.tasks.qLength[t]! > 0 && ex.tasks.kvLength[t]! > 0);
    // Each chunk dkv expands to one dkv per sequence with a non-empty part, each with a sendAfter pair.
    const dkv = ex.backward.transfers.kind.filter((k) => k === Kind.dkv).length;
    const pairs = new Set(ex.backward.sendAfter.transfer);
    assert.ok(dkv > 0);
    for (let t = 0; t < ex.backward.transfers.kind.length; t++)
      if (ex.backward.transfers.kind[t] === Kind.dkv) assert.ok(pairs.has(t), `dkv ${t} lost its sendAfter`);
    // The op CSR covers every expanded task exactly once per phase.
    for (const ph of [ex.forward, ex.backward])
      assert.deepEqual(
        [...ph.compute.taskIds].sort((a, b) => a - b),
        [...ex.tasks.rank.keys()],
      );
  });

  it('refuses chunk rows that name a missing set or part', () => {
    const plan = chunkPlan(problem(2, [9, 4]));
    const badSet: Plan = {
      ...plan,
      homeChunks: { ...plan.homeChunks!, set: plan.homeChunks!.set.map(() => 5) },
    };
    assert.throws(
      () => expandChunks(badSet),
      (e: unknown) => e instanceof FcpError && e.code === 'plan.chunk.set',
    );
    const badPart: Plan = {
      ...plan,
      chunkTasks: { ...plan.chunkTasks!, qPart: plan.chunkTasks!.qPart.map(() => 99) },
    };
    assert.throws(
      () => expandChunks(badPart),
      (e: unknown) => e instanceof FcpError && e.code === 'plan.chunk.part',
    );
  });
});

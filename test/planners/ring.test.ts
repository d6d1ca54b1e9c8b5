import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expandChunks } from '../../src/plan/expand.ts';
import { planToJson } from '../../src/plan/io.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { planRing } from '../../src/planners/ring/index.ts';
import { ringStepPairs } from '../../src/planners/shared/dual-chunk-ring.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** Tokens of K/V of sequence `seq` that rank `src` sends in the forward (kind kv). */
function kvTokensSent(flat: Plan, src: number, seq: number): number {
  const t = flat.forward.transfers;
  let n = 0;
  for (let i = 0; i < t.round.length; i++)
    if (t.kind[i] === Kind.kv && t.src[i] === src && t.seq[i] === seq) n += t.length[i]!;
  return n;
}

test('ring: exactly N-1 forward rounds, one group each, every rank sending to r+1', () => {
  for (const n of [2, 3, 5, 8, 16]) {
    const plan = planRing(resolveProblem({ batch: [4 * n, 7, 50 * n + 3], world: n }));
    const f = plan.forward;
    assert.equal(f.groupOfRound.length, n - 1, `N=${n}`);
    assert.deepEqual(
      Array.from(f.groupOfRound),
      Array.from({ length: n - 1 }, (_, i) => i),
    );
    const ct = f.chunkTransfers!;
    assert.equal(f.transfers.round.length, 0);
    for (let i = 0; i < ct.round.length; i++) {
      assert.equal(ct.dst[i], (ct.src[i]! + 1) % n);
      assert.equal(ct.kind[i], Kind.kv);
    }
    // Every rank sends in every round.
    for (let r = 0; r < n - 1; r++) {
      const senders = new Set<number>();
      for (let i = 0; i < ct.round.length; i++) if (ct.round[i] === r) senders.add(ct.src[i]!);
      assert.equal(senders.size, n);
    }
  }
});

test('ring: each rank sends (N-1)/N of every sequence K/V in the forward (lengths multiple of 2N)', () => {
  for (const n of [2, 4, 7]) {
    const lens = [2 * n, 6 * n, 40 * n];
    const flat = expandChunks(planRing(resolveProblem({ batch: lens, world: n })));
    for (let s = 0; s < lens.length; s++)
      for (let r = 0; r < n; r++)
        assert.equal(kvTokensSent(flat, r, s), ((n - 1) * lens[s]!) / n, `N=${n} seq ${s} rank ${r}`);
  }
});

test('ring: DualChunkSwap layout, rank r holds parts r and 2N-1-r; padTo = 2N; user layout = home layout', () => {
  const n = 4;
  const lens = [64, 13];
  const plan = planRing(resolveProblem({ batch: lens, world: n }));
  assert.deepEqual(Array.from(plan.seqSets!.padTo!), [2 * n]);
  assert.deepEqual(plan.userChunks, plan.homeChunks);
  assert.equal(plan.userLayout.rank.length, 0);
  const flat = expandChunks(plan);
  // Sequence 0 (64 tokens, 8 parts of 8): rank r holds [8r, 8r+8) and [8(7-r), 8(7-r)+8).
  for (let i = 0; i < flat.homeLayout.rank.length; i++) {
    if (flat.homeLayout.seq[i] !== 0) continue;
    const r = flat.homeLayout.rank[i]!;
    const part = flat.homeLayout.start[i]! / 8;
    assert.ok(part === r || part === 2 * n - 1 - r, `part ${part} on rank ${r}`);
  }
  // No reshuffle: no in/out transfers.
  for (const ph of [flat.forward, flat.backward])
    for (let i = 0; i < ph.transfers.kind.length; i++)
      assert.ok(ph.transfers.kind[i] === Kind.kv || ph.transfers.kind[i] === Kind.dkv);
  assert.equal((plan.meta as { paddingTokens: number }).paddingTokens, 0 + (16 - 13));
});

test('ring: TE causal step rules cover every attended (q part, kv part) pair exactly once', () => {
  for (const k of [1, 2, 3, 6])
    for (const causal of [true, false]) {
      const seen = new Map<string, number>();
      for (let i = 0; i < k; i++)
        for (let p = 0; p < k; p++) {
          const pairs = ringStepPairs(k, p, i, causal);
          for (let j = 0; j < pairs.length; j += 2) {
            const key = `${pairs[j]},${pairs[j + 1]}`;
            seen.set(key, (seen.get(key) ?? 0) + 1);
            assert.ok(!causal || pairs[j]! >= pairs[j + 1]!, 'a causal task is never entirely masked');
          }
        }
      for (let q = 0; q < 2 * k; q++)
        for (let kv = 0; kv < 2 * k; kv++)
          assert.equal(seen.get(`${q},${kv}`) ?? 0, !causal || q >= kv ? 1 : 0, `k=${k} ${q},${kv}`);
    }
});

test('ring: backward returns dK/dV along the ring, each chain ending at the owner', () => {
  const n = 5;
  const plan = planRing(resolveProblem({ batch: [100, 40], world: n }));
  const b = plan.backward;
  assert.equal(b.groupOfRound.length, n); // K/V hops in rounds 0..N-2, dK/dV hops in 1..N-1
  const ct = b.chunkTransfers!;
  const hc = plan.homeChunks!;
  const owner = new Map<number, number>();
  for (let i = 0; i < hc.rank.length; i++) owner.set(hc.part[i]!, hc.rank[i]!);
  let lastHops = 0;
  for (let i = 0; i < ct.round.length; i++) {
    if (ct.kind[i] !== Kind.dkv) continue;
    assert.equal(ct.dst[i], (ct.src[i]! + 1) % n);
    assert.ok(ct.round[i]! >= 1);
    if (ct.round[i] === n - 1) {
      lastHops++;
      assert.equal(ct.dst[i], owner.get(ct.part[i]!), 'the last hop lands on the owner');
    }
  }
  assert.ok(lastHops > 0);
  // Every dK/dV send waits for the step's compute on its sender.
  assert.ok((b.sendAfter.chunkTransfer?.length ?? 0) > 0);
});

test('ring: plan size is O(N^2) chunk rows whatever the number of sequences; output is deterministic', () => {
  const few = planRing(resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 4096, seed: 3 }));
  const many = planRing(resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 65536, seed: 3 }));
  assert.ok(many.sequences.length > 2 * few.sequences.length);
  assert.equal(many.chunkTasks!.rank.length, few.chunkTasks!.rank.length);
  assert.equal(many.tasks.rank.length, 0);
  const again = planRing(resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 4096, seed: 3 }));
  assert.equal(planToJson(again), planToJson(few));
});

test('ring: one rank is one whole-sequence task per sequence, no transfers', () => {
  const flat = expandChunks(planRing(resolveProblem({ batch: [5, 9], world: 1 })));
  assert.equal(flat.forward.transfers.round.length + flat.backward.transfers.round.length, 0);
  assert.deepEqual(Array.from(flat.tasks.qLength), [5, 9]);
  assert.deepEqual(Array.from(flat.tasks.kvLength), [5, 9]);
});

/**
 * A hand-built plan whose home layout differs from the user layout, so that `in` and `out` carry
 * data: 2 ranks, one causal sequence of 8 tokens; user r0 [0,4) r1 [4,8), home swapped.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planFromJson } from '../../src/plan/io.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { clonePlan, codes, duplicateTransfer, removeTransfer } from './mutate.ts';

const json = {
  format: 'fcp-plan/1',
  strategy: 'hand',
  world: 2,
  mask: 'causal',
  model: { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 2 }, // 64 B/token for Q and for K+V
  sequences: [8],
  userLayout: { rank: [0, 1], seq: [0, 0], start: [0, 4], length: [4, 4] },
  homeLayout: { rank: [1, 0], seq: [0, 0], start: [0, 4], length: [4, 4] },
  tasks: {
    rank: [1, 0, 0],
    seq: [0, 0, 0],
    qStart: [0, 4, 4],
    qLength: [4, 4, 4],
    kvStart: [0, 0, 4],
    kvLength: [4, 4, 4],
  },
  forward: {
    transfers: {
      round: [0, 0, 1, 1],
      src: [0, 1, 1, 0],
      dst: [1, 0, 0, 1],
      kind: ['in', 'in', 'out', 'out'],
      seq: [0, 0, 0, 0],
      start: [0, 4, 0, 4],
      length: [4, 4, 4, 4],
    },
    groupOfRound: [0, 1],
    compute: { rank: [0, 1], after: [0, 0], taskOffsets: [0, 2, 3], taskIds: [1, 2, 0] },
    sendAfter: { transfer: [2, 3], compute: [1, 0] },
  },
  backward: {
    transfers: {
      round: [0, 0, 1, 2, 2],
      src: [0, 1, 0, 0, 1],
      dst: [1, 0, 1, 1, 0],
      kind: ['in', 'in', 'dkv', 'out', 'out'],
      seq: [0, 0, 0, 0, 0],
      start: [0, 4, 0, 4, 0],
      length: [4, 4, 4, 4, 4],
    },
    groupOfRound: [0, 1, 2],
    compute: { rank: [0, 1], after: [0, 0], taskOffsets: [0, 2, 3], taskIds: [1, 2, 0] },
    sendAfter: { transfer: [2, 3, 4], compute: [0, 0, 1] },
  },
};
const base: Plan = planFromJson(json);

function rejects(plan: Plan, code: string): void {
  const got = codes(validatePlan(plan).issues);
  assert.ok(got.includes(code), `expected ${code}, got ${JSON.stringify(got)}`);
}

test('the swapped-home plan is valid; its report counts bytes by kind', () => {
  const { issues, report } = validatePlan(base);
  assert.deepEqual(issues, []);
  assert.deepEqual(report.forward.bytes, { in: 8 * 128, kv: 0, out: 8 * 64, dkv: 0 });
  assert.deepEqual(report.backward.bytes, { in: 8 * 64, kv: 0, out: 8 * 128, dkv: 4 * 64 });
  assert.equal(report.attendedPairs, 36);
  assert.equal(report.computeImbalance, 26 / 18 - 1); // rank 0: 16 + 10 pairs, rank 1: 10
  assert.equal(report.forward.commImbalance, 0);
  assert.equal(report.congestion, 1);
  assert.equal(report.peakResidentTokens, 4);
});

test('a missing forward out leaves O away from its user rank (rule 4)', () => {
  const p = clonePlan(base);
  removeTransfer(p.forward, 2);
  rejects(p, 'plan.rule4.outMissing');
});

test('an out that does not wait for the op writing O is early (rule 4)', () => {
  // Only the out of [0, 4) waits for its op; the out of [4, 8) waits for nothing.
  const q = clonePlan(base);
  q.forward.sendAfter = { transfer: Int32Array.of(2), compute: Int32Array.of(1) };
  rejects(q, 'plan.rule4.outEarly');
});

test('a backward out in the group of an incoming dkv is early (rule 4)', () => {
  const p = clonePlan(base);
  p.backward.transfers.round[4] = 1; // out of [0,4) from rank 1, while rank 0's dkv of [0,4) arrives
  rejects(p, 'plan.rule4.outEarly');
});

test('an out sent twice is rejected (rule 4)', () => {
  const p = clonePlan(base);
  duplicateTransfer(p.forward, 2);
  rejects(p, 'plan.rule4.outDuplicate');
});

test('an in from a rank without the user tokens, to a rank that is not home, is rejected (rule 3)', () => {
  const p = clonePlan(base);
  p.forward.transfers.src[0] = 1;
  p.forward.transfers.dst[0] = 0;
  rejects(p, 'plan.rule3.senderMissing');
  rejects(p, 'plan.rule3.inNotHome');
});

test('Q used before its in arrives, and dO never brought in, are rejected (rule 3)', () => {
  const p = clonePlan(base);
  p.forward.compute.after[1] = -1;
  rejects(p, 'plan.rule3.qMissing');
  const q = clonePlan(base);
  removeTransfer(q.backward, 1);
  rejects(q, 'plan.rule3.qMissing');
});

test('an out sent by a rank that is not home is rejected (rule 3)', () => {
  const p = clonePlan(base);
  // O of [4, 8) lives on rank 0; pretend rank 1 sends it to rank 0.
  p.forward.transfers.src[3] = 1;
  p.forward.transfers.dst[3] = 0;
  p.forward.sendAfter.compute[1] = 1;
  rejects(p, 'plan.rule3.senderMissing');
});

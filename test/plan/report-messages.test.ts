/**
 * The rule-6 report's message statistics (src/plan/report-messages.ts): congestion counts one
 * rank's messages per round and link class, Δ and kv rounds from the distinct messages.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { messageStats } from '../../src/plan/report-messages.ts';

const W = 16;
const key = (round: number, src: number, dst: number): number => (round * W + src) * W + dst;

test('congestion: messages over NVLink and over the NIC are counted apart, for the node size', () => {
  // Round 0: rank 1 receives from node mate 2 (NVLink) and from 9 on the other node (NIC).
  const mixed = Float64Array.from([key(0, 2, 1), key(0, 9, 1)]);
  const none = new Uint8Array(2);
  assert.equal(messageStats(mixed, none, W, 8).congestion, 1);
  assert.equal(messageStats(mixed, none, W, 0).congestion, 2, 'one class: the rank receives two');
  // Two messages across nodes into rank 1 in one round share its NIC.
  assert.equal(messageStats(Float64Array.from([key(0, 9, 1), key(0, 10, 1)]), none, W, 8).congestion, 2);
  // Sends: rank 3 sends to a node mate and across nodes in round 1 (1), twice across (2).
  assert.equal(messageStats(Float64Array.from([key(1, 3, 4), key(1, 3, 12)]), none, W, 8).congestion, 1);
  assert.equal(messageStats(Float64Array.from([key(1, 3, 12), key(1, 3, 13)]), none, W, 8).congestion, 2);
  // Rows of one message collapse; rounds are separate.
  assert.equal(
    messageStats(Float64Array.from([key(0, 9, 1), key(0, 9, 1), key(1, 10, 1)]), new Uint8Array(3), W, 8)
      .congestion,
    1,
  );
});

test('congestion by link class matches a brute-force count', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.nat(3), fc.nat(W - 1), fc.nat(W - 1)), { maxLength: 60 }),
      fc.constantFrom(0, 2, 4, 8),
      (msgs, node) => {
        const keys = Float64Array.from(msgs, ([r, s, d]) => key(r, s, d));
        const seen = new Set<string>();
        const count = new Map<string, number>();
        for (const [r, s, d] of msgs) {
          if (seen.has(`${r}:${s}:${d}`)) continue;
          seen.add(`${r}:${s}:${d}`);
          const c = node > 0 && Math.floor(s / node) === Math.floor(d / node) ? 1 : 0;
          for (const k of [`s${r}:${s}:${c}`, `r${r}:${d}:${c}`]) count.set(k, (count.get(k) ?? 0) + 1);
        }
        const worst = Math.max(0, ...count.values());
        const m = messageStats(keys, new Uint8Array(keys.length), W, node);
        assert.equal(m.congestion, worst);
        assert.equal(m.messages, seen.size);
      },
    ),
    { seed: 7, numRuns: 300 },
  );
});

/**
 * The NIC-first order of mode (a) (push-links.ts; task-keys.ts uses it in both phases): keys put every
 * task whose push (backward: dK,dV partial; forward: O rows) crosses nodes before every task whose
 * push stays in the node, position order kept inside each class; with them a rank's last op pushes
 * over NVLink where position order left a NIC push at the end.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { orderOps } from '../../src/planners/fcp/order.ts';
import { nodeLocalLast } from '../../src/planners/fcp/push-links.ts';
import { oneRank } from '../helpers/order-input.ts';

test('node-local-last keys put cross-node pushes first and keep the key order inside each class', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.array(
        fc.record({
          rank: fc.integer({ min: 0, max: 31 }),
          pushTo: fc.integer({ min: 0, max: 31 }),
          key: fc.oneof(fc.integer({ min: 0, max: 64 }), fc.integer({ min: 0, max: 2 ** 40 })),
        }),
        { maxLength: 60 },
      ),
      (nodeSize, rows) => {
        const key = Float64Array.from(rows, (r) => r.key);
        const rank = Int32Array.from(rows, (r) => r.rank);
        const pushTo = Int32Array.from(rows, (r) => r.pushTo);
        const out = nodeLocalLast(key, rank, pushTo, nodeSize);
        const inNode = (i: number): number =>
          Math.floor(rows[i]!.rank / nodeSize) === Math.floor(rows[i]!.pushTo / nodeSize) ? 1 : 0;
        for (let i = 0; i < rows.length; i++)
          for (let j = 0; j < rows.length; j++) {
            const want = inNode(i) - inNode(j) || key[i]! - key[j]!;
            assert.equal(Math.sign(out[i]! - out[j]!), Math.sign(want), `tasks ${i} and ${j}`);
          }
      },
    ),
  );
});

test("with node-local-last keys a rank's last exporting op pushes inside its node", () => {
  // Rank 0 of a 2-node world (4 GPUs per node), 8 exporting tiles ready at once, 1 ms each, ops
  // cut at 2 ms: by position the tiles whose partials go to rank 5 (the other node) come last.
  const n = 8;
  const pushTo = Int32Array.from({ length: n }, (_, i) => (i < 4 ? 1 : 5));
  const input = oneRank(n, 1);
  const groupEnd = new Float64Array(8);
  const lastPushes = (key: Float64Array): number[] => {
    const c = orderOps({ ...input, key }, groupEnd, 1, 8, 2, 0, true, true).compute;
    const last = c.rank.length - 1;
    return Array.from(c.taskIds.subarray(c.taskOffsets[last]!, c.taskOffsets[last + 1]!), (x) => pushTo[x]!);
  };
  assert.deepEqual(new Set(lastPushes(input.key)), new Set([5]), 'by position the NIC pushes come last');
  const keyed = nodeLocalLast(input.key, input.rank, pushTo, 4);
  assert.deepEqual(
    new Set(lastPushes(keyed)),
    new Set([1]),
    'node-local last: the last op pushes over NVLink',
  );
});

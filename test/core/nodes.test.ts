/** core/nodes.ts: ranks numbered node by node. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sameNode } from '../../src/core/nodes.ts';

test('two ranks share a node exactly when their node indices agree', () => {
  for (const n of [1, 2, 4, 8])
    for (let a = 0; a < 4 * n; a++)
      for (let b = 0; b < 4 * n; b++) {
        // Brute force: the ranks of node k are k*n .. k*n + n - 1.
        let na = -1;
        let nb = -1;
        for (let k = 0; k < 4; k++) {
          if (a >= k * n && a < (k + 1) * n) na = k;
          if (b >= k * n && b < (k + 1) * n) nb = k;
        }
        assert.equal(sameNode(a, b, n), na === nb, `${a}, ${b} on nodes of ${n}`);
      }
});

test('node edges: the last rank of a node and the first of the next are apart', () => {
  assert.equal(sameNode(7, 8, 8), false);
  assert.equal(sameNode(8, 15, 8), true);
  assert.equal(sameNode(0, 0, 1), true);
  assert.equal(sameNode(0, 1, 1), false);
});

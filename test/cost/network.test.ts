import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { Network } from '../../src/cost/network.ts';
import { CLUSTER_PRESETS, computeSlowdown, resolveCluster, torusDimsFor } from '../../src/problem/cluster.ts';

const codes = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (e) {
    if (e instanceof FcpError) return e.issues.map((i) => i.code);
    throw e;
  }
  return [];
};

test('presets: hopper-ib and the paper compute-to-communication ratios', () => {
  const h = resolveCluster('hopper-ib');
  assert.deepEqual([h.peakTflops, h.gpusPerNode, h.nicGBps, h.commSms, h.totalSms], [989, 8, 50, 6, 132]);
  // FLOP per byte of the inter-node link.
  assert.ok(Math.abs(989e12 / (CLUSTER_PRESETS['ratio-5920']!.nicGBps * 1e9) / 5920 - 1) < 1e-5);
  assert.ok(Math.abs(989e12 / (CLUSTER_PRESETS['ratio-2500']!.nicGBps * 1e9) / 2500 - 1) < 1e-5);
  assert.equal(resolveCluster('torus').topology, 'torus');
  assert.ok(Math.abs(computeSlowdown(h) - 132 / 126) < 1e-15);
});

test('overrides apply and are validated', () => {
  assert.equal(resolveCluster('hopper-ib', { nicGBps: 25, commSms: 0 }).nicGBps, 25);
  assert.deepEqual(
    codes(() => resolveCluster('nope')),
    ['cluster.unknown'],
  );
  assert.deepEqual(
    codes(() => resolveCluster('hopper-ib', { nicGBps: 0, commSms: 132, gpusPerNode: 0 })),
    ['option.nicGBps', 'option.commSms', 'option.gpusPerNode'],
  );
  assert.deepEqual(
    codes(() => torusDimsFor(resolveCluster('torus', { torusDims: [3, 3] }), 8)),
    ['option.torusDims'],
  );
});

test('switch routes: NVLink inside a node, NICs across nodes', () => {
  const c = resolveCluster('hopper-ib', { latencyUs: 10, nvlinkLatencyUs: 4 });
  const n = new Network(c, 16);
  const out: number[] = [];
  assert.equal(n.route(1, 6, out), 0.004);
  assert.deepEqual(out, [4 * 1, 4 * 6 + 1]);
  out.length = 0;
  assert.equal(n.route(1, 9, out), 0.01);
  assert.deepEqual(out, [4 * 1 + 2, 4 * 9 + 3]);
  assert.equal(n.capacity[4 * 1 + 2], 50e6); // bytes per ms
  assert.equal(n.capacity[4 * 6 + 1], 400e6);
  // A node cap adds the two nodes' aggregate resources.
  const capped = new Network(resolveCluster('hopper-ib', { nodeNicGBps: 200 }), 16);
  out.length = 0;
  capped.route(1, 9, out);
  assert.deepEqual(out, [6, 39, 64, 67]);
});

test("pxn routes: across nodes by the NIC on the receiver's rail, through the node peer over NVLink", () => {
  const c = resolveCluster('hopper-ib', { latencyUs: 10, nvlinkLatencyUs: 4, routing: 'pxn' });
  const n = new Network(c, 20); // nodes 0-7, 8-15, 16-19
  const out: number[] = [];
  // Rank 1 to rank 14 (local 6): NVLink 1 -> 6, NIC of 6 out, NIC of 14 in; both latencies.
  assert.equal(n.route(1, 14, out), 0.014);
  assert.deepEqual(out, [4 * 1, 4 * 6 + 1, 4 * 6 + 2, 4 * 14 + 3]);
  // Already on the receiver's rail (local 1 -> local 1): direct, as without pxn.
  out.length = 0;
  assert.equal(n.route(1, 9, out), 0.01);
  assert.deepEqual(out, [4 * 1 + 2, 4 * 9 + 3]);
  // Inside a node nothing changes.
  out.length = 0;
  assert.equal(n.route(1, 6, out), 0.004);
  assert.deepEqual(out, [4 * 1, 4 * 6 + 1]);
  // The short last node (16-19) has no GPU on rail 5 for rank 17 -> 5: direct.
  out.length = 0;
  n.route(17, 5, out);
  assert.deepEqual(out, [4 * 17 + 2, 4 * 5 + 3]);
  // A node cap still adds the two nodes' aggregate resources.
  const capped = new Network(resolveCluster('hopper-ib', { nodeNicGBps: 200, routing: 'pxn' }), 16);
  out.length = 0;
  capped.route(1, 14, out);
  assert.deepEqual(out, [4, 25, 26, 59, 64, 67]);
  assert.deepEqual(
    codes(() => resolveCluster('hopper-ib', { routing: 'rail' as never })),
    ['option.routing'],
  );
  assert.equal(resolveCluster('hopper-ib').routing, 'direct');
});

test('torus routes: dimension order, shortest way round, one link per hop', () => {
  const c = resolveCluster('torus', { latencyUs: 5, hopUs: 1 });
  const n = new Network(c, 16); // 4 x 4
  assert.deepEqual(n.torusDims(), [4, 4]);
  const out: number[] = [];
  // Rank 0 (0,0) to rank 3 (3,0): one hop the negative way in x.
  assert.equal(n.route(0, 3, out), 0.006);
  assert.deepEqual(out, [0 * 4 + 1]);
  out.length = 0;
  // Rank 0 to rank 10 (2,2): two +x hops (0->1->2), then two +y hops (2->6->10).
  assert.equal(n.route(0, 10, out), 0.009);
  assert.deepEqual(out, [0 * 4 + 0, 1 * 4 + 0, 2 * 4 + 2, 6 * 4 + 2]);
  assert.deepEqual(torusDimsFor(c, 12), [3, 4]);
  assert.deepEqual(torusDimsFor(c, 7), [1, 7]);
});

/**
 * The contention model's functions, its parameter files and its fit to the published measurements
 * (data/network/contention.json).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import {
  alltoallUs,
  concurrentPortMs,
  defaultNetworkParams,
  effectivePortGBps,
  fitContention,
  fitTable,
  loadNetworkParams,
  messageCostUs,
  parseNetworkParams,
  portEfficiency,
} from '../../src/cost/contention.ts';
import { Network } from '../../src/cost/network.ts';
import { DEFAULT_CONTENTION, resolveCluster } from '../../src/problem/cluster.ts';

const codes = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (e) {
    if (e instanceof FcpError) return e.issues.map((i) => i.code);
    throw e;
  }
  return [];
};

test('port efficiency: 1 for one flow, falling towards 1 - loss', () => {
  assert.equal(portEfficiency(0.1, 1), 1);
  assert.equal(portEfficiency(0.1, 0), 1);
  assert.ok(Math.abs(portEfficiency(0.1, 2) - 0.95) < 1e-15);
  assert.ok(Math.abs(portEfficiency(0.1, 10) - 0.91) < 1e-15);
  assert.ok(portEfficiency(0.1, 1e9) > 0.9 && portEfficiency(0.1, 1e9) < 0.9000001);
});

test('the cluster carries the model: fluid charges nothing extra, contention the fitted terms', () => {
  const fluid = resolveCluster('hopper-ib');
  assert.equal(fluid.network, 'fluid');
  assert.equal(effectivePortGBps(fluid, 16), 50);
  assert.equal(messageCostUs(fluid, 16), 0);
  const c = resolveCluster('hopper-ib', { network: 'contention', contentionLoss: 0.1, contentionMsgUs: 2 });
  assert.equal(effectivePortGBps(c, 1), 50);
  assert.equal(messageCostUs(c, 1), 0);
  assert.ok(Math.abs(effectivePortGBps(c, 4) - 50 * (1 - 0.1 * 0.75)) < 1e-12);
  assert.equal(messageCostUs(c, 4), 6);
  // 4 flows of 1 MB through one port: 10 us latency + 3 * 2 us + 4e6 B / (46.25 GB/s).
  assert.ok(Math.abs(concurrentPortMs(c, 4, 4e6) - (0.016 + 4e6 / 46.25e6)) < 1e-12);
  // One flow: exactly the fluid cost.
  assert.equal(concurrentPortMs(c, 1, 1e6), concurrentPortMs(fluid, 1, 1e6));
});

test('bad network settings are refused with codes', () => {
  assert.deepEqual(
    codes(() => resolveCluster('hopper-ib', { network: 'bogus' as 'fluid' })),
    ['option.network'],
  );
  assert.deepEqual(
    codes(() => resolveCluster('hopper-ib', { contentionLoss: 1, contentionMsgUs: -1 })),
    ['option.contentionMsgUs', 'option.contentionLoss'],
  );
});

test('parameter files: the shipped one parses; malformed ones get codes', () => {
  const doc = defaultNetworkParams();
  assert.equal(doc.params.loss, DEFAULT_CONTENTION.contentionLoss);
  assert.equal(doc.params.msgUs, DEFAULT_CONTENTION.contentionMsgUs);
  const dir = mkdtempSync(join(tmpdir(), 'fcp-net-'));
  const put = (name: string, text: string): string => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  assert.deepEqual(
    codes(() => loadNetworkParams(put('a.json', '{not json'))),
    ['network.json'],
  );
  assert.deepEqual(
    codes(() => loadNetworkParams(join(dir, 'missing.json'))),
    ['io.read'],
  );
  const bad = [
    [],
    { format: 'other/1', params: { loss: 0.1, msgUs: 1 } },
    { format: 'fcp-network/1' },
    { format: 'fcp-network/1', params: { loss: 1, msgUs: 1 } },
    { format: 'fcp-network/1', params: { loss: 0.1, msgUs: -2 } },
    { format: 'fcp-network/1', params: { loss: '0.1', msgUs: 1 } },
    { format: 'fcp-network/1', params: { loss: 0.1, msgUs: 1 }, fit: { p2pGBps: 0, latencyUs: 1 } },
    { format: 'fcp-network/1', params: { loss: 0.1, msgUs: 1 }, measurements: {} },
    {
      format: 'fcp-network/1',
      params: { loss: 0.1, msgUs: 1 },
      measurements: [{ id: 'x', kind: 'ring', measured: {} }],
    },
    {
      format: 'fcp-network/1',
      params: { loss: 0.1, msgUs: 1 },
      measurements: [{ kind: 'p2p', measured: {} }],
    },
  ];
  for (const b of bad)
    assert.deepEqual(
      codes(() => parseNetworkParams(b, 'x.json')),
      ['network.params'],
      JSON.stringify(b),
    );
  const ok = loadNetworkParams(
    put('ok.json', JSON.stringify({ format: 'fcp-network/1', params: { loss: 0.2, msgUs: 3 } })),
  );
  assert.deepEqual(ok.params, { loss: 0.2, msgUs: 3 });
});

test('the fit: refitting the measurements gives the shipped parameters, and each is reproduced within 10%', () => {
  const doc = defaultNetworkParams();
  const p = fitContention(doc);
  assert.ok(Math.abs(p.loss / doc.params.loss - 1) < 1e-3, `loss ${p.loss}`);
  assert.ok(Math.abs(p.msgUs / doc.params.msgUs - 1) < 1e-3, `msgUs ${p.msgUs}`);
  const rows = fitTable(doc);
  assert.equal(rows.length, doc.measurements!.length);
  assert.ok(rows.length >= 5);
  for (const r of rows) assert.ok(r.ok, `${r.id}: model ${r.model} vs ${r.measured} (${r.error})`);
  // The table can fail: without the per-message cost the 8 MiB all-to-all is ~48% too fast.
  const noMsg = fitTable(doc, { loss: doc.params.loss, msgUs: 0 });
  assert.ok(noMsg.some((r) => !r.ok));
  // Hand check of the 64-rank all-to-all: 56 remote peers of 128 KiB each, p2p 47.5 GB/s, 10 us.
  const { loss, msgUs } = doc.params;
  const eta = 1 - loss * (1 - 1 / 56);
  const hand = 10 + 55 * msgUs + (56 * 131072) / (47.5e3 * eta);
  assert.ok(Math.abs(alltoallUs(doc.params, 8, 8, 8388608, 47.5, 10) - hand) < 1e-9);
  assert.ok(Math.abs(hand - (337.8 + 295.6) / 2) < 0.5);
});

test('only the per-GPU NIC ports are contended, and only under the contention model', () => {
  const on = new Network(resolveCluster('hopper-ib', { network: 'contention' }), 16);
  assert.ok(on.hasContention());
  for (let r = 0; r < 16; r++) {
    assert.deepEqual([...on.contended.subarray(4 * r, 4 * r + 4)], [0, 0, 1, 1], `rank ${r}`);
  }
  assert.ok(!new Network(resolveCluster('hopper-ib'), 16).hasContention());
  // NVLink-only and torus networks have no measured contention: they stay fluid.
  assert.ok(!new Network(resolveCluster('torus', { network: 'contention' }), 16).hasContention());
});

test('the sensitivity fit (loss at its bound) also reproduces every measurement within 10%', () => {
  const base = defaultNetworkParams();
  const bound = loadNetworkParams(join(import.meta.dirname, '../../data/network/contention-loss-bound.json'));
  assert.ok(bound.params.loss > base.params.loss);
  for (const r of fitTable(base, bound.params)) assert.ok(r.ok, `${r.id}: ${r.model} vs ${r.measured}`);
});

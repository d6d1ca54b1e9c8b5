/**
 * `.npy` writer and reader: byte layout (magic, version, 64-byte aligned header), round trips, the
 * reader's refusals, and NumPy itself loading what we write (when /usr/bin/python3 has numpy).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { npyBytes, parseNpy } from '../../src/core/npy.ts';

const codeOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof FcpError, String(e));
    return e.code;
  }
  return 'none';
};

test('npyBytes: magic, version 1.0, header padded to 64 bytes and ended by a newline', () => {
  const b = npyBytes(Float32Array.of(1, 2, 3, 4, 5, 6), [3, 1, 2]);
  assert.deepEqual([...b.subarray(0, 8)], [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]);
  const hl = b[8]! | (b[9]! << 8);
  assert.equal((10 + hl) % 64, 0);
  const header = Buffer.from(b.subarray(10, 10 + hl)).toString('latin1');
  assert.match(header, /^\{'descr': '<f4', 'fortran_order': False, 'shape': \(3, 1, 2\), \} *\n$/);
  assert.equal(b.length, 10 + hl + 24);
  assert.match(Buffer.from(npyBytes(Float32Array.of(7), [1])).toString('latin1'), /'shape': \(1,\)/);
});

test('parseNpy reads back what npyBytes wrote, bit for bit', () => {
  const data = Float32Array.from({ length: 60 }, (_, i) => Math.sin(i) * 1e-3 - i);
  const back = parseNpy(npyBytes(data, [5, 3, 4]));
  assert.deepEqual(back.shape, [5, 3, 4]);
  assert.deepEqual(back.data, data);
  assert.deepEqual(parseNpy(npyBytes(new Float32Array(0), [0, 2, 4])).shape, [0, 2, 4]);
});

test('parseNpy refuses other files, dtypes, orders and truncated data with codes', () => {
  const good = npyBytes(Float32Array.of(1, 2, 3, 4), [2, 2]);
  assert.equal(
    codeOf(() => parseNpy(new Uint8Array(12))),
    'input.npy',
  );
  const swap = (from: string, to: string): Uint8Array => {
    const s = Buffer.from(good).toString('latin1').replace(from, to);
    return new Uint8Array(Buffer.from(s, 'latin1'));
  };
  assert.equal(
    codeOf(() => parseNpy(swap("'<f4'", "'<f8'"))),
    'input.npy',
  );
  assert.equal(
    codeOf(() => parseNpy(swap('False', 'True '))),
    'input.npy',
  );
  assert.equal(
    codeOf(() => parseNpy(good.subarray(0, good.length - 4))),
    'input.length',
  );
  assert.equal(
    codeOf(() => parseNpy(good.subarray(0, 20))),
    'input.npy',
  );
});

test('numpy.load reads our files with the right shape and values', (t) => {
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import numpy'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    t.skip('/usr/bin/python3 has no numpy');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'fcp-npy-'));
  try {
    const data = Float32Array.from({ length: 24 }, (_, i) => i / 8 - 1);
    writeFileSync(join(dir, 'a.npy'), npyBytes(data, [2, 3, 4]));
    const py = spawnSync(
      '/usr/bin/python3',
      [
        '-c',
        'import sys, numpy as np; a = np.load(sys.argv[1]); print(a.dtype, a.shape, float(a.sum()), float(a[1, 2, 3]))',
        join(dir, 'a.npy'),
      ],
      { encoding: 'utf8' },
    );
    assert.equal(py.status, 0, py.stderr);
    const sum = data.reduce((s, x) => s + x, 0);
    assert.equal(py.stdout.trim(), `float32 (2, 3, 4) ${sum} ${data[23]}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

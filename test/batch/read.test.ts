import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseBatchText, readBatchFile } from '../../src/batch/read.ts';
import { FcpError } from '../../src/core/issues.ts';
import { codeOf } from '../helpers/errors.ts';

test('parseBatchText reads lines, a JSON array and JSON lines alike', () => {
  assert.deepEqual([...parseBatchText('100\n 20\n\n# comment\n3\n')], [100, 20, 3]);
  assert.deepEqual([...parseBatchText('[100, 20, 3]')], [100, 20, 3]);
  assert.deepEqual([...parseBatchText('{"length": 100}\n{"length": 20, "id": "x"}\n')], [100, 20]);
});

test('parseBatchText rejects bad lengths with codes and line numbers', () => {
  assert.equal(
    codeOf(() => parseBatchText('10\n-5\n')),
    'batch.length.nonPositive',
  );
  assert.equal(
    codeOf(() => parseBatchText('10\n0\n')),
    'batch.length.nonPositive',
  );
  assert.equal(
    codeOf(() => parseBatchText('10\n2.5\n')),
    'batch.length.notInteger',
  );
  assert.equal(
    codeOf(() => parseBatchText('10\nabc\n')),
    'batch.length.notInteger',
  );
  assert.equal(
    codeOf(() => parseBatchText('')),
    'batch.empty',
  );
  assert.equal(
    codeOf(() => parseBatchText('[1, 2')),
    'batch.parse',
  );
  assert.equal(
    codeOf(() => parseBatchText('{"len": 3}')),
    'batch.parse',
  );
  // The row of a bad length: its line, or its 1-based position in a JSON array (`1e400` parses
  // to Infinity: too large, not "not an integer").
  for (const [text, code, row] of [
    ['1\n2\n-3\n', 'batch.length.nonPositive', 3],
    ['[1, 2, -3]', 'batch.length.nonPositive', 3],
    ['[7, 1e400]', 'batch.length.tooLarge', 2],
  ] as const)
    assert.throws(
      () => parseBatchText(text),
      (e: unknown) => e instanceof FcpError && e.code === code && e.issues[0]?.row === row,
      text,
    );
});

test('readBatchFile reports an unreadable file as io.read', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-'));
  assert.equal(
    codeOf(() => readBatchFile(join(dir, 'missing.txt'))),
    'io.read',
  );
  writeFileSync(join(dir, 'ok.txt'), '5\n6\n');
  assert.deepEqual([...readBatchFile(join(dir, 'ok.txt'))], [5, 6]);
});

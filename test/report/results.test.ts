import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { compactJson, readResults, resultsFromJson, resultsToJson } from '../../src/report/results.ts';
import { codeOf } from '../helpers/errors.ts';
import { smallResults } from './fixtures.ts';

test('results round-trip through JSON unchanged, byte for byte', () => {
  const r = smallResults();
  const text = resultsToJson(r);
  const back = resultsFromJson(JSON.parse(text));
  assert.deepEqual(back, r);
  assert.equal(resultsToJson(back), text);
});

test('results files that are not ours are user errors with codes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-results-'));
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, '{ not json');
  assert.equal(
    codeOf(() => readResults(bad)),
    'results.json',
  );
  assert.equal(
    codeOf(() => readResults(join(dir, 'missing.json'))),
    'io.read',
  );
  writeFileSync(bad, JSON.stringify({ format: 'fcp-plan/1' }));
  assert.equal(
    codeOf(() => readResults(bad)),
    'results.format',
  );
  const broken = JSON.parse(resultsToJson(smallResults()));
  broken.runs[0].mfuForward = 'high';
  delete broken.problem;
  assert.equal(
    codeOf(() => resultsFromJson(broken)),
    'results.schema',
  );
});

test('compactJson: flat values on one line, equal to JSON.parse of itself', () => {
  const v = { a: 1, b: [1, 2], c: [{ x: 1, y: 'z' }], d: { e: { f: null } }, g: [], h: undefined };
  const text = compactJson(v);
  assert.equal(
    text,
    '{\n "a": 1,\n "b": [1,2],\n "c": [\n  {"x":1,"y":"z"}\n ],\n "d": {\n  "e": {"f":null}\n },\n "g": []\n}',
  );
  assert.deepEqual(JSON.parse(text), JSON.parse(JSON.stringify(v)));
});

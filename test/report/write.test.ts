import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { figuresOf } from '../../src/report/figures.ts';
import { readResults } from '../../src/report/results.ts';
import { type ChartRenderer, checkOutDir, writeReport } from '../../src/report/write.ts';
import { smallResults } from './fixtures.ts';

/** A stand-in renderer: the writer's behaviour does not depend on what the charts look like. */
const fake: ChartRenderer = () => ({
  svg: '<svg><g class="role-mark"><path d="M0,0L1,1"/></g></svg>',
  png: Uint8Array.of(0x89, 0x50, 0x4e, 0x47),
});

const codeOf = async (f: () => Promise<unknown> | unknown): Promise<string> => {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof FcpError, String(e));
    return e.code;
  }
  assert.fail('expected an FcpError');
};

const fresh = (): string => mkdtempSync(join(tmpdir(), 'fcp-write-'));

test('writeReport writes index.html, results.json and a PNG and spec per figure', async () => {
  const dir = join(fresh(), 'out');
  const r = smallResults();
  const w = await writeReport(r, dir, { render: fake });
  const ids = figuresOf(r).map((f) => f.id);
  assert.deepEqual(
    w.files,
    ['index.html', 'results.json', ...ids.flatMap((id) => [`plots/${id}.png`, `plots/${id}.vl.json`])].sort(),
  );
  assert.deepEqual(readResults(join(dir, 'results.json')), r);
  assert.ok(readFileSync(join(dir, 'index.html'), 'utf8').includes('<figure id="mfu">'));
});

test('writeReport replaces a previous report and leaves no temporary folder', async () => {
  const parent = fresh();
  const dir = join(parent, 'out');
  await writeReport(smallResults(), dir, { render: fake });
  writeFileSync(join(dir, 'stale.txt'), 'from an older report');
  const r = smallResults();
  r.notes = ['second run'];
  await writeReport(r, dir, { render: fake });
  assert.deepEqual(readResults(join(dir, 'results.json')).notes, ['second run']);
  assert.ok(!readdirSync(dir).includes('stale.txt'));
  assert.deepEqual(readdirSync(parent), ['out']);
});

test('a failure while rendering leaves the previous report untouched and nothing else', async () => {
  const parent = fresh();
  const dir = join(parent, 'out');
  await writeReport(smallResults(), dir, { render: fake });
  const before = readFileSync(join(dir, 'index.html'), 'utf8');
  let calls = 0;
  const failing: ChartRenderer = (spec) => {
    if (++calls === 3) throw new Error('plot bug');
    return fake(spec);
  };
  await assert.rejects(
    writeReport({ ...smallResults(), notes: ['x'] }, dir, { render: failing }),
    /plot bug/,
  );
  assert.equal(readFileSync(join(dir, 'index.html'), 'utf8'), before);
  assert.deepEqual(readdirSync(parent), ['out']);
});

test('unusable output folders are io.write errors and nothing is written', async () => {
  const parent = fresh();
  writeFileSync(join(parent, 'file'), 'x');
  assert.equal(await codeOf(() => checkOutDir(join(parent, 'file'))), 'io.write'); // not a folder
  assert.equal(
    await codeOf(() => writeReport(smallResults(), join(parent, 'file', 'out'), { render: fake })),
    'io.write',
  );
  mkdirSync(join(parent, 'precious'));
  writeFileSync(join(parent, 'precious', 'thesis.tex'), 'x');
  assert.equal(
    await codeOf(() => writeReport(smallResults(), join(parent, 'precious'), { render: fake })),
    'io.write',
  );
  assert.deepEqual(readdirSync(join(parent, 'precious')), ['thesis.tex']);
  assert.deepEqual(readdirSync(parent).sort(), ['file', 'precious']);
  mkdirSync(join(parent, 'empty'));
  checkOutDir(join(parent, 'empty')); // an empty folder is fine
});

/**
 * `fcp demo` and `fcp report` through the real CLI (a child process): bad input fails fast with one
 * line and exit 2 and writes nothing; a small demo writes a report that `fcp report` redraws.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function fcp(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src/cli.ts'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, FCP_DEBUG: '' },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

const SMALL = ['--world', '4', '--tokens-per-rank', '4096', '--scaling', '2,4', '--no-numerics'];

test('fcp demo rejects bad input with one line, exit 2, and no report', () => {
  const parent = mkdtempSync(join(tmpdir(), 'fcp-cli-'));
  writeFileSync(join(parent, 'file'), 'x');
  const cases: [string[], string][] = [
    [['--strategies', 'fcp,nope'], 'strategy.unknown'],
    [['--world', '0'], 'option.world'],
    [['--out', join(parent, 'file', 'report')], 'io.write'],
  ];
  for (const [args, code] of cases) {
    const out = args.includes('--out') ? [] : ['--out', join(parent, 'r')];
    const r = fcp(['demo', ...SMALL, ...args, ...out]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, new RegExp(`^fcp: error: ${code.replace('.', '\\.')}`));
  }
  assert.deepEqual(readdirSync(parent), ['file']);
});

test('fcp demo writes a report; fcp report redraws it from results.json', () => {
  const parent = mkdtempSync(join(tmpdir(), 'fcp-cli-'));
  const dir = join(parent, 'report');
  const r = fcp(['demo', ...SMALL, '--out', dir]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^strategy\s+valid\s+MFU fwd/);
  assert.ok(r.stderr.includes(`fcp demo: wrote ${dir}/index.html`), r.stderr);
  assert.ok(existsSync(join(dir, 'index.html')));
  const results = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'));
  assert.equal(results.provenance.command, `fcp demo ${[...SMALL, '--out', dir].join(' ')}`);
  const again = join(parent, 'again');
  const r2 = fcp(['report', join(dir, 'results.json'), '--out', again]);
  assert.equal(r2.code, 0, r2.stderr);
  assert.equal(
    readFileSync(join(again, 'index.html'), 'utf8'),
    readFileSync(join(dir, 'index.html'), 'utf8'),
  );
  assert.ok(
    readFileSync(join(again, 'plots', 'timeline-backward.png')).equals(
      readFileSync(join(dir, 'plots', 'timeline-backward.png')),
    ),
  );
});

test('fcp report draws the compare.json of fcp compare, and refuses a plan with exit 2', () => {
  const parent = mkdtempSync(join(tmpdir(), 'fcp-cli-'));
  const cmp = join(parent, 'cmp');
  const c = fcp([
    'compare',
    '--strategies',
    'fcp,ring,wlb',
    '--world',
    '2,4',
    '--tokens-per-rank',
    '4096',
    '--out',
    cmp,
  ]);
  assert.equal(c.code, 0, c.stderr);
  const out = join(parent, 'from-compare');
  const r = fcp(['report', join(cmp, 'compare.json'), '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const html = readFileSync(join(out, 'index.html'), 'utf8');
  assert.ok(html.includes('Drawn from'), 'the page says where its numbers come from');
  assert.ok(existsSync(join(out, 'plots', 'scaling.png')));
  // The report it wrote is itself a results file fcp report accepts.
  assert.equal(fcp(['report', out, '--out', join(parent, 'again')]).code, 0);
  writeFileSync(join(parent, 'plan.json'), JSON.stringify({ format: 'fcp-plan/1' }));
  const bad = fcp(['report', join(parent, 'plan.json'), '--out', join(parent, 'x')]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^fcp: error: results\.format\b/);
  assert.ok(!existsSync(join(parent, 'x')));
});

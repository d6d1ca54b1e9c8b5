import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

/** Output of scripts/headline-tables.ts (over the committed docs/results folders unless a folder is given). */
const tables = (...args: string[]): string => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/headline-tables.ts', ...args], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
};

/** The script's plain output over the committed folders, run once for the tests that read it. */
let plain: string | undefined;
const committedTables = (): string => {
  plain ??= tables();
  return plain;
};

/** A peer-bound row: `| batch | cluster, network | GPUs | (a) fwd | 1.004x | bytescale 0.504 | 0.957x |`. */
const ROW =
  /^\| \w+ \| [\w-]+ \w+ \| (\d+)[†*]? \| \((?:a|b)\) (?:fwd|bwd) \| ([\d.]+)x \| \w+ ([\d.]+) \| ([\d.]+)x \|$/;

test('--peer-bounds lists exactly the met ratios that a perfectly balanced peer could take', () => {
  const out = tables('--peer-bounds');
  const head = /(\d+) of the (\d+) met ratios still meet/.exec(out);
  assert.ok(head, 'the summary sentence is printed');
  const [safe, met] = [Number(head[1]), Number(head[2])];
  const grid = /Targets met: (\d+) of/.exec(out);
  assert.equal(met, Number(grid?.[1]), "the met count is the grid's own");
  const rows = out
    .split('\n')
    .map((l) => ROW.exec(l))
    .filter((m) => m !== null);
  assert.equal(rows.length, met - safe, 'one row per met ratio not safe from the bound');
  for (const m of rows) {
    const target = Number(m[1]) <= 32 ? 1.0 : 1.13;
    const [ratio, peer, overPeer] = [Number(m[2]), Number(m[3]), Number(m[4])];
    assert.ok(ratio >= target, `${m[0]}: listed, so met`);
    assert.ok(overPeer < target, `${m[0]}: listed, so under the target over the peer's kernel MFU`);
    assert.ok(peer > 0 && peer < 1, `${m[0]}: a kernel MFU`);
  }
  const kernels = /below the highest peer kernel MFU in (\d+) of the (\d+) ratios/.exec(out);
  assert.ok(kernels && Number(kernels[1]) <= Number(kernels[2]));
});

test('without --peer-bounds the grid is printed without that section', () => {
  assert.doesNotMatch(committedTables(), /Against a perfectly balanced peer/);
});

const fixtures = mkdtempSync(join(tmpdir(), 'headline-'));
after(() => rmSync(fixtures, { recursive: true, force: true }));

/**
 * One folder's compare.json at 64 ranks: each strategy's MFU and kernel MFU, forward and backward,
 * and optionally its compute imbalance, forward and backward.
 */
const folder = (
  name: string,
  runs: Record<string, [number, number, number, number, number?, number?]>,
): void => {
  mkdirSync(join(fixtures, name));
  const entries = Object.entries(runs);
  const compare = {
    tokensPerRank: 4096,
    cluster: { peakTflops: 989 },
    summary: entries.map(([strategy, [f, b]]) => ({
      strategy,
      world: 64,
      mfuForward: { mean: f },
      mfuBackward: { mean: b },
    })),
    rows: entries.map(([strategy, [f, b, kf, kb, imf, imb]]) => ({
      strategy,
      world: 64,
      config: {},
      ...(imf !== undefined
        ? { imbalances: { computeForward: imf, commForward: 0, computeBackward: imb ?? 0, commBackward: 0 } }
        : {}),
      makespans: { forwardMs: 10, backwardMs: 25 },
      mfuForward: f,
      mfuBackward: b,
      kernelMfu: { forward: kf, backward: kb },
    })),
  };
  writeFileSync(join(fixtures, name, 'compare.json'), JSON.stringify(compare));
};

test('--peer-bounds: a met ratio is listed exactly when it misses the target over a peer kernel MFU', () => {
  // Target 1.13 at 64 ranks. The strongest peer, magi: MFU 0.5 / 0.4, kernel MFU 0.6 / 0.45
  // (bytescale's kernels are weaker). FCP (a): 0.58 forward (1.16x, met; 0.58 / 0.6 < 1.13:
  // listed), 0.52 backward (1.30x; 0.52 / 0.45 = 1.156: safe). FCP (b): 0.5 forward (a miss),
  // 0.46 backward (1.15x; 0.46 / 0.45: listed).
  // magi's compute imbalance: 10% forward, none backward (bytescale's is not read: only magi has
  // a solver that could rebalance, docs/baselines.md).
  folder('best-longtail-fluid', {
    magi: [0.5, 0.4, 0.6, 0.45, 0.1, 0],
    bytescale: [0.3, 0.2, 0.55, 0.44, 2, 2],
  });
  folder('fcp-longtail-fluid-a', { fcp: [0.58, 0.52, 0.59, 0.53] });
  folder('fcp-longtail-fluid-b', { fcp: [0.5, 0.46, 0.61, 0.47] });
  const out = tables(fixtures, '--peer-bounds');
  assert.match(out, /Targets met: 3 of 4 ratios/);
  assert.match(out, /1 of the 3 met ratios still meet/);
  const rows = out.split('\n').filter((l) => ROW.test(l));
  assert.deepEqual(rows, [
    '| longtail | hopper-ib fluid | 64 | (a) fwd | 1.160x | magi 0.600 | 0.967x |',
    '| longtail | hopper-ib fluid | 64 | (b) bwd | 1.150x | magi 0.450 | 1.022x |',
  ]);
  // FCP's kernel MFU against the highest peer's: 0.59 < 0.6, 0.53 > 0.45, 0.61 > 0.6, 0.47 > 0.45.
  assert.match(out, /below the highest peer kernel MFU in 1 of the 4 ratios/);
  // magi rebalanced: forward 0.5 / (1 - 0.1 x 0.5 / 0.6) = 0.5455, so FCP (a)'s 0.58 is 1.063x of it;
  // backward unchanged (0.4): both backward ratios stay met.
  assert.match(out, /balance at most[^\n]*\n/);
  assert.match(out, /: 2 of the 3 met ratios still meet their target\. This is what its dynamic solver/);
  assert.ok(out.includes('| longtail | hopper-ib fluid | 64 | (a) fwd | 1.160x | 0.545 | 1.063x |'));
});

test('docs/results.md holds the tables as the committed folders give them, and the README their count', () => {
  // A session that regenerates folders but not the docs (or edits the docs by hand) fails here:
  // the docs' headline block is the script's output, verbatim, and the README's grid count is its.
  const out = committedTables().replace(/\n+$/, '');
  const results = readFileSync('docs/results.md', 'utf8');
  assert.ok(results.includes(out), 'docs/results.md holds `npx tsx scripts/headline-tables.ts` verbatim');
  // The summary table is also quoted under "What it says", at the top of the file.
  const head = '| batch | cluster | ranks | mode (a) | mode (b) |';
  const summary = out.slice(out.indexOf(head)).split('\n\n')[0]!;
  assert.ok(summary.startsWith(head), 'the summary table is printed');
  assert.ok(results.split(summary).length - 1 >= 2, 'the summary under "What it says" is the current one');
  const met = /Targets met: (\d+) of (\d+) ratios/.exec(out);
  assert.ok(met, 'the grid count is printed');
  const readme = readFileSync('README.md', 'utf8');
  assert.match(readme, new RegExp(`The acceptance grid: ${met[1]} of ${met[2]} cells met`));
});

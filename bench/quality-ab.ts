/**
 * A/B of FCP's simulated MFU over many batches, paired by batch: is a planner change better, or
 * did three batches happen to favour it? Mode (b)'s self-tuner flips between plans on near ties of
 * its estimate, and one flip moves a world's mean by up to 0.03 (docs/results.md, session 14), so a
 * change of a few thousandths cannot be told from noise on seeds 1-3. This runs `fcp compare
 * --strategies fcp` on both sides over `--seeds` batches per batch kind and world, pairs the rows
 * by (batch kind, world, seed), and prints the mean difference B - A of forward and backward MFU
 * with its standard error and the number of batches up and down, per batch kind and world, per
 * world, and over all; the last column is both phases together (`mfu`: the useful work of both
 * over their summed makespans), what a self-tuner flip that trades one phase for the other moves.
 *
 * Sides: `--base <rev>` (A: that commit in a temporary worktree, B: this working tree), `--env
 * K=V[,K=V...]` (A: this tree, B: this tree with those environment variables, for experiments
 * behind a switch), or `--b-args '<options>'` (B: this tree with more `fcp compare` options, e.g.
 * `--free-kinds forward.in` for what hiding a kind of transfer would buy). All simulated.
 *
 * Run: npx tsx bench/quality-ab.ts (--base <rev> | --env K=V,... | --b-args '...') [--batches longtail,magi,bimodal]
 *        [--worlds 16,64,256] [--seeds 6] [--seed 1] [--loader-layout] [--network fluid|contention]
 *        [--cluster hopper-ib] [--routing direct|pxn] [--calibration F] [--keep]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argValue } from './fcp-replay.ts';
import { repoRoot, withWorktree } from './worktree.ts';

const argv = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(argv, k, d);
const fail = (msg: string): never => {
  console.error(`bench/quality-ab.ts: ${msg}`);
  process.exit(2);
};
const base = val('--base', '');
const envSpec = val('--env', '');
const bArgs = val('--b-args', '');
/** Kernel tables both sides plan and simulate with ('': the shipped H200 ones). */
const calibration = val('--calibration', '');
if ([base, envSpec, bArgs].filter((x) => x !== '').length !== 1)
  fail("give exactly one of --base <rev>, --env K=V[,K=V...] and --b-args '<fcp compare options>'");
const envB: Record<string, string> = {};
for (const kv of envSpec === '' ? [] : envSpec.split(',')) {
  const i = kv.indexOf('=');
  if (i <= 0) fail(`--env expects K=V pairs (got '${kv}')`);
  envB[kv.slice(0, i)] = kv.slice(i + 1);
}
const batches = val('--batches', 'longtail,magi,bimodal').split(',');
const worlds = val('--worlds', '16,64,256');
const seeds = Number(val('--seeds', '6'));
const first = Number(val('--seed', '1'));
if (!Number.isInteger(seeds) || seeds < 2)
  fail(`--seeds must be an integer >= 2 (got ${val('--seeds', '')})`);
if (!Number.isInteger(first) || first < 1)
  fail(`--seed must be a positive integer (got ${val('--seed', '')})`);
const common = [
  '--strategies',
  'fcp',
  '--network',
  val('--network', 'fluid'),
  '--cluster',
  val('--cluster', 'hopper-ib'),
  '--routing',
  val('--routing', 'direct'),
  '--world',
  worlds,
  '--batches',
  String(seeds),
  '--seed',
  String(first),
  '-q',
  ...(argv.includes('--loader-layout') ? ['--loader-layout'] : []),
  ...(calibration !== '' ? ['--calibration', calibration] : []),
];

interface Row {
  world: number;
  seed: number;
  mfuForward: number;
  mfuBackward: number;
  /** Forward and backward together (the useful work of both over their summed makespans). */
  mfu: number;
}

/** FCP's rows of one `fcp compare` run in `cwd` on `batch` (`extra`: more compare options). */
function compare(
  cwd: string,
  batch: string,
  env: Record<string, string>,
  label: string,
  extra: readonly string[] = [],
): Row[] {
  const out = mkdtempSync(join(tmpdir(), 'fcp-qab-'));
  const t0 = performance.now();
  try {
    execFileSync(
      'npx',
      ['tsx', 'src/cli.ts', 'compare', ...common, ...extra, '--batch', batch, '--out', out],
      {
        cwd,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    const rows = (
      JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8')) as { rows: (Row & { strategy: string })[] }
    ).rows;
    process.stderr.write(`${label} ${batch}: ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);
    return rows.filter((r) => r.strategy === 'fcp');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** Paired differences B - A per (batch, world). */
const diffs = new Map<string, { fwd: number[]; bwd: number[]; both: number[] }>();
function pair(batch: string, a: Row[], b: Row[]): void {
  const key = (r: Row): string => `${r.world}:${r.seed}`;
  const byKey = new Map(a.map((r) => [key(r), r]));
  for (const rb of b) {
    const ra = byKey.get(key(rb));
    if (ra === undefined) continue;
    for (const k of [`${batch}:${rb.world}`, `*:${rb.world}`, '*:*']) {
      const d = diffs.get(k) ?? { fwd: [], bwd: [], both: [] };
      d.fwd.push(rb.mfuForward - ra.mfuForward);
      d.bwd.push(rb.mfuBackward - ra.mfuBackward);
      d.both.push(rb.mfu - ra.mfu);
      diffs.set(k, d);
    }
  }
}

const root = repoRoot();
const sides =
  base !== ''
    ? withWorktree(base, argv.includes('--keep'), (tree, rev) => {
        for (const b of batches) pair(b, compare(tree, b, {}, `A ${rev}`), compare(root, b, {}, 'B head'));
        return `A = ${rev}, B = this working tree`;
      })
    : envSpec !== ''
      ? (() => {
          for (const b of batches) pair(b, compare(root, b, {}, 'A'), compare(root, b, envB, `B ${envSpec}`));
          return `A = this tree, B = this tree with ${envSpec}`;
        })()
      : (() => {
          const extra = bArgs.split(/\s+/).filter((x) => x !== '');
          for (const b of batches)
            pair(b, compare(root, b, {}, 'A'), compare(root, b, {}, `B ${bArgs}`, extra));
          return `A = this tree, B = this tree with compare options ${bArgs}`;
        })();

/** Mean, standard error of the mean, batches up and down. */
function stats(xs: number[]): string {
  const n = xs.length;
  const m = xs.reduce((s, x) => s + x, 0) / n;
  const sd = Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / Math.max(1, n - 1));
  const up = xs.filter((x) => x > 1e-9).length;
  const down = xs.filter((x) => x < -1e-9).length;
  const sign = (x: number): string => (x >= 0 ? '+' : '') + x.toFixed(4);
  return `${sign(m)} ± ${(sd / Math.sqrt(n)).toFixed(4)}  ${String(up).padStart(3)} up ${String(down).padStart(3)} down`;
}

console.log(
  `FCP quality A/B (simulated MFU, B - A, mean ± standard error over paired batches): ${sides}; seeds ${first}..${first + seeds - 1}, ${argv.includes('--loader-layout') ? 'mode (b)' : 'mode (a)'}, ${val('--network', 'fluid')}, ${val('--cluster', 'hopper-ib')}, ${val('--routing', 'direct')} routing${calibration !== '' ? `, kernel tables ${calibration}` : ''}`,
);
console.log(
  `${'batch'.padEnd(9)} ${'GPUs'.padStart(5)}  ${'n'.padStart(3)}  forward${' '.repeat(31)}backward${' '.repeat(30)}forward + backward`,
);
const order = [...diffs.keys()].sort((x, y) => {
  const [bx, wx] = x.split(':');
  const [by, wy] = y.split(':');
  const rank = (b: string): number => (b === '*' ? 1 : 0);
  return (
    rank(bx!) - rank(by!) ||
    bx!.localeCompare(by!) ||
    (wx === '*' ? 1e9 : Number(wx)) - (wy === '*' ? 1e9 : Number(wy))
  );
});
for (const k of order) {
  const [b, w] = k.split(':');
  const d = diffs.get(k)!;
  console.log(
    `${(b === '*' ? 'all' : b!).padEnd(9)} ${(w === '*' ? 'all' : w!).padStart(5)}  ${String(d.fwd.length).padStart(3)}  ${stats(d.fwd)}    ${stats(d.bwd)}    ${stats(d.both)}`,
  );
}

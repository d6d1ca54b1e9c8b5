/**
 * How much FCP's ratio over the strongest tuned baseline moves with the kernel tables (simulated):
 * runs `fcp compare --strategies fcp,magi,bytescale --baselines best` per batch kind, world and
 * mode under each table of `--tables` and prints, per cell and direction, FCP's MFU over the
 * strongest baseline's under each, the difference between the last two tables, whether each meets
 * the issue's target (>= 1.0 at 16-32 GPUs, >= 1.13 from 64 on), and a summary: the median and the
 * largest difference between the last two tables per mode, and how many verdicts they disagree on.
 * Two calibrations of one GPU taken back to back (docs/results-gpu/h100-run17a-calibrate.json and
 * 17b) give the noise of a table; the shipped H200 table (`h200`, the default) against either
 * gives the hardware's share. Every baseline is re-tuned under each table (its sweep). One
 * cluster, network model and routing per run (default hopper-ib, fluid, direct; the grid takes each
 * strategy's better of direct and PXN routing, so its ratios differ).
 *
 * Run: npx tsx bench/calibration-sensitivity.ts [--tables h200,a=F,b=G] [--worlds 16,32,64,128,256]
 *        [--batches longtail,magi,bimodal] [--modes a,b] [--batches-per-cell 3]
 *        [--cluster hopper-ib] [--network fluid|contention] [--routing direct|pxn]
 * A table is `name=file` or `h200` (the shipped tables). Progress per run on stderr.
 */
import { execFileSync } from 'node:child_process';
import { median } from '../src/core/stats.ts';
import { argValue } from './fcp-replay.ts';
import { repoRoot } from './worktree.ts';

const argv = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(argv, k, d);
const tables = val(
  '--tables',
  'h200,17a=docs/results-gpu/h100-run17a-calibrate.json,17b=docs/results-gpu/h100-run17b-calibrate.json',
)
  .split(',')
  .map((t) => {
    const i = t.indexOf('=');
    return i < 0 ? { name: t, file: '' } : { name: t.slice(0, i), file: t.slice(i + 1) };
  });
const worlds = val('--worlds', '16,32,64,128,256').split(',').map(Number);
const batches = val('--batches', 'longtail,magi,bimodal').split(',');
const modes = val('--modes', 'a,b').split(',');
const perCell = val('--batches-per-cell', '3');
const cluster = val('--cluster', 'hopper-ib');
const network = val('--network', 'fluid');
const routing = val('--routing', 'direct');
if (tables.length < 2) {
  console.error('bench/calibration-sensitivity.ts: give at least two tables');
  process.exit(2);
}

/** MFU of every strategy of one compare run, by direction. */
type Mfu = Map<string, { fwd: number; bwd: number }>;

function run(table: (typeof tables)[number], mode: string, batch: string, world: number): Mfu {
  const t0 = performance.now();
  const args = ['tsx', 'src/cli.ts', 'compare', '--strategies', 'fcp,magi,bytescale', '--baselines', 'best'];
  args.push('--world', String(world), '--batch', batch, '--batches', perCell, '--csv', '-q');
  args.push('--cluster', cluster, '--network', network, '--routing', routing);
  if (mode === 'b') args.push('--loader-layout');
  if (table.file !== '') args.push('--calibration', table.file);
  const csv = execFileSync('npx', args, { cwd: repoRoot(), encoding: 'utf8' }).trim().split('\n');
  const head = csv[0]!.split(',');
  const col = (k: string): number => head.indexOf(k);
  const out: Mfu = new Map();
  for (const line of csv.slice(1)) {
    const f = line.split(',');
    out.set(f[col('strategy')]!, {
      fwd: Number(f[col('mfu_forward_mean')]),
      bwd: Number(f[col('mfu_backward_mean')]),
    });
  }
  process.stderr.write(
    `${table.name} (${mode}) ${batch} ${world}: ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
  );
  return out;
}

const target = (world: number): number => (world <= 32 ? 1.0 : 1.13);
const [pa, pb] = [tables[tables.length - 2]!, tables[tables.length - 1]!];
console.log(
  `FCP MFU over the strongest of magi and bytescale (tuned), simulated, ${cluster} ${network}, ${routing} routing, mean of ${perCell} batches`,
);
console.log(
  `| mode | batch | GPUs | dir | ${tables.map((t) => t.name).join(' | ')} | ${pa.name} - ${pb.name} | target |`,
);
console.log(`|---|---|---:|---|${tables.map(() => '---|').join('')}---:|---:|`);
const diffs = new Map<string, number[]>();
const disagree = new Map<string, number>();
const met = new Map<string, number>();
for (const mode of modes)
  for (const batch of batches)
    for (const world of worlds) {
      const runs = tables.map((t) => run(t, mode, batch, world));
      for (const dir of ['fwd', 'bwd'] as const) {
        const ratio = runs.map((r) => {
          let best = '';
          for (const [s, m] of r) if (s !== 'fcp' && (best === '' || m[dir] > r.get(best)![dir])) best = s;
          return { x: r.get('fcp')![dir] / r.get(best)![dir], who: best };
        });
        const d = ratio[ratio.length - 2]!.x - ratio[ratio.length - 1]!.x;
        diffs.set(mode, [...(diffs.get(mode) ?? []), Math.abs(d)]);
        const verdicts = ratio.map((r) => r.x >= target(world));
        if (verdicts[verdicts.length - 2] !== verdicts[verdicts.length - 1])
          disagree.set(mode, (disagree.get(mode) ?? 0) + 1);
        tables.forEach((t, i) => {
          if (verdicts[i]) met.set(t.name, (met.get(t.name) ?? 0) + 1);
        });
        const cells = ratio.map((r) => `${r.x.toFixed(3)}x (${r.who})`).join(' | ');
        const sign = d >= 0 ? '+' : '';
        console.log(
          `| (${mode}) | ${batch} | ${world} | ${dir} | ${cells} | ${sign}${d.toFixed(3)} | ${target(world).toFixed(2)} |`,
        );
      }
    }
console.log('');
for (const mode of modes) {
  const d = diffs.get(mode) ?? [];
  console.log(
    `mode (${mode}): |${pa.name} - ${pb.name}| median ${median(d).toFixed(4)}, largest ${Math.max(...d).toFixed(4)} over ${d.length} cells; verdicts differ in ${disagree.get(mode) ?? 0}`,
  );
}
console.log(
  `targets met: ${tables.map((t) => `${t.name} ${met.get(t.name) ?? 0}`).join(', ')} of ${diffs.size && [...diffs.values()].reduce((s, d) => s + d.length, 0)}`,
);

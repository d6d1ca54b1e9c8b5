/**
 * A what-if kernel calibration: the default H200 tables (data/calibration/h200-measured.json) with
 * their dense full rectangles (`cudnn-rect` rows) re-scaled by a rect-merge run
 * (scripts/gpu/rect-merge.py): each rectangle row lq x lk that the run measured against the same
 * work as lq-squares gets the H200 square's efficiency (`sdpa-cudnn`, full, side lq) times the
 * run's rectangle-over-squares MFU ratio (mean over the run's pairs of that shape), forward and
 * backward, where that is faster than the row as measured; rows the run has no pair for stay.
 *
 * Why: the calibration timed its squares and its rectangles in separate passes (h200.py,
 * `calibrate`), and says 2048 x 4096 and 4096 x 8192 rectangles run slower in the backward than
 * the squares of their side, while run 14 (an H100, interleaved rounds, equal work) measured them
 * 3-10% faster. With the run's ratios the simulator and FCP's planner (`--calibration` reaches both)
 * show what the tables would say if the H200 behaved like that H100. A what-if, not a measurement
 * of the H200.
 *
 * `--smooth-square L` instead: the H200 tables with the backward of their full square of side L
 * set to the geometric mean of the squares of sides L/2 and 2L (the table's 4096 square, 0.557,
 * stands above its 2048, 8192 and 16384 squares, which run 15 on an H100 does not show): how much
 * the comparison leans on that one row.
 *
 * Run: npx tsx scripts/gpu/rect-calibration.ts [docs/results-gpu/h100-run14-rect-merge.json] -o <out.json>
 *      npx tsx scripts/gpu/rect-calibration.ts --smooth-square 4096 -o <out.json>
 * then e.g. npx tsx src/cli.ts compare --strategies fcp,magi --baselines best --calibration <out.json> ...
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dataPath } from '../../src/core/data-dir.ts';

interface MergeRow {
  lq: number;
  lk: number;
  pieces: number;
  fwd_mfu: number;
  bwd_mfu: number;
  causal?: boolean;
}
interface CalRow {
  name?: string;
  kind?: string;
  causal?: boolean;
  lq: number;
  lk: number;
  fwd_ms: number;
  bwd_ms?: number;
  fwd_mfu?: number;
  bwd_mfu?: number;
}

const args = process.argv.slice(2);
const oAt = args.indexOf('-o');
const fail = (m: string): never => {
  process.stderr.write(`rect-calibration: ${m}\n`);
  process.exit(2);
};
if (oAt < 0 || args[oAt + 1] === undefined) fail('give -o <out.json>');
const out = args[oAt + 1]!;
const sAt = args.indexOf('--smooth-square');
const cal = JSON.parse(readFileSync(dataPath('calibration/h200-measured.json'), 'utf8')) as {
  note: string;
  rows: CalRow[];
};
const square = (l: number): CalRow | undefined =>
  cal.rows.find((r) => r.name === 'sdpa-cudnn' && r.causal === false && r.lq === l && r.lk === l);
if (sAt >= 0) {
  const l = Number(args[sAt + 1]);
  const [lo, mid, hi] = [square(l / 2), square(l), square(2 * l)];
  if (!lo || !mid || !hi || mid.bwd_ms === undefined || mid.bwd_mfu === undefined)
    fail(`--smooth-square needs full squares of sides L/2, L and 2L in the calibration (got ${args[sAt + 1]})`);
  const b = Math.sqrt(lo!.bwd_mfu! * hi!.bwd_mfu!);
  process.stdout.write(`${l} square: bwd MFU ${mid!.bwd_mfu!.toFixed(3)} -> ${b.toFixed(3)}\n`);
  mid!.bwd_ms! *= mid!.bwd_mfu! / b;
  mid!.bwd_mfu = b;
  cal.note = `What-if (scripts/gpu/rect-calibration.ts --smooth-square ${l}): the ${l} full square's backward set to the geometric mean of its neighbours. ${cal.note}`;
  writeFileSync(out, JSON.stringify(cal));
  process.stdout.write(`wrote ${out}\n`);
  process.exit(0);
}
const input = args.find((a, i) => i !== oAt && i !== oAt + 1) ?? 'docs/results-gpu/h100-run14-rect-merge.json';
const run = JSON.parse(readFileSync(input, 'utf8')) as { device: string; rows: MergeRow[] };

// Equal work in the run: a square row of side lq and a rectangle row lq x lk whose pieces x lk
// equals the squares' pieces x lq (same query rows, same keys).
const ratios = new Map<string, { f: number[]; b: number[] }>();
const rows = run.rows.filter((r) => r.causal !== true);
for (const sq of rows.filter((r) => r.lq === r.lk))
  for (const re of rows.filter((r) => r.lq === sq.lq && r.lk > r.lq && r.pieces * r.lk === sq.pieces * sq.lq)) {
    const k = `${re.lq}x${re.lk}`;
    const e = ratios.get(k) ?? { f: [], b: [] };
    e.f.push(re.fwd_mfu / sq.fwd_mfu);
    e.b.push(re.bwd_mfu / sq.bwd_mfu);
    ratios.set(k, e);
  }
const mean = (x: number[]): number => x.reduce((a, b) => a + b, 0) / x.length;
for (const r of cal.rows) {
  if (r.name !== 'cudnn-rect') continue;
  const e = ratios.get(`${r.lq}x${r.lk}`);
  const s = square(r.lq);
  if (!e || !s || r.fwd_mfu === undefined || r.bwd_mfu === undefined || r.bwd_ms === undefined) continue;
  const f = Math.max(r.fwd_mfu, s.fwd_mfu! * mean(e.f));
  const b = Math.max(r.bwd_mfu, s.bwd_mfu! * mean(e.b));
  process.stdout.write(
    `${r.lq}x${r.lk}: fwd MFU ${r.fwd_mfu.toFixed(3)} -> ${f.toFixed(3)}, bwd ${r.bwd_mfu.toFixed(3)} -> ${b.toFixed(3)} (ratio ${mean(e.f).toFixed(3)} / ${mean(e.b).toFixed(3)} over ${e.b.length} pair(s))\n`,
  );
  r.fwd_ms *= r.fwd_mfu / f;
  r.bwd_ms *= r.bwd_mfu / b;
  r.fwd_mfu = f;
  r.bwd_mfu = b;
}
cal.note = `What-if (scripts/gpu/rect-calibration.ts): the cudnn-rect rows re-scaled by ${input} (${run.device}). ${cal.note}`;
writeFileSync(out, JSON.stringify(cal));
process.stdout.write(`wrote ${out}\n`);

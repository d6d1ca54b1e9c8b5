/**
 * One kernel calibration from several runs of the same calibration on one kind of GPU: every row's
 * forward and backward time is the median of the runs' times for that row (MFU and TFLOP/s columns
 * scaled with it), so that one run's outlier row (session 37 measured 1% median and up to 10%
 * row-to-row differences between two runs a minute apart on one H100) does not decide the table.
 * The runs must hold the same rows (same kernel, mask, shape and batch) measured on the same device
 * name; the launch-floor probe is a row like the others.
 *
 * `--against F` also prints, for the dense cuDNN rows (`sdpa-cudnn` squares, `cudnn-rect`
 * rectangles), each run's MFU, the median's and F's, so that a shipped table can be checked row by
 * row against fresh runs.
 *
 * Run: npx tsx scripts/gpu/median-calibration.ts RUN1.json RUN2.json RUN3.json -o OUT.json
 *        [--against data/calibration/h200-measured.json]
 * (the runs: `python3 scripts/gpu/h200.py --out $OUT/a --sections env,calibrate --calib-reps 10`,
 * each `$OUT/a/h200-measured.json`; OUT.json loads with `--calibration OUT.json` like any table.)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { median } from '../../src/core/stats.ts';

/** A calibration row as h200.py writes it (the fields this script reads or scales). */
interface Row {
  name?: string;
  kind?: string;
  kernel?: string;
  causal?: boolean;
  lq: number;
  lk: number;
  pairs?: number;
  segments?: number;
  fwd_ms: number;
  bwd_ms?: number;
  fwd_mfu?: number;
  bwd_mfu?: number;
  fwd_tflops?: number;
  bwd_tflops?: number;
}

interface Table {
  device: string;
  note: string;
  rows: Row[];
}

const args = process.argv.slice(2);
const fail = (m: string): never => {
  process.stderr.write(`median-calibration: ${m}\n`);
  process.exit(2);
};
const valueOf = (flag: string): string | undefined => {
  const i = args.indexOf(flag);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--') || v === '-o') fail(`${flag} needs a value`);
  return v;
};
const out = valueOf('-o') ?? fail('give -o <out.json>');
const against = valueOf('--against');
const inputs = args.filter((a, i) => !a.startsWith('-') && args[i - 1] !== '-o' && args[i - 1] !== '--against');
if (inputs.length < 2) fail(`give at least two calibration files (got ${inputs.length})`);

const read = (path: string): Table => {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return fail(`cannot read ${path}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return fail(`${path} is not JSON`);
  }
  const t = doc as Partial<Table>;
  if (typeof t.device !== 'string' || !Array.isArray(t.rows))
    return fail(`${path} is not a calibration table (no device or rows)`);
  return t as Table;
};

/** What identifies a row across runs: kernel or backend, kind, mask, shape and batch. */
const keyOf = (r: Row): string =>
  [r.kernel ?? r.name ?? '', r.kind ?? '', r.causal === true, r.lq, r.lk, r.pairs ?? r.segments ?? 1].join('|');

const tables = inputs.map(read);
const device = tables[0]!.device;
for (const [i, t] of tables.entries())
  if (t.device !== device) fail(`${inputs[i]} was measured on ${t.device}, ${inputs[0]} on ${device}`);
const byKey = tables.map((t, i) => {
  const m = new Map<string, Row>();
  for (const r of t.rows) {
    const k = keyOf(r);
    if (m.has(k)) fail(`${inputs[i]} holds row ${k} twice`);
    m.set(k, r);
  }
  return m;
});
for (const [i, m] of byKey.entries()) {
  if (m.size !== byKey[0]!.size) fail(`${inputs[i]} has ${m.size} rows, ${inputs[0]} ${byKey[0]!.size}`);
  for (const k of byKey[0]!.keys()) if (!m.has(k)) fail(`${inputs[i]} has no row ${k}`);
}

/** The median row: the first run's row with its times (and the columns that follow them) scaled. */
const medianRow = (k: string): Row => {
  const rows = byKey.map((m) => m.get(k)!);
  const first = rows[0]!;
  const out: Row = { ...first };
  const f = median(rows.map((r) => r.fwd_ms));
  out.fwd_ms = f;
  if (first.fwd_mfu !== undefined) out.fwd_mfu = (first.fwd_mfu * first.fwd_ms) / f;
  if (first.fwd_tflops !== undefined) out.fwd_tflops = (first.fwd_tflops * first.fwd_ms) / f;
  if (rows.every((r) => r.bwd_ms !== undefined) && first.bwd_ms !== undefined) {
    const b = median(rows.map((r) => r.bwd_ms!));
    out.bwd_ms = b;
    if (first.bwd_mfu !== undefined) out.bwd_mfu = (first.bwd_mfu * first.bwd_ms) / b;
    if (first.bwd_tflops !== undefined) out.bwd_tflops = (first.bwd_tflops * first.bwd_ms) / b;
  }
  return out;
};

const merged: Table = {
  ...tables[0]!,
  note: `Per-row median of ${inputs.length} runs (scripts/gpu/median-calibration.ts: ${inputs.join(', ')}). ${tables[0]!.note}`,
  rows: tables[0]!.rows.map((r) => medianRow(keyOf(r))),
};
writeFileSync(out, JSON.stringify(merged));

if (against !== undefined) {
  const ref = new Map(read(against).rows.map((r) => [keyOf(r), r] as const));
  const f3 = (x: number | undefined): string => (x === undefined ? '-' : x.toFixed(3));
  process.stdout.write(
    `dense rows, MFU forward / backward: ${inputs.map((_, i) => `run ${i + 1}`).join(' | ')} | median | ${against}\n`,
  );
  for (const r of merged.rows) {
    const name = r.name ?? '';
    if (!name.includes('cudnn')) continue;
    const k = keyOf(r);
    const cells = byKey.map((m) => `${f3(m.get(k)!.fwd_mfu)} / ${f3(m.get(k)!.bwd_mfu)}`);
    const g = ref.get(k);
    process.stdout.write(
      `${name} ${r.causal === true ? 'causal' : 'full'} ${r.lq}x${r.lk}: ${cells.join(' | ')} | ${f3(r.fwd_mfu)} / ${f3(r.bwd_mfu)} | ${g ? `${f3(g.fwd_mfu)} / ${f3(g.bwd_mfu)}` : 'absent'}\n`,
    );
  }
}
process.stdout.write(`wrote ${out} (${merged.rows.length} rows, ${device})\n`);

/**
 * What a planner change did to FCP's rows of `fcp compare` folders (simulated): per folder and
 * world size, the mean forward / backward MFU over the batches before -> after, from a git
 * revision's copy of the folder and the working tree's. Used for docs/results.md's per-session
 * tables after `PART=fcp bash docs/results/run-headline.sh`.
 *
 * Usage: npx tsx scripts/folder-diff.ts <revision> <folder>... (folders relative to the repository root)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Row {
  strategy: string;
  world: number;
  mfuForward: number;
  mfuBackward: number;
}

/** Mean forward and backward MFU of FCP per world size. */
function means(text: string): Map<number, [number, number]> {
  const rows = (JSON.parse(text) as { rows: Row[] }).rows.filter((r) => r.strategy === 'fcp');
  const acc = new Map<number, [number, number, number]>();
  for (const r of rows) {
    const a = acc.get(r.world) ?? [0, 0, 0];
    acc.set(r.world, [a[0] + r.mfuForward, a[1] + r.mfuBackward, a[2] + 1]);
  }
  const out = new Map<number, [number, number]>();
  for (const [w, [f, b, n]] of acc) out.set(w, [f / n, b / n]);
  return out;
}

const [rev, ...folders] = process.argv.slice(2);
if (rev === undefined || folders.length === 0) {
  console.error('usage: npx tsx scripts/folder-diff.ts <revision> <folder>...');
  process.exit(2);
}
const f3 = (x: number): string => x.toFixed(3);
const d3 = (x: number): string => (x >= 0 ? '+' : '') + x.toFixed(3);
console.log('folder | GPUs | fwd before -> after | bwd before -> after');
console.log('---|---:|---|---');
for (const folder of folders) {
  const path = join(folder, 'compare.json');
  const before = means(execFileSync('git', ['show', `${rev}:${path}`], { encoding: 'utf8', maxBuffer: 1 << 28 }));
  const after = means(readFileSync(path, 'utf8'));
  for (const [w, [fa, ba]] of [...after].sort((x, y) => x[0] - y[0])) {
    const [fb, bb] = before.get(w) ?? [Number.NaN, Number.NaN];
    console.log(
      `${folder.split('/').pop()} | ${w} | ${f3(fb)} -> ${f3(fa)} (${d3(fa - fb)}) | ${f3(bb)} -> ${f3(ba)} (${d3(ba - bb)})`,
    );
  }
}

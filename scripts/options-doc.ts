/**
 * Writes the generated option tables into README.md and docs/cli.md (between the markers of
 * src/cli/options-doc.ts). `--check`: change nothing, exit 1 and name the files that differ.
 *
 *   npx tsx scripts/options-doc.ts [--check]      (npm run docs:options)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { GENERATED_TABLES, replaceBetween } from '../src/cli/options-doc.ts';

const root = fileURLToPath(new URL('../', import.meta.url));
const check = process.argv.includes('--check');
let stale = 0;
for (const file of ['README.md', 'docs/cli.md']) {
  const path = `${root}${file}`;
  const text = readFileSync(path, 'utf8');
  let next = text;
  for (const g of GENERATED_TABLES) {
    if (!g.files.includes(file)) continue;
    const r = replaceBetween(next, g.table(), g.markers);
    if (r === undefined) {
      process.stderr.write(`options-doc: ${file} lacks the markers ${g.markers.start} ... ${g.markers.end}\n`);
      stale++;
    } else next = r;
  }
  if (next === text) continue;
  if (check) {
    process.stderr.write(`options-doc: ${file} is out of date (npm run docs:options)\n`);
    stale++;
  } else {
    writeFileSync(path, next);
    process.stderr.write(`options-doc: wrote ${file}\n`);
  }
}
process.exitCode = stale > 0 ? 1 : 0;

/**
 * A seeded corpus of corrupted plan files, built from valid plans of every strategy (fcp, ring,
 * bytescale, wlb, magi) on small worlds: rows dropped or duplicated, ids out of range, wrong kinds,
 * negative, huge and non-integer numbers, NaN, broken CSR offsets (`compute.taskOffsets`), absurd
 * world and model sizes, truncated and non-JSON files.
 *
 *   npx tsx scripts/corrupt-plans.ts --out DIR [--seed 1] [--per-plan 40]
 *
 * writes DIR/NNNN-<strategy>-<mutation>.json (or .bin for non-JSON bytes) and DIR/manifest.json.
 * test/reliability/corpus.test.ts uses {@link corruptPlans} directly (a fixed-size sample) and feeds
 * every plan the validator rejects to every executor, which must refuse it with a code.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Rng } from '../src/core/rng.ts';
import { SMALL_MODEL } from '../src/model/attention.ts';
import { planToJson } from '../src/plan/io.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { resolveProblem } from '../src/problem/problem.ts';

/** One corrupted plan file. */
export interface CorruptPlan {
  /** Strategy of the valid plan it came from. */
  strategy: string;
  world: number;
  /** What was done to it, e.g. `set forward.transfers.src[3] = -1`. */
  mutation: string;
  /** The file's bytes (JSON text, or garbage for the non-JSON cases). */
  bytes: Buffer;
}

/** Strategies and worlds the corpus is built from. */
export const CORPUS_SOURCES: readonly { strategy: string; world: number }[] = [
  { strategy: 'fcp', world: 2 },
  { strategy: 'fcp', world: 4 },
  { strategy: 'ring', world: 2 },
  { strategy: 'ring', world: 4 },
  { strategy: 'bytescale', world: 4 },
  { strategy: 'wlb', world: 4 },
  { strategy: 'magi', world: 2 },
  { strategy: 'magi', world: 4 },
];

type Json = Record<string, unknown>;

/** The valid plan of `strategy` at `world`, as parsed JSON (small model, short sequences). */
export function validPlanJson(strategy: string, world: number): Json {
  const problem = resolveProblem({
    batch: world === 2 ? [90, 40, 12] : [200, 64, 33, 17, 9],
    world,
    model: SMALL_MODEL,
  });
  const options = strategy === 'fcp' ? { blockSize: 16, coalesce: 2 } : {};
  return JSON.parse(planToJson(getPlanner(strategy).plan(problem, options))) as Json;
}

/** Every table of a plan JSON, by dotted path (only those present). */
function tables(p: Json): [string, Json][] {
  const out: [string, Json][] = [];
  const add = (path: string, t: unknown): void => {
    if (typeof t === 'object' && t !== null && !Array.isArray(t)) out.push([path, t as Json]);
  };
  for (const k of ['userLayout', 'homeLayout', 'tasks', 'seqSets', 'homeChunks', 'userChunks', 'chunkTasks'])
    add(k, p[k]);
  for (const ph of ['forward', 'backward']) {
    const phase = p[ph] as Json | undefined;
    if (typeof phase !== 'object' || phase === null) continue;
    for (const k of ['transfers', 'compute', 'sendAfter', 'chunkTransfers']) add(`${ph}.${k}`, phase[k]);
  }
  return out;
}

/** Columns (arrays) of a table with at least one row. */
const columns = (t: Json): [string, unknown[]][] =>
  Object.entries(t).filter((e): e is [string, unknown[]] => Array.isArray(e[1]) && e[1].length > 0);

/** Row-aligned columns of a table (CSR offsets and ids excluded). */
const rowColumns = (t: Json): [string, unknown[]][] =>
  columns(t).filter(([k]) => !k.endsWith('Offsets') && !k.endsWith('Ids') && k !== 'offsets' && k !== 'seqs');

const pick = <T>(rng: Rng, a: readonly T[]): T => a[rng.int(0, a.length - 1)]!;

/** A placeholder the text pass turns into a bare `NaN` (not JSON). */
const NAN = '__fcp_corpus_NaN__';

/** Values that break an integer cell of a plan of `world` ranks. */
const badValues = (world: number): unknown[] => [
  -1,
  -2,
  world,
  world + 7,
  2147483647,
  -2147483648,
  1e12,
  1.5,
  NAN,
  null,
  'x',
  true,
];

type Mutator = (p: Json, rng: Rng, world: number) => string | undefined;

/** The JSON-level mutations; each returns its description, or undefined when it does not apply. */
const MUTATORS: Mutator[] = [
  // drop a row of a table (every row-aligned column)
  (p, rng) => {
    const all = tables(p);
    if (all.length === 0) return undefined;
    const [path, t] = pick(rng, all);
    const cols = rowColumns(t);
    if (cols.length === 0) return undefined;
    const i = rng.int(0, cols[0]![1].length - 1);
    for (const [, c] of cols) c.splice(i, 1);
    return `drop ${path}[${i}]`;
  },
  // duplicate a row
  (p, rng) => {
    const all = tables(p);
    if (all.length === 0) return undefined;
    const [path, t] = pick(rng, all);
    const cols = rowColumns(t);
    if (cols.length === 0) return undefined;
    const i = rng.int(0, cols[0]![1].length - 1);
    for (const [, c] of cols) c.push(c[i]);
    return `duplicate ${path}[${i}]`;
  },
  // one cell set to a bad value
  (p, rng, world) => {
    const all = tables(p);
    if (all.length === 0) return undefined;
    const [path, t] = pick(rng, all);
    const cols = columns(t);
    if (cols.length === 0) return undefined;
    const [k, c] = pick(rng, cols);
    const i = rng.int(0, c.length - 1);
    const v = k === 'kind' ? pick(rng, ['dkv', 'zz', 3, null, 'in', 'out']) : pick(rng, badValues(world));
    c[i] = v;
    return `set ${path}.${k}[${i}] = ${JSON.stringify(v)}`;
  },
  // a column of a different length
  (p, rng) => {
    const all = tables(p);
    if (all.length === 0) return undefined;
    const [path, t] = pick(rng, all);
    const cols = columns(t);
    if (cols.length === 0) return undefined;
    const [k, c] = pick(rng, cols);
    c.pop();
    return `shorten ${path}.${k}`;
  },
  // broken CSR offsets of compute ops (the simulator once looped forever on these)
  (p, rng) => {
    const ph = pick(rng, ['forward', 'backward']);
    const c = (p[ph] as Json | undefined)?.compute as Json | undefined;
    if (!c) return undefined;
    const key = pick(rng, ['taskOffsets', 'chunkTaskOffsets']);
    const o = c[key] as number[] | undefined;
    if (!o || o.length < 2) return undefined;
    const how = rng.int(0, 4);
    const i = rng.int(0, o.length - 1);
    if (how === 0) o.reverse();
    else if (how === 1) o[i] = 2147483647;
    else if (how === 2) o[i] = -5;
    else if (how === 3) o[o.length - 1] = Math.max(0, o[o.length - 1]! - 1);
    else o[0] = 1;
    return `${ph}.compute.${key}: ${['reversed', `[${i}] = 2^31-1`, `[${i}] = -5`, 'last - 1', 'first = 1'][how]}`;
  },
  // plan-wide fields: world, model, sequences, format, mask
  (p, rng) => {
    const which = rng.int(0, 9);
    const model = (p.model ?? {}) as Json;
    const seqs = (Array.isArray(p.sequences) ? p.sequences : []) as number[];
    switch (which) {
      case 0:
        p.world = pick(rng, [0, -1, 1000000, 2147483647, 1.5, null]);
        return `world = ${JSON.stringify(p.world)}`;
      case 1:
        model.qHeads = 5;
        model.kvHeads = 2;
        return 'qHeads 5 / kvHeads 2';
      case 2: {
        const k = pick(rng, ['qHeads', 'kvHeads', 'headDim', 'bytesPerElement']);
        model[k] = pick(rng, [0, -1, 1e9, 1.5]);
        return `model.${k} = ${model[k]}`;
      }
      case 3: {
        if (seqs.length === 0) return undefined;
        const i = rng.int(0, seqs.length - 1);
        seqs[i] = pick(rng, [0, -5, 2147483647, 1e9, seqs[i]! + 1, seqs[i]! - 1]);
        return `sequences[${i}] = ${seqs[i]}`;
      }
      case 4:
        p.format = pick(rng, ['fcp-plan/2', null, 1]);
        return `format = ${JSON.stringify(p.format)}`;
      case 5:
        p.mask = pick(rng, ['sliding', null]);
        return `mask = ${JSON.stringify(p.mask)}`;
      case 6: {
        const k = pick(rng, ['tasks', 'homeLayout', 'forward', 'sequences', 'model']);
        delete p[k];
        return `delete ${k}`;
      }
      case 7: {
        const ph = pick(rng, ['forward', 'backward']);
        const g = (p[ph] as Json | undefined)?.groupOfRound as number[] | undefined;
        if (!g || g.length === 0) return undefined;
        const i = rng.int(0, g.length - 1);
        g[i] = pick(rng, [-1, 2147483647, 100000000]);
        return `${ph}.groupOfRound[${i}] = ${g[i]}`;
      }
      case 8:
        seqs.push(1000000000);
        return 'a sequence of 1e9 tokens appended';
      default: {
        const ph = pick(rng, ['forward', 'backward']);
        const t = (p[ph] as Json | undefined)?.transfers as Json | undefined;
        const k = pick(rng, ['start', 'length']);
        const c = t?.[k] as number[] | undefined;
        if (!c || c.length === 0) return undefined;
        const i = rng.int(0, c.length - 1);
        c[i] = pick(rng, [-1, 0, 2147483647, c[i]! + 1]);
        return `set ${ph}.transfers.${k}[${i}] = ${c[i]}`;
      }
    }
  },
];

/** Applies one to three mutations; undefined when none applied. */
function mutate(valid: Json, rng: Rng, world: number): { json: Json; what: string } | undefined {
  const json = structuredClone(valid);
  const done: string[] = [];
  const n = rng.int(1, 3);
  for (let k = 0; k < n * 3 && done.length < n; k++) {
    const what = pick(rng, MUTATORS)(json, rng, world);
    if (what !== undefined) done.push(what);
  }
  return done.length === 0 ? undefined : { json, what: done.join('; ') };
}

/** Non-JSON and truncated files of a plan's text. */
function fileCorruptions(text: string, rng: Rng): { what: string; bytes: Buffer }[] {
  const cut = rng.int(1, text.length - 2);
  const garbage = Buffer.alloc(256);
  for (let i = 0; i < garbage.length; i++) garbage[i] = rng.int(0, 255);
  return [
    { what: `truncated at byte ${cut}`, bytes: Buffer.from(text.slice(0, cut)) },
    { what: 'empty file', bytes: Buffer.alloc(0) },
    { what: 'binary garbage', bytes: garbage },
    { what: 'gzip magic then garbage', bytes: Buffer.concat([Buffer.from([0x1f, 0x8b]), garbage]) },
    { what: 'a JSON array', bytes: Buffer.from('[1,2,3]') },
    { what: 'JSON null', bytes: Buffer.from('null') },
  ];
}

/**
 * The corpus: for every source of {@link CORPUS_SOURCES}, `perPlan` seeded JSON mutations of its
 * valid plan plus the file-level corruptions. Deterministic for a seed.
 */
export function corruptPlans(
  seed = 1,
  perPlan = 40,
  sources: readonly { strategy: string; world: number }[] = CORPUS_SOURCES,
): CorruptPlan[] {
  const rng = new Rng(seed);
  const out: CorruptPlan[] = [];
  for (const { strategy, world } of sources) {
    const valid = validPlanJson(strategy, world);
    for (let k = 0; k < perPlan; k++) {
      const m = mutate(valid, rng, world);
      if (!m) continue;
      const text = JSON.stringify(m.json).replaceAll(`"${NAN}"`, 'NaN');
      out.push({ strategy, world, mutation: m.what, bytes: Buffer.from(text) });
    }
    for (const f of fileCorruptions(JSON.stringify(valid), rng))
      out.push({ strategy, world, mutation: f.what, bytes: f.bytes });
  }
  return out;
}

/** Command line: writes the corpus to a folder with a manifest. */
function main(argv: string[]): void {
  const arg = (name: string, dflt: string): string => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : dflt;
  };
  const dir = arg('out', '');
  if (dir === '') {
    process.stderr.write('usage: npx tsx scripts/corrupt-plans.ts --out DIR [--seed 1] [--per-plan 40]\n');
    process.exitCode = 2;
    return;
  }
  const plans = corruptPlans(Number(arg('seed', '1')), Number(arg('per-plan', '40')));
  mkdirSync(dir, { recursive: true });
  const manifest = plans.map((c, i) => {
    const json = c.bytes.length > 0 && (c.bytes[0] === 0x7b || c.bytes[0] === 0x5b || c.bytes[0] === 0x6e);
    const file = `${String(i).padStart(4, '0')}-${c.strategy}${c.world}.${json ? 'json' : 'bin'}`;
    writeFileSync(join(dir, file), c.bytes);
    return { file, strategy: c.strategy, world: c.world, mutation: c.mutation };
  });
  writeFileSync(join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 1)}\n`);
  process.stdout.write(`wrote ${plans.length} corrupted plans to ${dir}\n`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href)
  main(process.argv.slice(2));

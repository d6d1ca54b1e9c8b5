/**
 * What `fcp report` can draw: every results file the tool writes. `fcp demo`'s results.json
 * (`fcp-results/1`) is read as it is; `fcp compare`'s compare.json (`fcp-compare/1`) is converted
 * to the same {@link Results} shape with `origin: 'compare'` (means over batches per strategy and
 * world; the sections compare.json has no data for are left out of the page). A folder stands for
 * the results file inside it.
 *
 * The compare schema is kept here, loosely (extra fields allowed), because report/ may not import
 * the CLI that writes it; only the fields the report uses are checked.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { readInputFile } from '../core/files.ts';
import { FcpError, fail, issue } from '../core/issues.ts';
import {
  RESULTS_FORMAT,
  type Results,
  resultsFromJson,
  type ScalingPoint,
  type StrategyRun,
} from './results.ts';

/** Format tag of `fcp compare`'s compare.json (src/cli/compare.ts writes it). */
export const COMPARE_FORMAT = 'fcp-compare/1';

const num = z.number();
const compareRowSchema = z.looseObject({
  strategy: z.string(),
  world: z.number().int(),
  batch: z.number().int(),
  mfuForward: num,
  mfuBackward: num,
  makespans: z.looseObject({ forwardMs: num, backwardMs: num }),
  imbalances: z.looseObject({ computeForward: num, commForward: num }),
  bytes: z.looseObject({ forward: num, backward: num }).optional(),
  /** A baseline's chosen configuration (text, or an object with e.g. `chosen`), when recorded. */
  config: z.unknown().optional(),
});

const compareSchema = z.looseObject({
  format: z.literal(COMPARE_FORMAT),
  strategies: z.array(z.string()),
  worlds: z.array(z.number().int()),
  batch: z.union([z.string(), z.number()]).optional(),
  batches: z.number().int().optional(),
  seed: z.number().int().optional(),
  tokensPerRank: z.number().int().optional(),
  mask: z.enum(['causal', 'full']).optional(),
  cluster: z.union([z.string(), z.looseObject({ name: z.string() })]).optional(),
  rows: z.array(compareRowSchema),
});

type CompareDoc = z.infer<typeof compareSchema>;
type CompareRow = CompareDoc['rows'][number];

/** A row's configuration in words: text as it is, `{chosen: x}` as `chose x`, else compact JSON. */
function configText(c: unknown): string | undefined {
  if (c === undefined || c === null) return undefined;
  if (typeof c === 'string') return c;
  if (typeof c === 'object' && typeof (c as { chosen?: unknown }).chosen === 'string')
    return `chose ${(c as { chosen: string }).chosen}`;
  const text = JSON.stringify(c);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

/**
 * The configuration of a group of rows (the batches of one strategy and world): the common one, or
 * for picks that differ between batches `chose a/b` (choices) or `varies: ...` (anything else).
 */
function groupConfig(rows: readonly CompareRow[]): string | undefined {
  const texts = [
    ...new Set(rows.map((r) => configText(r.config)).filter((t): t is string => t !== undefined)),
  ];
  if (texts.length <= 1) return texts[0];
  const picks = texts.map((t) => /^chose (\S+)/.exec(t)?.[1]);
  if (picks.every((p) => p !== undefined)) return `chose ${[...new Set(picks)].join('/')} (differs by batch)`;
  return `varies: ${texts.slice(0, 3).join('; ')}${texts.length > 3 ? '; ...' : ''}`;
}

const mean = (xs: readonly number[]): number => {
  let s = 0;
  for (const x of xs) s += x;
  return xs.length > 0 ? s / xs.length : 0;
};

/**
 * compare.json -> {@link Results}: the largest world's means become the summary rows, every
 * (strategy, world) mean a weak-scaling point. Loops only (no argument spreads): a sweep may hold
 * thousands of rows.
 */
export function compareToResults(doc: CompareDoc, path = 'compare.json'): Results {
  const groups = new Map<string, CompareRow[]>();
  let maxWorld = 0;
  for (const row of doc.rows) {
    const key = `${row.strategy}\u0000${row.world}`;
    let g = groups.get(key);
    if (!g) {
      g = [];
      groups.set(key, g);
    }
    g.push(row);
    if (row.world > maxWorld) maxWorld = row.world;
  }
  const strategies = [...doc.strategies];
  for (const row of doc.rows) if (!strategies.includes(row.strategy)) strategies.push(row.strategy);
  const worlds = [...new Set(doc.rows.map((r) => r.world))].sort((a, b) => a - b);
  const scaling: ScalingPoint[] = [];
  for (const world of worlds)
    for (const strategy of strategies) {
      const g = groups.get(`${strategy}\u0000${world}`);
      if (!g) continue;
      const config = groupConfig(g);
      scaling.push({
        strategy,
        world,
        mfuForward: mean(g.map((r) => r.mfuForward)),
        mfuBackward: mean(g.map((r) => r.mfuBackward)),
        valid: true,
        ...(config !== undefined ? { config } : {}),
      });
    }
  const runs: StrategyRun[] = [];
  for (const strategy of strategies) {
    const g = groups.get(`${strategy}\u0000${maxWorld}`);
    if (!g) continue;
    const config = groupConfig(g);
    const fwdBytes = mean(g.map((r) => r.bytes?.forward ?? 0));
    const bwdBytes = mean(g.map((r) => r.bytes?.backward ?? 0));
    runs.push({
      strategy,
      world: maxWorld,
      // compare does not run the validator; the summary shows n/a for origin 'compare'.
      valid: true,
      issueCodes: [],
      issueCount: 0,
      mfuForward: mean(g.map((r) => r.mfuForward)),
      mfuBackward: mean(g.map((r) => r.mfuBackward)),
      forwardMs: mean(g.map((r) => r.makespans.forwardMs)),
      backwardMs: mean(g.map((r) => r.makespans.backwardMs)),
      computeImbalance: mean(g.map((r) => r.imbalances.computeForward)),
      commImbalance: mean(g.map((r) => r.imbalances.commForward)),
      bytes: [],
      totalBytes: fwdBytes + bwdBytes,
      rounds: { forward: 0, backward: 0 },
      groups: { forward: 0, backward: 0 },
      congestion: { forward: 0, backward: 0 },
      ...(config !== undefined ? { config } : {}),
    });
  }
  const cluster = typeof doc.cluster === 'string' ? doc.cluster : (doc.cluster?.name ?? 'unknown');
  const batches = doc.batches ?? groups.values().next().value?.length ?? 0;
  const tokensPerRank = doc.tokensPerRank ?? 0;
  return {
    format: RESULTS_FORMAT,
    origin: 'compare',
    provenance: {
      command: `fcp compare (drawn from ${path})`,
      fcpVersion: 'unknown (compare.json does not record it)',
      node: 'unknown',
      gitCommit: null,
      platform: 'unknown',
    },
    problem: {
      batch: String(doc.batch ?? 'unknown'),
      world: maxWorld,
      tokensPerRank,
      seed: doc.seed ?? 1,
      mask: doc.mask ?? 'causal',
      model: { qHeads: 0, kvHeads: 0, headDim: 0, bytesPerElement: 0 },
      cluster,
      sequences: 0,
      totalTokens: maxWorld * tokensPerRank,
      longest: 0,
      medianLength: 0,
      lengthHistogram: [],
    },
    strategies,
    runs,
    scaling,
    timelines: [],
    placement: null,
    rounds: [],
    numerics: {
      world: 0,
      tokensPerRank: 0,
      model: { qHeads: 0, kvHeads: 0, headDim: 0, bytesPerElement: 0 },
      runs: [],
      skipped: 'compare.json holds no numerical check',
    },
    notes: [
      `Drawn from ${path} (fcp compare): means over ${batches} batch${batches === 1 ? '' : 'es'} per strategy and world; the summary is the largest world (${maxWorld}). compare.json keeps no validation, timelines, placement or batch lengths, so those sections are left out.`,
    ],
  };
}

/** Checks parsed compare.json against its (loose) schema; FcpError `results.schema`. */
export function compareFromJson(json: unknown, path = 'compare.json'): CompareDoc {
  const parsed = compareSchema.safeParse(json);
  if (!parsed.success)
    throw new FcpError(
      parsed.error.issues
        .slice(0, 5)
        .map((i) => issue('results.schema', `${i.path.join('.') || '(root)'}: ${i.message}`, path)),
    );
  return parsed.data;
}

/** Formats `fcp report` draws, for messages. */
export const REPORT_FORMATS = [RESULTS_FORMAT, COMPARE_FORMAT] as const;

/**
 * Any results file the tool writes, or a folder holding one (results.json first, then
 * compare.json), as {@link Results}. FcpError `io.read`, `results.json` (not JSON),
 * `results.format` (another file, with what to do), `results.schema`.
 */
export function readReportInput(path: string): Results {
  let file = path;
  if (existsSync(path) && statSync(path).isDirectory()) {
    const found = ['results.json', 'compare.json'].map((f) => join(path, f)).find((f) => existsSync(f));
    if (!found)
      fail(
        'results.format',
        `${path} is a folder without results.json or compare.json; pass the results file of fcp demo or fcp compare`,
        path,
      );
    file = found;
  }
  const text = readInputFile(file, 'results', 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    fail('results.json', `${file} is not valid JSON (${(e as Error).message})`, file);
  }
  const fmt = (json as { format?: unknown } | null)?.format;
  if (fmt === RESULTS_FORMAT) return resultsFromJson(json, file);
  if (fmt === COMPARE_FORMAT) return compareToResults(compareFromJson(json, file), file);
  const hint =
    fmt === 'fcp-plan/1'
      ? 'it is a plan: `fcp simulate PLAN` reports on one plan, `fcp demo` writes a results.json'
      : 'produce one with `fcp demo` (results.json) or `fcp compare --out DIR` (compare.json)';
  return fail(
    'results.format',
    `${file} is not a results file fcp can draw (format ${JSON.stringify(fmt)}, expected one of ${REPORT_FORMATS.join(', ')}); ${hint}`,
    file,
  );
}

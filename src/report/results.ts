/**
 * The demo's raw results (`results.json`, format `fcp-results/1`): everything the HTML report is
 * drawn from, so that `fcp report results.json` regenerates the report without re-planning.
 *
 * One zod schema is the single source of truth: the TypeScript types are inferred from it and the
 * reader validates files against it (a hand-edited or truncated file is a user error, not a crash).
 */
import { z } from 'zod';
import { readInputFile } from '../core/files.ts';
import { FcpError, fail, issue } from '../core/issues.ts';

/** Format tag written into every results file. */
export const RESULTS_FORMAT = 'fcp-results/1';

const num = z.number().finite();
const int = z.number().int();
const phaseName = z.enum(['forward', 'backward']);

/** What produced the results: the command line and the versions. */
const provenanceSchema = z.object({
  /** The command as typed, e.g. `fcp demo --world 16`. */
  command: z.string(),
  fcpVersion: z.string(),
  node: z.string(),
  /** `git rev-parse HEAD` of the checkout (with `+dirty` when it has changes); null outside git. */
  gitCommit: z.string().nullable(),
  platform: z.string(),
});

/** The batch and cluster of the main run. */
const problemSchema = z.object({
  batch: z.string(),
  world: int,
  tokensPerRank: int,
  seed: int,
  mask: z.enum(['causal', 'full']),
  model: z.object({ qHeads: int, kvHeads: int, headDim: int, bytesPerElement: int }),
  cluster: z.string(),
  sequences: int,
  totalTokens: int,
  longest: int,
  medianLength: num,
  /** Sequence-length histogram over powers of two: bucket [lo, 2*lo). */
  lengthHistogram: z.array(z.object({ lo: int, count: int, tokens: int })),
});

/** Bytes moved by one transfer kind in one phase. */
const bytesSchema = z.object({ phase: phaseName, kind: z.string(), bytes: num });

/** One strategy planned, validated and simulated at one world size. */
const strategyRunSchema = z.object({
  strategy: z.string(),
  world: int,
  valid: z.boolean(),
  /** Distinct validator issue codes (at most 10) and the total count. */
  issueCodes: z.array(z.string()),
  issueCount: int,
  mfuForward: num,
  mfuBackward: num,
  forwardMs: num,
  backwardMs: num,
  /** max/mean - 1 of attention work per rank. */
  computeImbalance: num,
  /** max/mean - 1 of bytes sent plus received per rank (both phases). */
  commImbalance: num,
  bytes: z.array(bytesSchema),
  totalBytes: num,
  rounds: z.object({ forward: int, backward: int }),
  groups: z.object({ forward: int, backward: int }),
  /** Most messages one rank sends or receives in one round (1 = congestion-free). */
  congestion: z.object({ forward: int, backward: int }),
  /** Error message when planning or simulating failed (the other numbers are then 0). */
  error: z.string().optional(),
  /** The configuration the strategy chose or was given, in words (e.g. wlb's `chose bytescale`). */
  config: z.string().optional(),
  /** Wall time of planning (forward and backward plan) on the machine that made the results. */
  planMs: num.optional(),
  /** Most tokens one rank holds at once: home tokens plus K/V received (the validator's rule-6 report). */
  peakResidentTokens: num.optional(),
});

/** One bar of a per-rank timeline. `lane` 0 = compute stream, 1 = communication stream. */
const timelineEventSchema = z.object({
  rank: int,
  lane: z.union([z.literal(0), z.literal(1)]),
  start: num,
  end: num,
  kind: z.string(),
});

const timelineSchema = z.object({
  strategy: z.string(),
  phase: phaseName,
  world: int,
  makespanMs: num,
  /** Number of ranks shown; the rest are left out to keep the figure readable. */
  ranks: int,
  /** The ranks shown, in drawing order (absent: ranks 0..ranks-1). */
  rankList: z.array(int).optional(),
  /** How the shown ranks were chosen, in words (absent: every rank, or the first `ranks`). */
  sample: z.string().optional(),
  events: z.array(timelineEventSchema),
});

/**
 * Share of all ranks busy over time in one phase (every rank, not only those drawn): bin i covers
 * [i, i+1) x binMs; `compute` and `comm` are the mean fraction of ranks computing or communicating.
 */
const busySchema = z.object({
  strategy: z.string(),
  phase: phaseName,
  world: int,
  binMs: num,
  compute: z.array(num),
  comm: z.array(num),
});

/** Per-rank memory of one strategy's plan, in tokens (K/V received counted once per reception). */
const memorySchema = z.object({
  strategy: z.string(),
  world: int,
  /** The problem's memory budget per rank. */
  limitTokens: num,
  /** Tokens each rank holds in the home layout. */
  home: z.array(num),
  /** Home tokens plus the most K/V tokens held at once from receptions (larger phase). */
  peak: z.array(num),
});

/** One step of the FCP ablation (the paper's Table 2), simulated at `world` ranks. */
const ablationSchema = z.object({
  world: int,
  steps: z.array(
    z.object({
      /** Stable key of the step, e.g. `base`, `pipeline`, `rounds`, `coalesce`, `reshuffle`. */
      step: z.string(),
      label: z.string(),
      mfuForward: num,
      mfuBackward: num,
    }),
  ),
});

/** Tokens of one placement row (a sequence or a bucket of short sequences) on one rank. */
const placementSchema = z.object({
  strategy: z.string(),
  world: int,
  rows: z.array(z.object({ label: z.string(), sequences: int, tokens: int })),
  cells: z.array(z.object({ rank: int, row: int, tokens: int })),
});

/** Messages sent and received by one rank in one round (only non-zero cells). */
const roundsSchema = z.object({
  strategy: z.string(),
  phase: phaseName,
  world: int,
  rounds: int,
  cells: z.array(z.object({ round: int, rank: int, sends: int, receives: int })),
});

/** The CPU runtime's numerical check of one strategy's plan on a small batch. */
const numericsSchema = z.object({
  strategy: z.string(),
  world: int,
  tokensPerRank: int,
  sequences: int,
  valid: z.boolean(),
  /** Relative error ||a - b|| / ||b|| against the float64 reference attention, per output. */
  relError: z.object({ o: num, dq: num, dk: num, dv: num }),
  tolerance: num,
  ok: z.boolean(),
  error: z.string().optional(),
});

/** The whole results file. */
export const resultsSchema = z.object({
  format: z.literal(RESULTS_FORMAT),
  provenance: provenanceSchema,
  problem: problemSchema,
  strategies: z.array(z.string()),
  runs: z.array(strategyRunSchema),
  scaling: z.array(
    z.object({
      strategy: z.string(),
      world: int,
      mfuForward: num,
      mfuBackward: num,
      valid: z.boolean(),
      config: z.string().optional(),
    }),
  ),
  timelines: z.array(timelineSchema),
  /** Share of ranks busy over time, per strategy and phase (absent in older files). */
  busy: z.array(busySchema).optional(),
  /** Per-rank memory per strategy (absent in older files). */
  memory: z.array(memorySchema).optional(),
  /** FCP's ablation steps (absent when not run). */
  ablation: ablationSchema.nullable().optional(),
  /**
   * What made the file: `demo` (every section) or `compare` (converted from `fcp compare`'s
   * compare.json: means over batches, no validation, numerics or plan details). Absent: demo.
   */
  origin: z.enum(['demo', 'compare']).optional(),
  placement: placementSchema.nullable(),
  rounds: z.array(roundsSchema),
  numerics: z.object({
    world: int,
    tokensPerRank: int,
    model: z.object({ qHeads: int, kvHeads: int, headDim: int, bytesPerElement: int }),
    runs: z.array(numericsSchema),
    /** Why the check did not run (e.g. `--no-numerics`); absent when it ran. */
    skipped: z.string().optional(),
  }),
  /** Things the report could not show, one sentence each (e.g. a missing executor). */
  notes: z.array(z.string()),
});

export type Results = z.infer<typeof resultsSchema>;
export type Provenance = Results['provenance'];
export type ProblemSummary = Results['problem'];
export type StrategyRun = Results['runs'][number];
export type ScalingPoint = Results['scaling'][number];
export type Timeline = Results['timelines'][number];
export type TimelineEvent = Timeline['events'][number];
export type BusyProfile = NonNullable<Results['busy']>[number];
export type RankMemory = NonNullable<Results['memory']>[number];
export type Ablation = NonNullable<Results['ablation']>;
export type Placement = NonNullable<Results['placement']>;
export type RoundStructure = Results['rounds'][number];
export type NumericsRun = Results['numerics']['runs'][number];

/**
 * JSON text with nested structure indented but every flat value (a primitive, an array of
 * primitives, an object of primitives) on one line: readable, and a third the size of fully
 * indented JSON for the long cell lists.
 */
export function compactJson(value: unknown, indent = ''): string {
  const flat = (v: unknown): boolean => v === null || typeof v !== 'object';
  if (flat(value)) return JSON.stringify(value);
  const inner = `${indent} `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    if (value.every(flat)) return JSON.stringify(value);
    return `[\n${value.map((v) => inner + compactJson(v, inner)).join(',\n')}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return '{}';
  if (entries.every(([, v]) => flat(v))) return JSON.stringify(value);
  return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${compactJson(v, inner)}`).join(',\n')}\n${indent}}`;
}

/** Serialises results; deterministic (same results, same bytes), newline-terminated. */
export function resultsToJson(r: Results): string {
  return `${compactJson(r)}\n`;
}

/** Checks parsed JSON against the schema; FcpError `results.format` / `results.schema` otherwise. */
export function resultsFromJson(json: unknown, path = 'results.json'): Results {
  const fmt = (json as { format?: unknown } | null)?.format;
  if (fmt !== RESULTS_FORMAT)
    fail(
      'results.format',
      `${path} is not an fcp results file (format ${JSON.stringify(fmt)}, expected "${RESULTS_FORMAT}"); produce one with \`fcp demo\``,
      path,
    );
  const parsed = resultsSchema.safeParse(json);
  if (!parsed.success)
    throw new FcpError(
      parsed.error.issues
        .slice(0, 5)
        .map((i) => issue('results.schema', `${i.path.join('.') || '(root)'}: ${i.message}`, path)),
    );
  return parsed.data;
}

/** Reads and validates a results file; FcpError `io.read`, `results.json` or the codes above. */
export function readResults(path: string): Results {
  const text = readInputFile(path, 'results', 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    fail('results.json', `${path} is not valid JSON (${(e as Error).message})`, path);
  }
  return resultsFromJson(json, path);
}

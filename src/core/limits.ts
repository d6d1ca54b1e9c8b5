/**
 * Upper bounds on every size a user can ask for. Without them a typo (`--block-size 1`, a length of
 * 1e9, `--world 1000000`) turns into minutes of work or an out-of-memory crash instead of an error.
 * Each bound is checked up front, where the value enters (options, batch files, serve requests,
 * plan files), and the error says which limit was hit and why it exists. docs/cli.md lists them.
 *
 * The bounds are deliberately far above anything the planners, the simulator or the runtimes have
 * been measured on (4096 ranks, 512K-token sequences), so no real use meets them.
 */
import { type FcpIssue, issue } from './issues.ts';

/** One documented limit. */
export interface Limit {
  readonly max: number;
  /** Why the limit exists (shown in the error message and in docs/cli.md). */
  readonly why: string;
}

/** Every limit, by name. */
export const LIMITS = {
  world: {
    max: 16384,
    why: 'planning and simulation grow faster than linearly with ranks (4096 ranks take seconds); 4x the largest cluster measured',
  },
  tokensPerRank: {
    max: 4194304,
    why: 'per-rank tensors are indexed with 32-bit integers; 4M tokens is 8x the longest measured sequence',
  },
  sequenceLength: {
    max: 4194304,
    why: 'the attention work of one sequence grows with its length squared; 8x the longest measured sequence (512K)',
  },
  totalTokens: {
    max: 268435456,
    why: 'token offsets of a plan are 32-bit integers; 2^28 leaves room for padding and sums',
  },
  sequences: {
    max: 4194304,
    why: 'every sequence costs rows in every table of a plan',
  },
  blocksPerSequence: {
    max: 4096,
    why: 'tasks of one sequence grow with the square of its blocks (or tiles, or chunks); raise --block-size, --tile, --min-tile or --chunk-size',
  },
  blocks: {
    max: 4194304,
    why: 'planning work and plan size grow with the number of blocks (or chunks) in the batch; raise --block-size or --chunk-size',
  },
  heads: {
    max: 1024,
    why: 'no attention layer has more heads; larger values are typos that multiply every tensor',
  },
  headDim: {
    max: 1024,
    why: 'no attention layer has a larger head dimension; larger values are typos that multiply every tensor',
  },
  bytesPerElement: {
    max: 8,
    why: 'elements are at most 64-bit floats',
  },
  gpusPerNode: {
    max: 1024,
    why: 'no node holds more GPUs',
  },
  parts: {
    max: 1048576,
    why: 'a chunk row of a plan expands into one range per part',
  },
  rounds: {
    max: 16777216,
    why: 'every round of a plan is a step of the executors; more rounds than this is a broken file',
  },
  pieceSize: {
    max: 268435456,
    why: 'a block, tile or chunk longer than the most tokens a batch may hold (totalTokens) cuts nothing; such a value is a typo',
  },
  steps: {
    max: 1048576,
    why: 'refinement and exchange loops stop once no step helps; more steps than this is a typo',
  },
} as const satisfies Record<string, Limit>;

/** The name of a limit of {@link LIMITS}. */
export type LimitName = keyof typeof LIMITS;

/** The issue for `value` above limit `name` (code `limit.<name>`), or undefined when it fits. */
export function limitIssue(
  name: LimitName,
  value: number,
  what: string,
  path?: string,
): FcpIssue | undefined {
  const l = LIMITS[name];
  if (value <= l.max) return undefined;
  return issue(`limit.${name}`, `${what} is ${value}, above the limit of ${l.max} (${l.why})`, path);
}

/** Ceiling of `a / b` for positive `b`, as a number (no overflow for the sizes above). */
const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);

/**
 * Checks that planning `sequences` with the given granularity stays bounded: no sequence is cut into
 * more than `blocksPerSequence` pieces of `piece` tokens, and the batch into no more than `blocks`.
 * `option` names the user option that sets the piece size (for the message). Pieces <= 0 are the
 * planners' own errors and are skipped here.
 */
export function granularityIssues(
  sequences: ArrayLike<number>,
  piece: number,
  option: string,
  path: string,
): FcpIssue[] {
  if (!(piece >= 1) || !Number.isFinite(piece)) return [];
  let longest = 0;
  let pieces = 0;
  for (let i = 0; i < sequences.length; i++) {
    const n = ceilDiv(sequences[i]!, piece);
    pieces += n;
    if (n > longest) longest = n;
  }
  const out: FcpIssue[] = [];
  const check = (name: 'blocksPerSequence' | 'blocks', n: number, what: string): void => {
    const l = LIMITS[name];
    if (n > l.max)
      out.push(
        issue(
          `limit.${name}`,
          `--${option} ${piece} cuts ${what} into ${n} pieces, above the limit of ${l.max} (${l.why})`,
          path,
        ),
      );
  };
  check('blocksPerSequence', longest, 'the longest sequence');
  check('blocks', pieces, 'the batch');
  return out;
}

/**
 * Planner options that are token counts: the strategy that reads each, its flag (null where the
 * command line has none; the options key is named then) and whether it sets the size of the pieces
 * a batch is cut into (`cuts`: the granularity limits apply). Every one is bounded above by
 * `pieceSize`, so that a typo such as `tile: 1e300` is an error instead of a plan made with it.
 */
const TOKEN_OPTIONS = [
  { key: 'blockSize', strategy: 'fcp', flag: 'block-size', cuts: true },
  { key: 'minBlockSize', strategy: 'fcp', flag: null, cuts: false },
  { key: 'tile', strategy: 'fcp', flag: 'tile', cuts: true },
  { key: 'minTile', strategy: 'fcp', flag: 'min-tile', cuts: true },
  { key: 'chunkSize', strategy: 'magi', flag: 'chunk-size', cuts: true },
  { key: 'a2aSplitTokens', strategy: 'ring', flag: null, cuts: false },
] as const;

/**
 * The size issues of a set of planner options for `sequences`: token counts above `pieceSize`,
 * else the granularity issues of the piece sizes (see {@link granularityIssues}). `strategy`
 * limits the checks to the options the strategy reads (TOKEN_OPTIONS).
 */
export function plannerLimitIssues(
  strategy: string,
  sequences: ArrayLike<number>,
  options: Readonly<Record<string, unknown>>,
): FcpIssue[] {
  const mine = TOKEN_OPTIONS.filter((t) => t.strategy === strategy && typeof options[t.key] === 'number');
  const out: FcpIssue[] = [];
  for (const { key, flag } of mine) {
    const big = limitIssue('pieceSize', options[key] as number, flag === null ? key : `--${flag}`, key);
    if (big !== undefined) out.push(big);
  }
  if (out.length > 0) return out;
  for (const { key, flag, cuts } of mine)
    if (cuts) out.push(...granularityIssues(sequences, options[key] as number, flag, key));
  return out;
}

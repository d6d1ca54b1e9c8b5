/**
 * The planning problem: a batch, a cluster and a model, validated up front with defaults filled in
 * one place. Every planner receives a {@link Problem}.
 */
import { existsSync } from 'node:fs';
import { GENERATOR_NAMES, generateBatch } from '../batch/generators.ts';
import { readBatchFile } from '../batch/read.ts';
import { FcpError, type FcpIssue, issue } from '../core/issues.ts';
import { limitIssue } from '../core/limits.ts';
import { LLAMA3_70B } from '../model/attention.ts';
import { evenUserLayout, totalTokens } from '../plan/layout.ts';
import type { Layout, Mask, ModelShape } from '../plan/types.ts';
import { type ClusterSpec, resolveCluster } from './cluster.ts';

/** A validated planning problem. */
export interface Problem {
  /** Sequence lengths; id = index. */
  readonly sequences: Int32Array;
  readonly world: number;
  readonly mask: Mask;
  readonly model: ModelShape;
  /** Per-rank token budget C (generated batches: exactly; files: ceil(total / world)). */
  readonly tokensPerRank: number;
  /** Memory capacity per rank, in tokens. */
  readonly memoryTokens: number;
  readonly gpusPerNode: number;
  /**
   * The cluster the plan is for (its links, latencies and GPU): planners that model time (FCP's
   * push placement, wlb's choice) read it, so a plan is made for the network it will run on.
   * Its `gpusPerNode` equals the problem's (switch topology).
   */
  readonly cluster: ClusterSpec;
  readonly seed: number;
  /** Where tokens start: the packed batch split evenly across ranks. */
  readonly userLayout: Layout;
  /** Name of the generator or path of the file the batch came from. */
  readonly batchName: string;
}

/** Options of {@link resolveProblem}; all optional except where noted. */
export interface ProblemOptions {
  /** Generator name, an existing file path, or explicit lengths. Default `longtail`. */
  batch?: string | ArrayLike<number>;
  /** Number of ranks (GPUs). Default 8. */
  world?: number;
  /** Tokens per rank for generated batches. Default 32768. */
  tokensPerRank?: number;
  seed?: number;
  mask?: string;
  qHeads?: number;
  kvHeads?: number;
  headDim?: number;
  bytesPerElement?: number;
  /** Base model shape the four fields above override. Default Llama-3-70B attention. */
  model?: ModelShape;
  gpusPerNode?: number;
  /** Cluster preset name or a resolved spec. Default `hopper-ib`. */
  cluster?: string | ClusterSpec;
  /** Memory capacity per rank in tokens. Default 1.5x the per-rank token budget. */
  memoryTokens?: number;
}

/** Defaults of {@link ProblemOptions}. */
export const PROBLEM_DEFAULTS = {
  batch: 'longtail',
  world: 8,
  tokensPerRank: 32768,
  seed: 1,
  mask: 'causal',
  gpusPerNode: 8,
  cluster: 'hopper-ib',
} as const;

const positiveInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1;

/** Validates options and builds the problem; throws FcpError listing every problem found. */
export function resolveProblem(o: ProblemOptions = {}): Problem {
  const issues: FcpIssue[] = [];
  const world = o.world ?? PROBLEM_DEFAULTS.world;
  const tpr = o.tokensPerRank ?? PROBLEM_DEFAULTS.tokensPerRank;
  const seed = o.seed ?? PROBLEM_DEFAULTS.seed;
  const mask = o.mask ?? PROBLEM_DEFAULTS.mask;
  const given = typeof o.cluster === 'object' && o.cluster.topology === 'switch' ? o.cluster : undefined;
  const gpusPerNode = o.gpusPerNode ?? given?.gpusPerNode ?? PROBLEM_DEFAULTS.gpusPerNode;
  const base = o.model ?? LLAMA3_70B;
  const model: ModelShape = {
    qHeads: o.qHeads ?? base.qHeads,
    kvHeads: o.kvHeads ?? base.kvHeads,
    headDim: o.headDim ?? base.headDim,
    bytesPerElement: o.bytesPerElement ?? base.bytesPerElement,
  };
  if (!positiveInt(world))
    issues.push(issue('option.world', `world size must be a positive integer (got ${world})`, 'world'));
  else {
    const l = limitIssue('world', world, 'the world size', 'world');
    if (l) issues.push(l);
  }
  if (positiveInt(tpr)) {
    const l = limitIssue('tokensPerRank', tpr, 'tokens per rank', 'tokensPerRank');
    if (l) issues.push(l);
  }
  if (positiveInt(gpusPerNode)) {
    const l = limitIssue('gpusPerNode', gpusPerNode, 'GPUs per node', 'gpusPerNode');
    if (l) issues.push(l);
  }
  for (const [k, name] of [
    ['qHeads', 'heads'],
    ['kvHeads', 'heads'],
    ['headDim', 'headDim'],
    ['bytesPerElement', 'bytesPerElement'],
  ] as const)
    if (positiveInt(model[k])) {
      const l = limitIssue(name, model[k], k, k);
      if (l) issues.push(l);
    }
  if (!positiveInt(tpr))
    issues.push(
      issue(
        'option.tokensPerRank',
        `tokens per rank must be a positive integer (got ${tpr})`,
        'tokensPerRank',
      ),
    );
  if (!Number.isInteger(seed) || seed < 0)
    issues.push(issue('option.seed', `seed must be a non-negative integer (got ${seed})`, 'seed'));
  if (mask !== 'causal' && mask !== 'full')
    issues.push(issue('option.mask', `mask must be causal or full (got ${mask})`, 'mask'));
  if (!positiveInt(gpusPerNode))
    issues.push(
      issue(
        'option.gpusPerNode',
        `GPUs per node must be a positive integer (got ${gpusPerNode})`,
        'gpusPerNode',
      ),
    );
  for (const k of ['qHeads', 'kvHeads', 'headDim', 'bytesPerElement'] as const)
    if (!positiveInt(model[k]))
      issues.push(issue(`option.${k}`, `${k} must be a positive integer (got ${model[k]})`, k));
  if (positiveInt(model.qHeads) && positiveInt(model.kvHeads) && model.qHeads % model.kvHeads !== 0)
    issues.push(
      issue(
        'option.heads',
        `query heads (${model.qHeads}) must be a multiple of KV heads (${model.kvHeads})`,
        'qHeads',
      ),
    );
  if (o.memoryTokens !== undefined && !positiveInt(o.memoryTokens))
    issues.push(
      issue(
        'option.memoryTokens',
        `memory per rank must be a positive integer of tokens (got ${o.memoryTokens})`,
        'memoryTokens',
      ),
    );
  if (issues.length > 0) throw new FcpError(issues);
  const base0 =
    typeof o.cluster === 'object' ? o.cluster : resolveCluster(o.cluster ?? PROBLEM_DEFAULTS.cluster);
  // The problem's GPUs per node is the one truth for the switch topology; a torus has no nodes.
  const cluster: ClusterSpec = base0.topology === 'torus' ? base0 : { ...base0, gpusPerNode };

  const spec = o.batch ?? PROBLEM_DEFAULTS.batch;
  let sequences: Int32Array;
  let batchName: string;
  if (typeof spec !== 'string') {
    batchName = 'explicit';
    // Checked before the conversion: Int32Array.from would wrap 4294967301 to 5 silently.
    for (let i = 0; i < spec.length; i++) {
      const v = spec[i]!;
      if (!Number.isInteger(v) || v <= 0)
        throw new FcpError(
          issue(
            'batch.length.nonPositive',
            `sequence ${i} has length ${v}; lengths must be positive integers`,
            'batch',
            i,
          ),
        );
      const l = limitIssue('sequenceLength', v, `sequence ${i}'s length`, 'batch');
      if (l) throw new FcpError({ ...l, row: i });
    }
    sequences = Int32Array.from(spec as ArrayLike<number>);
    if (sequences.length === 0)
      throw new FcpError(issue('batch.empty', 'the batch holds no sequences', 'batch'));
  } else if (GENERATOR_NAMES.includes(spec)) {
    // A generated batch holds world x tokens-per-rank tokens: bound it before drawing them.
    const l = limitIssue(
      'totalTokens',
      world * tpr,
      `--world ${world} x --tokens-per-rank ${tpr}`,
      'tokensPerRank',
    );
    if (l) throw new FcpError(l);
    sequences = generateBatch(spec, world, tpr, seed);
    batchName = spec;
  } else if (existsSync(spec)) {
    sequences = readBatchFile(spec);
    batchName = spec;
  } else {
    throw new FcpError(
      issue(
        'batch.unknown',
        `--batch ${spec} is neither a generator (${GENERATOR_NAMES.join(', ')}) nor an existing file`,
        'batch',
      ),
    );
  }
  const total = totalTokens(sequences);
  // Lengths beyond the limits are refused before any planner sizes an array by them.
  let longest = 0;
  for (let i = 0; i < sequences.length; i++) if (sequences[i]! > longest) longest = sequences[i]!;
  const sizeIssues = [
    limitIssue('sequences', sequences.length, 'the number of sequences', 'batch'),
    limitIssue('sequenceLength', longest, 'the longest sequence', 'batch'),
    limitIssue('totalTokens', total, 'the number of tokens in the batch', 'batch'),
  ].filter((x) => x !== undefined);
  if (sizeIssues.length > 0) throw new FcpError(sizeIssues);
  const budget = typeof spec === 'string' && GENERATOR_NAMES.includes(spec) ? tpr : Math.ceil(total / world);
  const memoryTokens = o.memoryTokens ?? Math.ceil(1.5 * Math.max(budget, o.tokensPerRank ?? 0));
  if (total > memoryTokens * world)
    throw new FcpError(
      issue(
        'capacity.exceeded',
        `the batch holds ${total} tokens but ${world} ranks x ${memoryTokens} tokens of memory hold only ${memoryTokens * world}; add ranks or raise --memory-tokens`,
        'batch',
      ),
    );
  return {
    sequences,
    world,
    mask: mask as Mask,
    model,
    tokensPerRank: budget,
    memoryTokens,
    gpusPerNode,
    cluster,
    seed,
    userLayout: evenUserLayout(sequences, world),
    batchName,
  };
}

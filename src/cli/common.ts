/**
 * Options shared by commands that plan a batch (`plan`, `verify`, `compare-plans`, `compare`,
 * `demo`): one declaration, one parser, so every command spells them the same way.
 */
import type { Command } from 'commander';
import { fail } from '../core/issues.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { CLUSTER_NAMES } from '../problem/cluster.ts';
import { type Problem, type ProblemOptions, resolveProblem } from '../problem/problem.ts';

/** Adds the batch, cluster and model options. */
export function addProblemOptions(
  cmd: Command,
  defaults: { world?: string; tokensPerRank?: string } = {},
): Command {
  return cmd
    .option(
      '--batch <name|path>',
      'generator (longtail, magi, bimodal, weak-longtail, uniform, fixed) or a batch file',
      'longtail',
    )
    .option('--world <n>', 'number of ranks (GPUs)', defaults.world ?? '8')
    .option(
      '--tokens-per-rank <n>',
      'tokens per rank of a generated batch',
      defaults.tokensPerRank ?? '32768',
    )
    .option('--seed <n>', 'random seed', '1')
    .option('--mask <mask>', 'causal or full', 'causal')
    .option('--q-heads <n>', 'query heads (default 64)')
    .option('--kv-heads <n>', 'key/value heads (default 8)')
    .option('--head-dim <n>', 'head dimension (default 128)')
    .option('--gpus-per-node <n>', 'GPUs per node', '8')
    .option(
      '--cluster <preset>',
      `cluster the plan is for; planners that model time plan for its links (${CLUSTER_NAMES.join(', ')})`,
      'hopper-ib',
    )
    .option('--memory-tokens <n>', 'memory capacity per rank in tokens (default 1.5x tokens per rank)');
}

/** Adds the planner options (FCP's and the baselines'). */
export function addPlannerOptions(cmd: Command): Command {
  return cmd
    .option('--block-size <n>', 'fcp: tokens per block', '4096')
    .option('--tolerance <x>', 'fcp: load tolerance of the locality tie-break (fraction)', '0.01')
    .option('--coalesce <n>', 'fcp: rounds merged into one group (one compute launch per rank)', '16')
    .option(
      '--comm-coalesce <n>',
      "fcp: rounds sharing one concurrent transfer call; a group's calls run one after another (1: congestion-free on the wire)",
      '16',
    )
    .option('--no-pipeline', 'fcp ablation: all fetches before any compute')
    .option('--rounds <mode>', 'fcp ablation: matching (congestion-free) or naive', 'matching')
    .option('--no-reshuffle-overlap', 'fcp ablation: no compute while the reshuffle is in flight')
    .option('--no-locality', 'fcp ablation: no locality-aware tie-break')
    .option('--fixed-blocks', 'fcp: fixed-size blocks only, no granularity refinement')
    .option('--tile <n>', 'fcp: square tile side for dense kernels (0: no tiling; default 4096)')
    .option('--min-tile <n>', 'fcp: smallest tile side for remainder strips (default 1024)')
    .option(
      '--loader-layout',
      'fcp: mode (b), the loader delivers a home layout with equal tokens per rank (within 1% of the mean) once per step; no reshuffle',
    )
    .option('--balance <mode>', 'fcp: balance modelled kernel time (time, default) or attended pairs (pairs)')
    .option('--chunk-size <n>', 'magi: chunk size in tokens (default total/(8N))')
    .option('--overlap-degree <n>', 'magi: overlap stages', '2');
}

/** Parses an integer option; FcpError `option.<name>` when it is not one. */
export function intOption(value: unknown, name: string): number {
  const s = String(value).trim();
  const n = /^[-+]?\d+$/.test(s) ? Number(s) : Number.NaN;
  if (!Number.isSafeInteger(n))
    fail(`option.${name}`, `--${kebab(name)} must be an integer (got ${JSON.stringify(value)})`, name);
  return n;
}

/** Parses a number option. */
export function numberOption(value: unknown, name: string): number {
  const n = Number(value);
  if (!Number.isFinite(n))
    fail(`option.${name}`, `--${kebab(name)} must be a number (got ${JSON.stringify(value)})`, name);
  return n;
}

/** Parses a comma-separated list of integers (e.g. `--world 16,64,256`). */
export function intListOption(value: unknown, name: string): number[] {
  return String(value)
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((s) => intOption(s, name));
}

const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Commander's parsed values of {@link addProblemOptions} -> {@link ProblemOptions}. */
export function problemOptionsFrom(
  o: Record<string, unknown>,
  overrides: Partial<ProblemOptions> = {},
): ProblemOptions {
  const out: ProblemOptions = {
    batch: String(o.batch ?? 'longtail'),
    world: intOption(o.world ?? 8, 'world'),
    tokensPerRank: intOption(o.tokensPerRank ?? 32768, 'tokensPerRank'),
    seed: intOption(o.seed ?? 1, 'seed'),
    mask: String(o.mask ?? 'causal'),
    gpusPerNode: intOption(o.gpusPerNode ?? 8, 'gpusPerNode'),
    cluster: String(o.cluster ?? 'hopper-ib'),
  };
  if (o.qHeads !== undefined) out.qHeads = intOption(o.qHeads, 'qHeads');
  if (o.kvHeads !== undefined) out.kvHeads = intOption(o.kvHeads, 'kvHeads');
  if (o.headDim !== undefined) out.headDim = intOption(o.headDim, 'headDim');
  if (o.memoryTokens !== undefined) out.memoryTokens = intOption(o.memoryTokens, 'memoryTokens');
  return { ...out, ...overrides };
}

/** Parses and resolves the problem options in one step. */
export function problemFrom(o: Record<string, unknown>, overrides: Partial<ProblemOptions> = {}): Problem {
  return resolveProblem(problemOptionsFrom(o, overrides));
}

/** Commander's parsed values of {@link addPlannerOptions} -> {@link PlannerOptions}. */
export function plannerOptionsFrom(o: Record<string, unknown>): PlannerOptions {
  const out: PlannerOptions = {};
  if (o.blockSize !== undefined) out.blockSize = intOption(o.blockSize, 'blockSize');
  if (o.tolerance !== undefined) out.tolerance = numberOption(o.tolerance, 'tolerance');
  if (o.coalesce !== undefined) out.coalesce = intOption(o.coalesce, 'coalesce');
  if (o.commCoalesce !== undefined) out.commCoalesce = intOption(o.commCoalesce, 'commCoalesce');
  if (o.pipeline === false) out.noPipeline = true;
  if (o.rounds !== undefined) {
    if (o.rounds !== 'matching' && o.rounds !== 'naive')
      fail('option.rounds', `--rounds must be matching or naive (got ${String(o.rounds)})`, 'rounds');
    out.rounds = o.rounds;
  }
  if (o.reshuffleOverlap === false) out.noReshuffleOverlap = true;
  if (o.locality === false) out.noLocality = true;
  if (o.fixedBlocks === true) out.fixedBlocks = true;
  if (o.tile !== undefined) out.tile = intOption(o.tile, 'tile');
  if (o.minTile !== undefined) out.minTile = intOption(o.minTile, 'minTile');
  if (o.loaderLayout === true) out.loaderLayout = true;
  if (o.balance !== undefined) {
    if (o.balance !== 'time' && o.balance !== 'pairs')
      fail('option.balance', `--balance must be time or pairs (got ${String(o.balance)})`, 'balance');
    out.balance = o.balance;
  }
  if (o.chunkSize !== undefined) out.chunkSize = intOption(o.chunkSize, 'chunkSize');
  if (o.overlapDegree !== undefined) out.overlapDegree = intOption(o.overlapDegree, 'overlapDegree');
  return out;
}

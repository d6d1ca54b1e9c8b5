/**
 * Options of the demo pipeline (demo.ts): declared once with their defaults, validated up front
 * by {@link resolveDemoOptions} so that bad input fails in milliseconds, before any planning; and
 * FCP's ablation steps, which the demo runs and counts as progress steps.
 */
import { GENERATOR_NAMES } from '../batch/generators.ts';
import { fail } from '../core/issues.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { type ProblemOptions, resolveProblem } from '../problem/problem.ts';
import { clusterNames } from './checks.ts';
import { getPlanner, plannerNames } from './strategies.ts';

/** Options of {@link runDemo}; see {@link DEMO_DEFAULTS}. */
export interface DemoOptions {
  /** Batch, world, tokens per rank, seed, mask, model of the main run. */
  problem?: ProblemOptions;
  /** Strategies to compare (default: every registered planner). */
  strategies?: string[];
  /** Cluster preset of the simulator (default `hopper-ib`). */
  cluster?: string;
  /** World sizes of the weak-scaling sweep (default: world/4, world/2, world; [] for none). */
  scaling?: number[];
  /** Scaled-down batch of the CPU numerical check; null to skip it. */
  numerics?: { world?: number; tokensPerRank?: number } | null;
  /** Strategies whose timelines (forward and backward) are drawn (default: every strategy). */
  timeline?: string[];
  /** Most ranks drawn in a timeline (default 24; a larger world is sampled, see sampleRanks). */
  timelineRanks?: number;
  /** Run FCP's ablation (the paper's Table 2) at the main world (default: when fcp is compared). */
  ablation?: boolean;
  /** Strategy whose placement and round structure are drawn (default fcp). */
  focus?: string;
}

/** Defaults of {@link DemoOptions}. */
export const DEMO_DEFAULTS = {
  world: 64,
  tokensPerRank: 32768,
  batch: 'longtail',
  cluster: 'hopper-ib',
  numericsWorld: 8,
  numericsTokensPerRank: 512,
  timelineRanks: 24,
  focus: 'fcp',
} as const;

/** {@link DemoOptions} with every default filled in and checked. */
export interface ResolvedDemoOptions {
  problem: ProblemOptions;
  strategies: string[];
  cluster: string;
  scaling: number[];
  numerics: { world: number; tokensPerRank: number } | null;
  timeline: string[];
  timelineRanks: number;
  ablation: boolean;
  focus: string;
}

/** Fills defaults and validates everything that can be checked without planning. */
export function resolveDemoOptions(o: DemoOptions = {}): ResolvedDemoOptions {
  const problem: ProblemOptions = {
    batch: DEMO_DEFAULTS.batch,
    world: DEMO_DEFAULTS.world,
    tokensPerRank: DEMO_DEFAULTS.tokensPerRank,
    ...o.problem,
  };
  resolveProblem(problem); // FcpError for a bad world, batch, seed, mask or model, before any work
  const world = problem.world!;
  const strategies = o.strategies ?? plannerNames();
  if (strategies.length === 0) fail('option.strategies', '--strategies names no strategy', 'strategies');
  for (const s of strategies) getPlanner(s); // FcpError strategy.unknown
  if (new Set(strategies).size !== strategies.length)
    fail('option.strategies', `--strategies names a strategy twice (${strategies.join(',')})`, 'strategies');
  const cluster = o.cluster ?? DEMO_DEFAULTS.cluster;
  const clusters = clusterNames();
  if (!clusters.includes(cluster))
    fail(
      'cluster.unknown',
      `unknown cluster ${JSON.stringify(cluster)}; choose one of ${clusters.join(', ')}`,
      'cluster',
    );
  const positive = (n: number): boolean => Number.isInteger(n) && n >= 1;
  const generated = typeof problem.batch === 'string' && GENERATOR_NAMES.includes(problem.batch);
  if (o.scaling && o.scaling.length > 0 && !generated)
    fail(
      'option.scaling',
      'weak scaling needs a generated batch (--batch GENERATOR), not a batch file',
      'scaling',
    );
  // world is a valid positive integer here (resolveProblem above).
  const defaultSweep = world >= 4 ? [Math.floor(world / 4), Math.floor(world / 2), world] : [world];
  const scaling = [...new Set(o.scaling ?? (generated ? defaultSweep : []))].sort((a, b) => a - b);
  for (const w of scaling)
    if (!positive(w))
      fail('option.scaling', `--scaling worlds must be positive integers (got ${w})`, 'scaling');
  let numerics: ResolvedDemoOptions['numerics'] = null;
  if (o.numerics !== null) {
    numerics = {
      world: o.numerics?.world ?? DEMO_DEFAULTS.numericsWorld,
      tokensPerRank: o.numerics?.tokensPerRank ?? DEMO_DEFAULTS.numericsTokensPerRank,
    };
    if (!positive(numerics.world))
      fail(
        'option.numericsWorld',
        `--numerics-world must be a positive integer (got ${numerics.world})`,
        'numericsWorld',
      );
    if (!positive(numerics.tokensPerRank))
      fail(
        'option.numericsTokens',
        `--numerics-tokens must be a positive integer (got ${numerics.tokensPerRank})`,
        'numericsTokens',
      );
  }
  const timelineRanks = o.timelineRanks ?? DEMO_DEFAULTS.timelineRanks;
  if (!positive(timelineRanks))
    fail('option.timelineRanks', 'timeline ranks must be a positive integer', 'timelineRanks');
  const timeline = (o.timeline ?? strategies).filter((s) => strategies.includes(s));
  const focus = o.focus ?? DEMO_DEFAULTS.focus;
  const ablation = (o.ablation ?? true) && strategies.includes('fcp');
  return { problem, strategies, cluster, scaling, numerics, timeline, timelineRanks, ablation, focus };
}

/** Number of progress steps {@link runDemo} reports for these options. */
export function demoSteps(o: ResolvedDemoOptions): number {
  const sweep = o.scaling.filter((w) => w !== o.problem.world).length;
  return o.strategies.length * (1 + sweep + (o.numerics ? 1 : 0)) + (o.ablation ? ABLATION.length : 0);
}

/**
 * FCP's ablation, the steps of the paper's Table 2 (Zhao et al., MLSys 2026), each adding one
 * technique to the previous: the same flags as docs/results/run-all.sh's `ablation-*` folders.
 */
export const ABLATION: readonly { step: string; label: string; options: PlannerOptions }[] = [
  {
    step: 'base',
    label: 'no pipeline',
    options: { noPipeline: true, rounds: 'naive', coalesce: 1, noReshuffleOverlap: true },
  },
  {
    step: 'pipeline',
    label: '+ block pipeline',
    options: { rounds: 'naive', coalesce: 1, noReshuffleOverlap: true },
  },
  { step: 'rounds', label: '+ congestion-free rounds', options: { coalesce: 1, noReshuffleOverlap: true } },
  { step: 'coalesce', label: '+ coalescing', options: { noReshuffleOverlap: true } },
  { step: 'reshuffle', label: '+ reshuffle overlap', options: {} },
];

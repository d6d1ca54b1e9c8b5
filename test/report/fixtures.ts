/**
 * Small hand-made results for the report's unit tests (shapes only: the numbers are arbitrary and
 * never presented as measurements).
 */
import { resolveProblem } from '../../src/problem/problem.ts';
import { placementOf, roundsOf } from '../../src/report/extract.ts';
import { RESULTS_FORMAT, type Results, type StrategyRun } from '../../src/report/results.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

/** A run row with the given MFUs; other numbers derived from `i`. */
export function run(strategy: string, i: number, world = 8): StrategyRun {
  return {
    strategy,
    world,
    valid: true,
    issueCodes: [],
    issueCount: 0,
    mfuForward: 0.5 - 0.05 * i,
    mfuBackward: 0.45 - 0.04 * i,
    forwardMs: 10 + i,
    backwardMs: 20 + i,
    computeImbalance: 0.01 + 0.1 * i,
    commImbalance: 0.02 + 0.05 * i,
    bytes: [
      { phase: 'forward', kind: 'in', bytes: 1e9 },
      { phase: 'forward', kind: 'kv', bytes: 2e9 * (i + 1) },
      { phase: 'backward', kind: 'dkv', bytes: 1e9 * (i + 1) },
      { phase: 'backward', kind: 'out', bytes: 0 },
    ],
    totalBytes: 1e9 + 3e9 * (i + 1),
    rounds: { forward: 3 + i, backward: 6 + i },
    groups: { forward: 1, backward: 2 },
    congestion: { forward: 1 + i, backward: 1 + i },
  };
}

/** Complete results over a fixture plan at 8 ranks, for two strategies. */
export function smallResults(): Results {
  const problem = resolveProblem({ world: 8, tokensPerRank: 1024, seed: 5 });
  const plan = simplePlan(problem);
  const strategies = ['fcp', 'ring'];
  const timeline = (strategy: string, phase: 'forward' | 'backward') => ({
    strategy,
    phase,
    world: 8,
    makespanMs: 4,
    ranks: 8,
    events: Array.from({ length: 8 }, (_, r) => [
      { rank: r, lane: 0 as const, start: 0, end: 2 + r / 4, kind: 'compute' },
      { rank: r, lane: 1 as const, start: 0.5, end: 1.5, kind: 'kv' },
    ]).flat(),
  });
  return {
    format: RESULTS_FORMAT,
    provenance: {
      command: 'fcp demo --world 8',
      fcpVersion: '0.1.0',
      node: 'v20',
      gitCommit: null,
      platform: 'linux-x64',
    },
    problem: {
      batch: 'longtail',
      world: 8,
      tokensPerRank: 1024,
      seed: 5,
      mask: 'causal',
      model: { ...problem.model },
      cluster: 'hopper-ib',
      sequences: problem.sequences.length,
      totalTokens: 8192,
      longest: Math.max(...problem.sequences),
      medianLength: 500,
      lengthHistogram: [{ lo: 512, count: 3, tokens: 2000 }],
    },
    strategies,
    runs: strategies.map((s, i) => ({
      ...run(s, i),
      config: `config of ${s}`,
      planMs: 1 + i,
      peakResidentTokens: 1724 + i,
    })),
    scaling: strategies.flatMap((s, i) =>
      [2, 4, 8].map((w) => ({
        strategy: s,
        world: w,
        mfuForward: 0.5 - i / 10,
        mfuBackward: 0.4 - i / 10,
        valid: true,
      })),
    ),
    timelines: strategies.flatMap((s) => [timeline(s, 'forward'), timeline(s, 'backward')]),
    busy: strategies.flatMap((s) =>
      (['forward', 'backward'] as const).map((phase) => ({
        strategy: s,
        phase,
        world: 8,
        binMs: 0.5,
        compute: [1, 1, 0.75, 0.5, 0.25],
        comm: [0.5, 0.5, 0, 0, 0],
      })),
    ),
    memory: strategies.map((s, i) => ({
      strategy: s,
      world: 8,
      limitTokens: 1536,
      home: Array.from({ length: 8 }, () => 1024),
      peak: Array.from({ length: 8 }, (_, r) => 1024 + 100 * r + i),
    })),
    ablation: {
      world: 8,
      steps: [
        { step: 'base', label: 'no pipeline', mfuForward: 0.1, mfuBackward: 0.12 },
        { step: 'reshuffle', label: '+ reshuffle overlap', mfuForward: 0.5, mfuBackward: 0.45 },
      ],
    },
    origin: 'demo',
    placement: placementOf({ ...plan, strategy: 'fcp' }),
    rounds: [roundsOf({ ...plan, strategy: 'fcp' }, 'forward')],
    numerics: {
      world: 4,
      tokensPerRank: 64,
      model: { qHeads: 4, kvHeads: 2, headDim: 32, bytesPerElement: 4 },
      runs: strategies.map((s) => ({
        strategy: s,
        world: 4,
        tokensPerRank: 64,
        sequences: 3,
        valid: true,
        relError: { o: 1e-7, dq: 2e-7, dk: 3e-7, dv: 4e-7 },
        tolerance: 1e-4,
        ok: true,
      })),
    },
    notes: [],
  };
}

/**
 * The cases every law runs on: seeded random batches (world sizes 1 to 8, causal and full masks,
 * block sizes that do and do not divide the lengths, GQA/MQA/MHA shapes), and the planners under
 * test: every registered one plus the test fixtures' hand-built planners.
 */
import { Rng } from '../../src/core/rng.ts';
import { allPlanners } from '../../src/experiments/strategies.ts';
import type { Mask, ModelShape, Plan } from '../../src/plan/types.ts';
import type { Planner, PlannerOptions } from '../../src/planners/types.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { chunkPlan, shuffledPlan } from '../executors/cpu-plans.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

/** One random case. */
export interface Case {
  id: number;
  world: number;
  mask: Mask;
  lengths: number[];
  blockSize: number;
  divides: boolean;
  coalesce: number;
  model: ModelShape;
}

const MODELS: ModelShape[] = [
  { qHeads: 4, kvHeads: 2, headDim: 16, bytesPerElement: 4 },
  { qHeads: 4, kvHeads: 1, headDim: 8, bytesPerElement: 4 },
  { qHeads: 2, kvHeads: 2, headDim: 12, bytesPerElement: 4 },
];

/**
 * Case i: world 1 + i mod 8 (or one of `worlds`), mask alternating every 8 cases, and lengths that
 * are multiples of the block size or a block size that divides few of them alternating, so that
 * every (world, mask) sees both within 32 cases (and every world both within 16).
 */
export function makeCase(i: number, worlds?: readonly number[]): Case {
  const rng = new Rng(1000 + i);
  const world = worlds ? worlds[i % worlds.length]! : 1 + (i % 8);
  const mask: Mask = Math.floor(i / 8) % 2 === 0 ? 'causal' : 'full';
  const divides = (i + Math.floor(i / 8)) % 2 === 0;
  const blockSize = divides
    ? ([16, 32, 64] as const)[rng.int(0, 2)]!
    : ([17, 24, 50, 100] as const)[rng.int(0, 3)]!;
  const total = world * rng.int(32, 144);
  const lengths: number[] = [];
  let sum = 0;
  while (sum < total) {
    const u = rng.next();
    let len = u < 0.6 ? rng.int(1, 48) : u < 0.9 ? rng.int(49, 160) : rng.int(161, 320);
    if (divides) len = blockSize * Math.max(1, Math.round(len / blockSize));
    len = Math.min(len, Math.max(divides ? blockSize : 1, total - sum));
    lengths.push(len);
    sum += len;
  }
  return {
    id: i,
    world,
    mask,
    lengths,
    blockSize,
    divides,
    coalesce: 1 + (i % 3),
    model: MODELS[i % MODELS.length]!,
  };
}

/** A planner under test; fixtures are references (fewer cases), not products. */
export interface PlannerUnderTest {
  planner: Planner;
  fixture: boolean;
}

/** Every registered planner, plus the fixtures (kept when planners change). */
export function plannersUnderTest(): PlannerUnderTest[] {
  const fixtures: Planner[] = [
    {
      name: 'fixture:simple',
      description: 'test fixture',
      plan: (p, o) => simplePlan(p, { coalesce: o?.coalesce ?? 2 }),
    },
    {
      name: 'fixture:reshuffle',
      description: 'test fixture',
      plan: (p) => shuffledPlan(p, 1 + (p.sequences.length % 3)),
    },
    { name: 'fixture:chunks', description: 'test fixture', plan: (p) => chunkPlan(p) },
  ];
  return [
    ...allPlanners().map((planner) => ({ planner, fixture: false })),
    ...fixtures.map((planner) => ({ planner, fixture: true })),
  ];
}

/** The plan of case `c` by `planner`. */
export function planCase(planner: Planner, c: Case): Plan {
  // Memory is not what the laws test: room for a zig-zag pair of blocks beyond twice the even share.
  const total = c.lengths.reduce((a, b) => a + b, 0);
  const memoryTokens = 2 * Math.ceil(total / c.world) + 2 * c.blockSize;
  const problem = resolveProblem({
    batch: c.lengths,
    world: c.world,
    mask: c.mask,
    model: c.model,
    seed: c.id,
    memoryTokens,
  });
  const options: PlannerOptions = { blockSize: c.blockSize, coalesce: c.coalesce };
  return planner.plan(problem, options);
}

/** A one-line name of a case. */
export function caseName(c: Case): string {
  return `case ${c.id}: world ${c.world}, ${c.mask}, ${c.lengths.length} sequences, block ${c.blockSize}${c.divides ? ' (divides)' : ''}, ${c.model.qHeads}/${c.model.kvHeads}x${c.model.headDim}`;
}

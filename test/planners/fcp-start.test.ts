/**
 * FCP starts with the work it already has (issue 15, deliverable 4; grid-tasks.ts): a whole short
 * sequence whose home rank holds part of it in the user layout is not one causal square waiting for
 * the rest to arrive, but tiles of the block grid, so the tiles made of resident data alone run
 * while the rest is in flight. Checked on random batches (mode (a)); the plans must stay valid.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { GENERATOR_NAMES } from '../../src/batch/generators.ts';
import { formatIssue } from '../../src/core/issues.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { planFcp } from '../../src/planners/fcp/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const B = 256;

/** Whether [a, b) of sequence `s` lies in the user rows of `rank`. */
function resident(plan: Plan, rank: number, s: number, a: number, b: number): boolean {
  const u = plan.userLayout;
  let pos = a;
  // User rows of one sequence are disjoint; walk them in start order.
  const rows: [number, number][] = [];
  for (let i = 0; i < u.rank.length; i++)
    if (u.rank[i] === rank && u.seq[i] === s) rows.push([u.start[i]!, u.start[i]! + u.length[i]!]);
  rows.sort((x, y) => x[0] - y[0]);
  for (const [ra, rb] of rows) if (ra <= pos && rb > pos) pos = rb;
  return pos >= b;
}

/**
 * Per whole-sequence home run [0, L) (L at most the whole-square limit, 8 tiles) that its rank
 * holds partly: whether it has a resident diagonal block, and whether some task of it is resident.
 */
function wholeRuns(plan: Plan): { withResidentBlock: number; withResidentTask: number } {
  const h = plan.homeLayout;
  const t = plan.tasks;
  let withResidentBlock = 0;
  let withResidentTask = 0;
  for (let i = 0; i < h.rank.length; i++) {
    const s = h.seq[i]!;
    const L = plan.sequences[s]!;
    if (h.start[i] !== 0 || h.length[i] !== L || L > 8 * B) continue;
    const r = h.rank[i]!;
    if (resident(plan, r, s, 0, L) || !resident(plan, r, s, L - 1, L)) continue;
    // The last block is resident (the user split cut the sequence before it): its diagonal square
    // needs nothing that moves.
    const last = Math.floor((L - 1) / B) * B;
    if (last === 0 || !resident(plan, r, s, last, L)) continue;
    withResidentBlock++;
    for (let k = 0; k < t.rank.length; k++)
      if (
        t.rank[k] === r &&
        t.seq[k] === s &&
        resident(plan, r, s, t.qStart[k]!, t.qStart[k]! + t.qLength[k]!) &&
        resident(plan, r, s, t.kvStart[k]!, t.kvStart[k]! + t.kvLength[k]!)
      ) {
        withResidentTask++;
        break;
      }
  }
  return { withResidentBlock, withResidentTask };
}

test('a partly resident whole sequence has tasks of resident data alone (mode (a))', () => {
  let runs = 0;
  fc.assert(
    fc.property(
      fc.constantFrom(...GENERATOR_NAMES),
      fc.constantFrom(4, 8, 16),
      fc.integer({ min: 0, max: 1_000_000 }),
      (batch, world, seed) => {
        const problem = resolveProblem({ batch, world, tokensPerRank: 4096, seed });
        const { plan } = planFcp(problem, { blockSize: B, minBlockSize: B, tile: B, minTile: B });
        const { issues } = validatePlan(plan);
        assert.deepEqual(issues.slice(0, 3).map(formatIssue), []);
        const w = wholeRuns(plan);
        runs += w.withResidentBlock;
        assert.equal(w.withResidentTask, w.withResidentBlock, `${batch} world ${world} seed ${seed}`);
      },
    ),
    { seed: 4, numRuns: 40 },
  );
  // The property must have met partly resident whole sequences (else it checks nothing).
  assert.ok(runs > 10, `only ${runs} partly resident whole sequences`);
});

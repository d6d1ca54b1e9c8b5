/**
 * FCP mode (a) (reshuffle per layer): no `out` push shares a group with, or precedes, a `kv` round
 * (forward.ts, backward.ts). Groups run in lockstep, so a push in a `kv` group holds that group on
 * both its ranks until the op producing it ends, and the K/V the receiver's next ops wait for
 * arrive late. Checked on random batches from every generator; the plans must stay valid.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { GENERATOR_NAMES } from '../../src/batch/generators.ts';
import { formatIssue } from '../../src/core/issues.ts';
import { Kind, type Phase } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { planFcp } from '../../src/planners/fcp/index.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

/** Last group holding a transfer of `kind`, and first group holding one of `other` (-1 / Infinity when none). */
function groupsOf(ph: Phase, kind: number, other: number): { last: number; first: number } {
  let last = -1;
  let first = Number.POSITIVE_INFINITY;
  const t = ph.transfers;
  for (let i = 0; i < t.kind.length; i++) {
    const g = ph.groupOfRound[t.round[i]!]!;
    if (t.kind[i] === kind) last = Math.max(last, g);
    if (t.kind[i] === other) first = Math.min(first, g);
  }
  return { last, first };
}

test('mode (a): every `out` push lies in a group after the last `kv` group, both phases', () => {
  let withOut = 0;
  fc.assert(
    fc.property(
      fc.constantFrom(...GENERATOR_NAMES),
      fc.constantFrom(4, 8, 16, 24),
      fc.integer({ min: 0, max: 1_000_000 }),
      fc.constantFrom('causal' as const, 'full' as const),
      fc.constantFrom(128, 256, 512),
      (batch, world, seed, mask, blockSize) => {
        const problem = resolveProblem({ batch, world, tokensPerRank: 2048, seed, mask });
        const { plan } = planFcp(problem, { blockSize });
        const { issues } = validatePlan(plan);
        assert.deepEqual(issues.slice(0, 3).map(formatIssue), []);
        for (const ph of [plan.forward, plan.backward]) {
          const { last, first } = groupsOf(ph, Kind.kv, Kind.out);
          if (first === Number.POSITIVE_INFINITY) continue;
          withOut++;
          assert.ok(
            first > last,
            `${batch} world ${world} seed ${seed}: out in group ${first}, kv up to ${last}`,
          );
        }
      },
    ),
    { seed: 15, numRuns: 40 },
  );
  // The property must have met reshuffles (else it checks nothing).
  assert.ok(withOut > 20, `only ${withOut} phases with out pushes`);
});

/**
 * Properties: the reference planner's plans are valid on random small batches (worlds 1..8, both
 * masks, several coalescing factors), and the report agrees with what the plans are made of.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatIssue } from '../../src/core/issues.ts';
import { kvBytesPerToken, SMALL_MODEL } from '../../src/model/attention.ts';
import { formatReport } from '../../src/plan/report.ts';
import { Kind } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';

const arbProblem = fc.record({
  batch: fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 7 }),
  world: fc.integer({ min: 1, max: 8 }),
  mask: fc.constantFrom('causal', 'full'),
  coalesce: fc.integer({ min: 1, max: 3 }),
});

test('simplePlan is valid on random batches, worlds 1..8, causal and full', () => {
  fc.assert(
    fc.property(arbProblem, ({ batch, world, mask, coalesce }) => {
      const plan = simplePlan(resolveProblem({ batch, world, mask, model: SMALL_MODEL }), { coalesce });
      const { issues, report } = validatePlan(plan);
      assert.deepEqual(issues.map(formatIssue), []);
      assert.equal(report.attendedPairs, report.expectedPairs);
      assert.ok(report.congestion <= 1);
      // simplePlan's greedy rounds are congestion-free but need not reach Δ.
      assert.ok(report.forward.kvDelta <= report.forward.kvRounds);
      // Bytes: every kv row moves its tokens' K and V once; dkv mirrors kv in backward.
      let kvTokens = 0;
      const tr = plan.forward.transfers;
      for (let i = 0; i < tr.kind.length; i++) if (tr.kind[i] === Kind.kv) kvTokens += tr.length[i]!;
      assert.equal(report.forward.bytes.kv, kvTokens * kvBytesPerToken(plan.model));
      assert.equal(report.backward.bytes.dkv, report.forward.bytes.kv);
      assert.ok(formatReport(report).includes('congestion'));
    }),
    { seed: 42, numRuns: 150 },
  );
});

test('shrinking any task of a random simplePlan to one key leaves pairs uncovered', () => {
  fc.assert(
    fc.property(arbProblem, fc.nat(), ({ batch, world, mask }, pick) => {
      const plan = simplePlan(resolveProblem({ batch, world, mask, model: SMALL_MODEL }));
      const t = pick % plan.tasks.rank.length;
      const qEnd = plan.tasks.qStart[t]! + plan.tasks.qLength[t]!;
      const ks = plan.tasks.kvStart[t]!;
      // Keys [ks+1, ks+kvLength) are attended by some query of the task unless the mask hides them.
      const lost = plan.tasks.kvLength[t]! > 1 && (mask === 'full' || ks + 1 < qEnd);
      plan.tasks.kvLength[t] = 1;
      const codes = validatePlan(plan).issues.map((i) => i.code);
      assert.equal(codes.includes('plan.rule2.pairMissing'), lost, JSON.stringify(codes));
    }),
    { seed: 7, numRuns: 100 },
  );
});

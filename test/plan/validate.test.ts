import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { planToJson, readPlan } from '../../src/plan/io.ts';
import { Kind, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { simplePlan } from '../fixtures/simple-plan.ts';
import {
  clonePlan,
  codes,
  duplicateTask,
  duplicateTransfer,
  moveTask,
  opsOf,
  removeTask,
  removeTransfer,
  scheduleTwice,
  unscheduleTask,
} from './mutate.ts';

const problem = resolveProblem({ batch: [300, 17, 1000, 64], world: 3, model: SMALL_MODEL });
const base = simplePlan(problem);

/** Asserts the plan is rejected with `code` among its issues. */
function rejects(plan: Plan, code: string): void {
  const got = codes(validatePlan(plan).issues);
  assert.ok(got.includes(code), `expected ${code}, got ${JSON.stringify(got)}`);
}

/** A task whose key range is remote (a `kv` transfer feeds it). */
const remoteTask = (p: Plan): number => {
  const t = p.tasks;
  for (let i = 0; i < t.rank.length; i++) {
    const keyRow = Array.from(p.userLayout.rank.keys()).find(
      (r) => p.userLayout.seq[r] === t.seq[i] && p.userLayout.start[r] === t.kvStart[i],
    )!;
    if (p.userLayout.rank[keyRow] !== t.rank[i]) return i;
  }
  throw new Error('no remote task');
};
const rowOfKind = (p: Plan, phase: 'forward' | 'backward', kind: number): number =>
  p[phase].transfers.kind.indexOf(kind);

test('simplePlan of the reference problem is valid and its report adds up', () => {
  const r = validatePlan(base);
  assert.deepEqual(r.issues, []);
  assert.equal(r.report.attendedPairs, r.report.expectedPairs);
  assert.equal(r.report.congestion, 1);
});

test('a dropped task leaves pairs uncovered (rule 2)', () => {
  rejects(removeTask(base, remoteTask(base)), 'plan.rule2.pairMissing');
});

test('a duplicated task covers pairs twice (rule 2)', () => {
  rejects(duplicateTask(base, remoteTask(base)), 'plan.rule2.pairOverlap');
});

test("a task on a rank that is not its query's home is rejected (rule 2)", () => {
  const p = clonePlan(base);
  const t = 0;
  const other = (p.tasks.rank[t]! + 1) % p.world;
  p.tasks.rank[t] = other;
  for (const ph of [p.forward, p.backward]) moveTask(ph, t, ph.compute.rank.indexOf(other));
  rejects(p, 'plan.rule2.notHome');
});

test('K/V used before it arrives is rejected (rule 3)', () => {
  const p = clonePlan(base);
  const op = opsOf(p.forward, remoteTask(p))[0]!;
  assert.ok(p.forward.compute.after[op]! >= 0);
  p.forward.compute.after[op] = -1;
  rejects(p, 'plan.rule3.kvMissing');
});

test('a transfer from a rank that does not hold the data is rejected (rule 3)', () => {
  const p = clonePlan(base);
  const tr = p.forward.transfers;
  // seq 2 tokens [143, 603) live on rank 1 only; let rank 0 send them.
  const x = Array.from(tr.start.keys()).find((i) => tr.seq[i] === 2 && tr.start[i] === 143)!;
  assert.equal(tr.src[x], 1);
  tr.src[x] = 0;
  rejects(p, 'plan.rule3.senderMissing');
});

test('a lost dkv contribution is rejected (rule 4)', () => {
  const p = clonePlan(base);
  removeTransfer(p.backward, rowOfKind(p, 'backward', Kind.dkv));
  rejects(p, 'plan.rule4.dkvLost');
});

test('a dkv delivered twice is rejected (rule 4)', () => {
  const p = clonePlan(base);
  duplicateTransfer(p.backward, rowOfKind(p, 'backward', Kind.dkv));
  rejects(p, 'plan.rule4.dkvDuplicate');
});

test('a dkv pushed before the op that writes the partial may race (rule 4)', () => {
  const p = clonePlan(base);
  const sa = p.backward.sendAfter;
  // Point the push at an earlier op of the sender that does not write this partial.
  const i = Array.from(sa.compute.keys()).find((k) => {
    const o = sa.compute[k]!;
    return o > 0 && p.backward.compute.rank[o - 1] === p.backward.compute.rank[o];
  })!;
  sa.compute[i]! -= 1;
  rejects(p, 'plan.rule4.dkvRace');
  rejects(p, 'plan.rule4.dkvLost');
});

test('a sendAfter that could deadlock is rejected (rule 5)', () => {
  const p = clonePlan(base);
  const sa = p.backward.sendAfter;
  const x = sa.transfer[0]!;
  const group = p.backward.groupOfRound[p.backward.transfers.round[x]!]!;
  p.backward.compute.after[sa.compute[0]!] = group;
  rejects(p, 'plan.rule5.deadlock');
});

test('a sendAfter op on another rank than the sender is rejected (rule 5)', () => {
  const p = clonePlan(base);
  const sa = p.backward.sendAfter;
  const x = sa.transfer[0]!;
  sa.compute[0] = p.backward.compute.rank.findIndex((r) => r !== p.backward.transfers.src[x]);
  rejects(p, 'plan.rule5.sendAfterRank');
});

test('a layout with a gap is rejected (rule 1)', () => {
  const p = clonePlan(base);
  p.userLayout.length[0]! -= 1;
  rejects(p, 'plan.rule1.gap');
});

test('a layout with an overlap is rejected (rule 1)', () => {
  const p = clonePlan(base);
  const row = p.homeLayout.start.findIndex((s) => s > 0);
  p.homeLayout.start[row]! -= 1;
  p.homeLayout.length[row]! += 1;
  rejects(p, 'plan.rule1.overlap');
});

test('a fully masked task is rejected (rule 2)', () => {
  // Sequence 2: queries [0, 143) on rank 0 against keys [603, 1000): all in the future.
  const p = clonePlan(base);
  const t = p.tasks;
  const add = (col: Int32Array, v: number): Int32Array => Int32Array.from([...col, v]);
  const id = t.rank.length;
  p.tasks = {
    rank: add(t.rank, 0),
    seq: add(t.seq, 2),
    qStart: add(t.qStart, 0),
    qLength: add(t.qLength, 143),
    kvStart: add(t.kvStart, 603),
    kvLength: add(t.kvLength, 397),
  };
  for (const ph of [p.forward, p.backward]) moveTask(ph, id, 0);
  rejects(p, 'plan.rule2.masked');
});

test('groupOfRound that decreases is rejected (rule 5)', () => {
  const p = clonePlan(base);
  const g = p.backward.groupOfRound;
  assert.ok(g.length >= 3 && g[g.length - 1]! > 0);
  g[g.length - 1] = 0;
  rejects(p, 'plan.rule5.groupOrder');
});

test('groupOfRound that skips a group or starts above 0 is rejected (rule 5)', () => {
  const p = clonePlan(base);
  p.backward.groupOfRound = Int32Array.from(p.backward.groupOfRound, (g) => (g === 0 ? 0 : g + 1));
  rejects(p, 'plan.rule5.groupGap');
  const q = clonePlan(base);
  q.forward.groupOfRound = Int32Array.from(q.forward.groupOfRound, (g) => g + 1);
  rejects(q, 'plan.rule5.groupStart');
});

test('a task that runs in no op, or twice, is rejected (rule 2)', () => {
  const p = clonePlan(base);
  unscheduleTask(p.forward, 0);
  rejects(p, 'plan.rule2.taskNotRun');
  const q = clonePlan(base);
  scheduleTwice(q.backward, 0);
  rejects(q, 'plan.rule2.taskRunTwice');
});

test('a plan of another format version is refused by the reader and the validator', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-validate-'));
  const file = join(dir, 'old.json');
  writeFileSync(file, planToJson(base).replace('"fcp-plan/1"', '"fcp-plan/0"'));
  assert.throws(
    () => readPlan(file),
    (e: unknown) => e instanceof FcpError && e.code === 'plan.format',
  );
  const p = clonePlan(base) as unknown as { format: string };
  p.format = 'fcp-plan/0';
  assert.ok(codes(validatePlan(p as unknown as Plan).issues).includes('plan.format'));
});

test('structural damage is reported without crashing and the report is zero', () => {
  const p = clonePlan(base);
  p.forward.compute.taskIds[0] = 999;
  p.backward.transfers.src[0] = -1;
  const r = validatePlan(p);
  assert.ok(codes(r.issues).includes('plan.structure.taskId'));
  assert.ok(codes(r.issues).includes('plan.structure.rank'));
  assert.equal(r.report.attendedPairs, 0);
});

test('the issue cap keeps at least one issue per broken rule', () => {
  const p = removeTask(base, remoteTask(base));
  p.userLayout.length[0]! -= 1;
  const r = validatePlan(p, { maxIssues: 1 });
  assert.ok(r.omitted > 0);
  const rules = new Set(codes(r.issues).map((c) => c.split('.').slice(0, 2).join('.')));
  assert.ok(rules.has('plan.rule1') && rules.has('plan.rule2'), JSON.stringify([...rules]));
});

test('progress: fractions non-decreasing in [0, 1], ending at 1, the result unchanged by the hook', async () => {
  const { getPlanner } = await import('../../src/experiments/strategies.ts');
  const { estimateMemory } = await import('../../src/plan/memory.ts');
  for (const name of ['fcp', 'ring', 'magi']) {
    const plan = getPlanner(name).plan(
      resolveProblem({ batch: 'longtail', world: 8, tokensPerRank: 2048, seed: 1 }),
      {},
    );
    for (const run of [
      (on?: (f: number) => void) => validatePlan(plan, on ? { onProgress: on } : {}),
      (on?: (f: number) => void) => estimateMemory(plan, { dtype: 'bfloat16', kernel: 'gpu', layers: 1 }, on),
    ]) {
      const seen: number[] = [];
      assert.deepEqual(
        run((f) => seen.push(f)),
        run(),
        name,
      );
      assert.ok(seen.length >= 2, `${name}: ${seen.join(', ')}`);
      for (let i = 0; i < seen.length; i++) {
        assert.ok(seen[i]! >= 0 && seen[i]! <= 1, `fraction ${seen[i]}`);
        if (i > 0) assert.ok(seen[i]! >= seen[i - 1]!, `fractions ${seen.join(', ')}`);
      }
      assert.equal(seen[seen.length - 1], 1, `${name}: ${seen.join(', ')}`);
    }
  }
});

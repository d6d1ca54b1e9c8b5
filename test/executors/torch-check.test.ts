/**
 * The Python runtime's own plan checks (python/fcp_torch/check.py) against the TypeScript
 * validator: valid plans of every strategy (2 and 4 ranks, causal and full) get seeded single-row
 * corruptions in Python (tests/check_corpus.py: dropped transfers and sendAfter pairs, moved
 * rounds and `after`s, src -1, moved layout rows, shortened tasks, heads that do not divide);
 * every plan `validatePlan` rejects must be refused by `check_plan` (which runs before any
 * collective call), every plan it accepts accepted. Codes agree for most plans; they may differ
 * where both find several problems in a different order, so only refusal is asserted.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findTorchPython, pythonPackageRoot, torchSuiteSkip } from '../../src/executors/torch/python.ts';
import { getPlanner, plannerNames } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { readPlan, writePlan } from '../../src/plan/io.ts';
import { Kind } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { relayedPlan } from '../fixtures/relayed.ts';

// Under CI a missing torch fails the suite (torchSuiteSkip throws) instead of skipping it.
const skip = torchSuiteSkip();
const python = skip ? null : findTorchPython();
const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-check-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('fcp_torch.check against the TypeScript validator', { skip }, () => {
  it('refuses every corrupted plan the validator rejects and accepts every one it accepts', () => {
    const plans = join(dir, 'valid');
    const out = join(dir, 'corrupt');
    mkdirSync(plans, { recursive: true });
    for (const s of plannerNames())
      for (const world of [2, 4])
        for (const mask of ['causal', 'full'] as const) {
          const p = getPlanner(s).plan(
            resolveProblem({ batch: [70, 9, 33, 120, 4, 60, 1, 47], world, mask, model: SMALL_MODEL }),
            { blockSize: 16, coalesce: 2 },
          );
          assert.deepEqual(validatePlan(p).issues, [], `${s} ${world} ${mask}`);
          writePlan(join(plans, `${s}-${world}-${mask}.json`), p);
        }
    // FCP with two-hop `in` and `out` (PXN routing across two nodes of two GPUs): relays.
    const relayed = relayedPlan();
    assert.deepEqual(validatePlan(relayed).issues, []);
    const t = relayed.forward.transfers;
    const holds = (l: typeof relayed.homeLayout, r: number, seq: number, pos: number): boolean =>
      l.rank.some(
        (x, j) => x === r && l.seq[j] === seq && l.start[j]! <= pos && pos < l.start[j]! + l.length[j]!,
      );
    for (const [kind, layout] of [
      [Kind.in, relayed.homeLayout],
      [Kind.out, relayed.userLayout],
    ] as const)
      assert.ok(
        t.kind.some((k, i) => k === kind && !holds(layout, t.dst[i]!, t.seq[i]!, t.start[i]!)),
        `the plan relays an ${kind === Kind.in ? 'in' : 'out'}`,
      );
    writePlan(join(plans, 'fcp-4-relays.json'), relayed);
    const r = spawnSync(
      python!.python,
      ['-m', 'tests.check_corpus', '--plans', plans, '--out', out, '--per-table', '4'],
      {
        cwd: pythonPackageRoot(),
        encoding: 'utf8',
        timeout: 170000,
        env: { ...process.env, OMP_NUM_THREADS: '1' },
      },
    );
    assert.equal(r.status, 0, r.stderr);
    const codes = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, string>;
    let rejected = 0;
    let refused = 0;
    let sameCode = 0;
    const wrong: string[] = [];
    for (const [file, py] of Object.entries(codes)) {
      const issues = validatePlan(readPlan(join(out, file)), { maxIssues: 1 }).issues;
      const ts = issues[0]?.code ?? 'VALID';
      if (ts !== 'VALID') rejected++;
      if (py !== 'VALID') refused++;
      if (ts === py) sameCode++;
      if ((ts === 'VALID') !== (py === 'VALID')) wrong.push(`${file}: validator ${ts}, fcp_torch ${py}`);
    }
    const n = Object.keys(codes).length;
    console.log(
      `# fcp_torch.check: ${n} plans, validator rejects ${rejected}, fcp_torch refuses ${refused}, same code ${sameCode}`,
    );
    assert.ok(rejected > n / 2, `only ${rejected} of ${n} corruptions are invalid`);
    assert.deepEqual(wrong, []);
  });
});

/**
 * fcp_torch.shard on real plans: the Python package's own tests shard synthetic owner plans, and a
 * rank's tokens come from the plan's user layout, which every planner lays out its own way (FCP's
 * even split in mode (a) and its loader layout in mode (b), the baselines' own layouts). For plans of
 * every planner, every token of the batch must be on exactly one rank, at its position, with as many
 * rows as the plan's user layout gives that rank.
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
import { writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

// Under CI a missing torch fails the suite (torchSuiteSkip throws) instead of skipping it.
const skip = torchSuiteSkip();
const python = skip ? null : findTorchPython();
const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-shard-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Checks every plan file of a folder; prints `ok N` or the first failure. */
const CHECK = `
import os, sys, numpy as np
import fcp_torch
from fcp_torch.plan import read_plan, user_rows
d = sys.argv[1]; n = 0
for f in sorted(os.listdir(d)):
    plan = read_plan(os.path.join(d, f))
    L = [int(x) for x in plan.sequences.tolist()]
    seen = np.zeros(sum(L), int)
    base = np.concatenate([[0], np.cumsum(L)])
    for r in range(plan.world):
        sh = fcp_torch.shard(L, plan, rank=r)
        idx, pos, seq = sh.index.numpy(), sh.position_ids.numpy(), sh.seq_ids.numpy()
        np.add.at(seen, idx, 1)
        assert (idx - base[seq] == pos).all(), f"{f} rank {r}: positions"
        assert len(idx) == int(user_rows(plan, r)[2].sum()), f"{f} rank {r}: rows"
    assert (seen == 1).all(), f"{f}: tokens held {np.bincount(seen).tolist()} times"
    n += 1
print("ok", n)
`;

describe('fcp_torch.shard on plans of every planner', { skip }, () => {
  it('puts every token on exactly one rank, at its position', () => {
    const plans = join(dir, 'plans');
    mkdirSync(plans, { recursive: true });
    let written = 0;
    for (const s of plannerNames())
      for (const world of [3, 4])
        for (const loaderLayout of s === 'fcp' ? [false, true] : [false]) {
          const problem = resolveProblem({
            batch: [70, 9, 33, 120, 4, 60, 1, 47],
            world,
            model: SMALL_MODEL,
          });
          const p = getPlanner(s).plan(problem, { blockSize: 16, ...(loaderLayout ? { loaderLayout } : {}) });
          writePlan(join(plans, `${s}-${world}${loaderLayout ? '-b' : ''}.json`), p);
          written++;
        }
    const r = spawnSync(python!.python, ['-c', CHECK, plans], {
      cwd: pythonPackageRoot(),
      encoding: 'utf8',
      timeout: 120000,
      env: { ...process.env, OMP_NUM_THREADS: '1' },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), `ok ${written}`);
  });
});

/**
 * The torch runtime honours chained rounds (`commGroupOfRound`): an FCP plan whose groups are
 * split into comm groups (`commCoalesce` 1 under `coalesce` 4) runs on 4 gloo processes to the
 * float64 reference's outputs, and Python's reader turns the chains into groups exactly as
 * src/plan/chains.ts does.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { runTorchMany } from '../../src/executors/torch/index.ts';
import { pythonPackageRoot, requireTorchPython } from '../../src/executors/torch/python.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { planChainsAsGroups } from '../../src/plan/chains.ts';
import { writePlan } from '../../src/plan/io.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { numericLaw } from '../laws/laws.ts';

describe('torch runtime: chained rounds', () => {
  it('an FCP plan with comm groups inside its groups gives the reference outputs', async () => {
    const problem = resolveProblem({
      batch: [130, 40, 96, 17, 64, 200, 9],
      world: 4,
      mask: 'causal',
      model: { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 4 },
    });
    const plan = getPlanner('fcp').plan(problem, { blockSize: 16, coalesce: 4, commCoalesce: 1 });
    const c = plan.forward.commGroupOfRound;
    assert.ok(c, 'the plan carries commGroupOfRound');
    const g = plan.forward.groupOfRound;
    assert.ok(c[c.length - 1]! > g[g.length - 1]!, 'there are more comm groups than groups');
    // Python's reader runs the chains as groups, like the TypeScript executors.
    const file = join(mkdtempSync(join(tmpdir(), 'fcp-chains-')), 'plan.json');
    writePlan(file, plan);
    const py = requireTorchPython();
    const script =
      'import json,sys; from fcp_torch.plan import read_plan; p=read_plan(sys.argv[1]); ' +
      'print(json.dumps({d:{"g":getattr(p,d).group_of_round.tolist(),"a":getattr(p,d).compute["after"].tolist()} for d in ("forward","backward")}))';
    const out = spawnSync(py.python, ['-c', script, file], {
      encoding: 'utf8',
      env: { ...process.env, PYTHONPATH: pythonPackageRoot() },
    });
    assert.equal(out.status, 0, out.stderr);
    const got = JSON.parse(out.stdout) as Record<string, { g: number[]; a: number[] }>;
    const want = planChainsAsGroups(plan);
    for (const d of ['forward', 'backward'] as const) {
      assert.deepEqual(got[d]!.g, Array.from(want[d].groupOfRound), `${d} groups`);
      assert.deepEqual(got[d]!.a, Array.from(want[d].compute.after), `${d} compute.after`);
    }
    const inputs = randomInputsForPlan(plan, 5);
    const [r] = await runTorchMany([{ plan, inputs }], { device: 'cpu', kernel: 'math', timeoutMs: 120000 });
    numericLaw(plan, inputs, r?.outputs);
  });
});

/**
 * The law suite, run on every executor for every planner (registered ones and the fixtures):
 * `cpu` and `torch` (gloo, 2 and 4 processes, both piece layouts of the GPU path, timed iterations;
 * when a Python with torch exists, and under CI=1 its absence fails) against
 * the float64 reference, `sim` against its own law. Case counts: test/helpers/runs.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CpuWorkerPool } from '../../src/executors/cpu/pool.ts';
import { randomInputsForPlan } from '../../src/executors/inputs.ts';
import { getExecutor } from '../../src/executors/registry.ts';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { runTorchMany } from '../../src/executors/torch/index.ts';
import { findTorchPython, torchSuiteSkip } from '../../src/executors/torch/python.ts';
import type { ExecutionResult, SequenceInputs } from '../../src/executors/types.ts';
import type { Plan } from '../../src/plan/types.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { runs } from '../helpers/runs.ts';
import { type Case, caseName, makeCase, planCase, plannersUnderTest } from './cases.ts';
import { numericLaw, plannerLaw, simLaw } from './laws.ts';

const worst = { o: 0, dq: 0, dk: 0, dv: 0 };
const count: Record<string, number> = {};
const pool = new CpuWorkerPool();
after(async () => {
  await pool.close();
  const f = (x: number) => x.toExponential(2);
  console.log(
    `# laws: ${Object.entries(count)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )} runs; numeric max relative error o ${f(worst.o)}, dq ${f(worst.dq)}, dk ${f(worst.dk)}, dv ${f(worst.dv)}`,
  );
});
const tally = (executor: string, e?: { o: number; dq: number; dk: number; dv: number }): void => {
  count[executor] = (count[executor] ?? 0) + 1;
  if (e) for (const k of ['o', 'dq', 'dk', 'dv'] as const) worst[k] = Math.max(worst[k], e[k]);
};

const cpuCases = Array.from({ length: runs('lawCpu') }, (_, i) => makeCase(i));

for (const { planner, fixture } of plannersUnderTest()) {
  const n = fixture ? runs('lawCpuFixture') : runs('lawCpu');
  describe(`laws: cpu executor x ${planner.name} planner`, () => {
    for (const c of cpuCases.slice(0, n))
      it(caseName(c), async () => {
        const plan = planCase(planner, c);
        if (!fixture) plannerLaw(planner.name, plan);
        const inputs = randomInputsForPlan(plan, c.id);
        const res = await getExecutor('cpu').run(plan, inputs, { pool });
        tally('cpu', numericLaw(plan, inputs, res.outputs));
      });
  });
}

const cluster = resolveCluster('hopper-ib');
const simCases = Array.from({ length: runs('lawSim') }, (_, i) => makeCase(500 + i));
for (const { planner } of plannersUnderTest())
  describe(`laws: sim executor x ${planner.name} planner`, () => {
    for (const c of simCases)
      it(caseName(c), () => {
        const plan = planCase(planner, c);
        simLaw(plan, simulatePlan(plan, { cluster, padding: false }));
        tally('sim');
      });
  });

// torch: one launch per (world size) for all planners' cases: the processes start once.
// The same probe as every torch suite (src/executors/torch/python.ts): under CI=1 a missing or
// failing Python is an error naming python3-torch, reported by the torch suite below (the cpu and
// sim laws still run); elsewhere the torch laws are skipped with the reason.
let torchSkip: string | false = false;
let torchError: unknown;
try {
  torchSkip = torchSuiteSkip();
} catch (e) {
  torchError = e;
}
const python = torchSkip === false && torchError === undefined ? findTorchPython() : null;
if (torchSkip) console.log(`# laws on the torch executor skipped: ${torchSkip}`);
const TORCH_WORLDS = [2, 4] as const;
describe('laws: torch executor (gloo) x every planner', { skip: torchSkip }, () => {
  if (torchError !== undefined) {
    it('a Python with torch is available (CI)', () => {
      throw torchError;
    });
    return;
  }
  const jobs: { name: string; c: Case; plan: Plan; inputs: SequenceInputs }[] = [];
  for (const { planner } of plannersUnderTest())
    for (let i = 0; i < runs('lawTorch'); i++) {
      const c = makeCase(700 + i, TORCH_WORLDS);
      const plan = planCase(planner, c);
      jobs.push({ name: `${planner.name} ${caseName(c)}`, c, plan, inputs: randomInputsForPlan(plan, c.id) });
    }
  const results = new Map<string, ExecutionResult>();
  before(async () => {
    assert.ok(python, 'the probe found a Python with torch');
    for (const w of TORCH_WORLDS) {
      const mine = jobs.filter((j) => j.plan.world === w);
      const res = await runTorchMany(
        mine.map((j) => ({ plan: j.plan, inputs: j.inputs })),
        // The two piece layouts of the GPU path: bottom-right causal pieces, and squares + rectangles;
        // the 4-rank launch also times two iterations after a warm-up.
        {
          device: 'cpu',
          kernel: 'math',
          mode: w === 2 ? 'br' : 'square',
          iters: w === 4 ? 2 : 1,
          warmup: w === 4 ? 1 : 0,
          timeoutMs: 240000,
        },
      );
      res.forEach((r, i) => {
        assert.equal(r.perRank.forward.length, w, 'one timing per rank');
        assert.ok(r.forwardMs > 0 && r.backwardMs > 0, 'both phases timed');
        assert.equal(((r.details?.forwardIterationsMs ?? []) as number[]).length, w === 4 ? 2 : 1);
        assert.equal(r.details?.mode, w === 2 ? 'br' : 'square');
        results.set(mine[i]!.name, r);
      });
    }
  });
  for (const j of jobs)
    it(j.name, () => {
      const r = results.get(j.name);
      assert.ok(r, 'the torch launch returned a result for this plan');
      tally('torch', numericLaw(j.plan, j.inputs, r.outputs));
    });
});

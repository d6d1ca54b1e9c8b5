/**
 * Random problems beyond the grids the tests and the headline use, through a planner: every plan
 * validated, every third one simulated (finite makespans, MFU in (0, 1)), every fourth planned
 * twice (byte-identical), and with `--numerics` every one run on the CPU runtime against the
 * float64 reference (`fcp verify`'s check, cli/verify.ts, at its default bound). A crash, an
 * invalid plan, a bad simulation, a second plan that differs or a wrong output is printed with the
 * case; a coded planner refusal (`plan.memory`, ...) is printed and not counted. Exit code 1 when anything was bad.
 *
 * Cases (seeded: case i is the same on every machine): the scale sweep draws worlds 9-72 with 4 or
 * 8 GPUs a node (last nodes often partly filled), 1-8K tokens per rank, every batch generator and
 * cluster preset, direct or PXN routing, fluid or contention, causal or full, mode (a) or (b);
 * `--numerics` draws worlds 3-10 on nodes of 2-4 GPUs, 128-512 tokens per rank, a small attention
 * shape, block sizes 16-64 and sometimes `fanOut`, so that relays, node sums and PXN run in plans
 * small enough for the CPU runtime.
 *
 * What it found (session 38): a world that fills its last node only in part (20 ranks, 8 a node)
 * stopped FCP with a TypeError whenever a node-level `dkv` sum chose the home's rail on that node
 * (91 of the 600 scale cases from 10; transfers/dkv-node.ts, fixed, test/planners/fcp-dkv-node.test.ts).
 *
 * `--executor torch` runs the numerics on the PyTorch runtime instead (`fcp run --backend torch
 * --check`'s path: one process per rank, gloo, float32; a second or more a case for the imports).
 *
 * Run: npx tsx bench/fuzz-plans.ts [--cases 200] [--first 0] [--strategy fcp] [--numerics]
 *                                  [--executor cpu|torch] (with --numerics) [--torch-mode br|square]
 *                                  [--write DIR] (each valid plan to DIR/<strategy>-<i>.json.gz, numbers
 *                                  unchecked here: for the GPU machine, scripts/gpu/h200.py --sections fuzz)
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { verifyPlan } from '../src/cli/verify.ts';
import { Rng } from '../src/core/rng.ts';
import { simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../src/model/attention.ts';
import { writePlan } from '../src/plan/io.ts';
import type { Plan } from '../src/plan/types.ts';
import { validatePlan } from '../src/plan/validate.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { type ClusterSpec, resolveCluster } from '../src/problem/cluster.ts';
import { type Problem, resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const cases = Number(argValue(argv, '--cases', '200'));
const first = Number(argValue(argv, '--first', '0'));
const strategy = argValue(argv, '--strategy', 'fcp');
const numerics = argv.includes('--numerics');
const executor = argValue(argv, '--executor', 'cpu');
/** `--torch-mode square`: the torch runtime's piece decomposition (default its own, br on CPU). */
const torchMode = argValue(argv, '--torch-mode', '');
/** `--write DIR`: write each valid plan there (<strategy>-<i>.json.gz) instead of checking its numbers here. */
const writeDir = argValue(argv, '--write', '');
const BATCHES = ['longtail', 'magi', 'bimodal', 'uniform', 'weak-longtail', 'fixed'];
const CLUSTERS = ['hopper-ib', 'ratio-5920', 'ratio-2500', 'torus'];

interface Case {
  readonly label: string;
  readonly problem: Problem;
  readonly cluster: ClusterSpec;
  readonly options: Partial<FcpPlannerOptions>;
}

/** Case i of the sweep (module comment). */
function makeCase(i: number): Case {
  const r = new Rng((numerics ? 9000 : 7000) + i);
  const pick = <T>(xs: readonly T[]): T => xs[r.int(0, xs.length - 1)]!;
  const gpusPerNode = numerics ? r.int(2, 4) : pick([4, 8]);
  const world = numerics ? r.int(3, 10) : r.int(9, 72);
  const batch = pick(BATCHES);
  const tokensPerRank = numerics ? pick([128, 256, 384, 512]) : pick([1024, 2048, 4096, 8192]);
  const clusterName = numerics ? 'hopper-ib' : pick(CLUSTERS);
  const routing = r.next() < 0.5 ? ('pxn' as const) : ('direct' as const);
  const network = !numerics && r.next() < 0.3 ? ('contention' as const) : ('fluid' as const);
  const mask = r.next() < 0.8 ? ('causal' as const) : ('full' as const);
  const loaderLayout = r.next() < 0.5;
  const extra = numerics
    ? { blockSize: pick([16, 32, 48, 64]), ...(r.next() < 0.3 ? { fanOut: true } : {}) }
    : {};
  const cluster = resolveCluster(clusterName, { network, routing });
  const problem = resolveProblem({
    batch,
    world,
    tokensPerRank,
    seed: 1 + i,
    cluster,
    gpusPerNode,
    mask,
    ...(numerics ? { model: SMALL_MODEL } : {}),
  });
  const options = strategy === 'fcp' ? { ...(loaderLayout ? { loaderLayout: true } : {}), ...extra } : {};
  const label = `#${i} ${batch} world ${world} (${gpusPerNode}/node) ${tokensPerRank}/rank ${clusterName} ${routing} ${network} ${mask}${strategy === 'fcp' ? (loaderLayout ? ' (b)' : ' (a)') : ''}${'blockSize' in extra ? ` block ${extra.blockSize}` : ''}${'fanOut' in extra ? ' fanOut' : ''}`;
  return { label, problem, cluster, options };
}

/** What is wrong with case `c` ('' when nothing). */
async function check(c: Case, i: number): Promise<string> {
  const planner = getPlanner(strategy);
  let plan: Plan;
  try {
    plan = planner.plan(c.problem, c.options);
  } catch (e) {
    const coded = (e as { issues?: { code: string }[] }).issues;
    if (coded) {
      console.log(`refused  ${c.label}: ${coded.map((x) => x.code).join(', ')}`);
      return '';
    }
    return `crash: ${String((e as Error).stack ?? e)
      .split('\n')
      .slice(0, 4)
      .join(' | ')}`;
  }
  const issues = validatePlan(plan).issues;
  if (issues.length > 0)
    return `invalid: ${issues
      .slice(0, 3)
      .map((x) => x.code)
      .join(', ')}`;
  if (i % 3 === 0) {
    const sim = simulatePlan(plan, { cluster: c.cluster, skipValidation: true });
    for (const ph of [sim.forward, sim.backward])
      if (!(Number.isFinite(ph.makespanMs) && ph.makespanMs > 0 && ph.mfu > 0 && ph.mfu < 1))
        return `simulation: makespan ${ph.makespanMs} ms, MFU ${ph.mfu}`;
  }
  if (i % 4 === 0 && JSON.stringify(planner.plan(c.problem, c.options)) !== JSON.stringify(plan))
    return 'a second plan of the same input differs';
  if (writeDir !== '') {
    writePlan(join(writeDir, `${strategy}-${String(i).padStart(4, '0')}.json.gz`), plan);
    return '';
  }
  if (numerics) {
    const v = await verifyPlan(plan, {
      seed: 1 + i,
      executor,
      ...(torchMode !== '' ? { executorOptions: { mode: torchMode } } : {}),
    });
    if (!v.ok) return `numerics: relative errors ${JSON.stringify(v.errors)} > ${v.maxError}`;
  }
  return '';
}

if (writeDir !== '') mkdirSync(writeDir, { recursive: true });
const t0 = performance.now();
let bad = 0;
for (let i = first; i < first + cases; i++) {
  const c = makeCase(i);
  const wrong = await check(c, i);
  if (wrong !== '') {
    bad++;
    console.log(`BAD      ${c.label}: ${wrong}`);
  }
  if ((i - first + 1) % 25 === 0)
    process.stderr.write(
      `fuzz-plans: ${i - first + 1}/${cases} cases, ${bad} bad, ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
    );
}
console.log(
  `fuzz-plans: ${strategy}${numerics ? ` (numerics, ${executor})` : ''}, cases ${first}-${first + cases - 1}: ${bad} bad, ${((performance.now() - t0) / 1000).toFixed(0)} s`,
);
process.exitCode = bad > 0 ? 1 : 0;

/**
 * The network models side by side (all numbers simulated): attention MFU forward / backward of
 * each strategy and world size under our fluid model, our contention model (the plan made for a
 * contention cluster, so FCP plans for the network it runs on) and SimGrid's IB model (fluid plan;
 * SimGrid replays it with its own sharing). Batch `longtail`, 32K tokens per rank, hopper-ib,
 * seeds 1..batches, means over batches. Also prints SimGrid's wall time per plan.
 *
 *   npx tsx bench/network.ts [--strategies fcp,magi] [--worlds 16,64,256] [--batches 1] [--simgrid-model ib]
 *   npx tsx bench/network.ts --fit      # the contention fit against every measurement
 *   npx tsx bench/network.ts --no-simgrid --params FILE   # another contention fit, our engine only
 */
import {
  contentionOverrides,
  defaultNetworkParams,
  fitTable,
  loadNetworkParams,
} from '../src/cost/contention.ts';
import { type SimOptions, simulatePlan } from '../src/executors/sim/index.ts';
import { parseSimgridModel, simgridEngine } from '../src/executors/simgrid/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : fallback;
}

if (process.argv.includes('--fit')) {
  const doc = defaultNetworkParams();
  console.log(`contention fit: loss ${doc.params.loss}, msgUs ${doc.params.msgUs} us`);
  console.log('| measurement | what | measured | model | error |');
  console.log('|---|---|---:|---:|---:|');
  for (const r of fitTable(doc))
    console.log(
      `| ${r.id} | ${r.what} | ${r.measured} | ${r.model.toFixed(2)} | ${(r.error * 100).toFixed(1)}% |`,
    );
  process.exit(0);
}

const strategies = arg('strategies', 'fcp,magi').split(',');
const worlds = arg('worlds', '16,64,256').split(',').map(Number);
const batches = Number(arg('batches', '1'));
const sgModel = parseSimgridModel(arg('simgrid-model', 'ib'));

const fluid = resolveCluster('hopper-ib');
const paramsFile = arg('params', '');
const contention = resolveCluster('hopper-ib', {
  network: 'contention',
  ...(paramsFile ? contentionOverrides(loadNetworkParams(paramsFile)) : {}),
});
const withSimgrid = !process.argv.includes('--no-simgrid');
type Col = { name: string; cluster: typeof fluid; sim: SimOptions };
const cols: Col[] = [
  { name: 'fluid', cluster: fluid, sim: { cluster: fluid } },
  { name: 'contention', cluster: contention, sim: { cluster: contention } },
  ...(withSimgrid
    ? [
        {
          name: `simgrid-${sgModel}`,
          cluster: fluid,
          sim: { cluster: fluid, engine: simgridEngine(sgModel) },
        },
      ]
    : []),
];

const f3 = (x: number): string => x.toFixed(3);
console.log(
  `attention MFU forward / backward (simulated; longtail, 32K tokens/rank, hopper-ib, mean of ${batches} batch(es); contention loss ${contention.contentionLoss}, ${contention.contentionMsgUs} us/message)`,
);
console.log(`| strategy | GPUs | ${cols.map((c) => c.name).join(' | ')} | SimGrid wall s |`);
console.log(`|---|---:|${cols.map(() => '---|').join('')}---:|`);
for (const world of worlds)
  for (const s of strategies) {
    const sums = cols.map(() => [0, 0]);
    let wall = 0;
    for (let b = 0; b < batches; b++)
      cols.forEach((col, i) => {
        const problem = resolveProblem({ batch: 'longtail', world, seed: 1 + b, cluster: col.cluster });
        const plan = getPlanner(s).plan(problem);
        const t0 = performance.now();
        const r = simulatePlan(plan, col.sim);
        if (col.sim.engine) wall += (performance.now() - t0) / 1000;
        sums[i]![0]! += r.forward.mfu / batches;
        sums[i]![1]! += r.backward.mfu / batches;
      });
    console.log(
      `| ${s} | ${world} | ${sums.map(([f, k]) => `${f3(f!)} / ${f3(k!)}`).join(' | ')} | ${(wall / batches).toFixed(1)} |`,
    );
  }

/**
 * What kernel launches cost a plan (simulated): FCP and the baselines' plans of one batch,
 * simulated with the calibration's per-launch overhead and with it set to 0, per phase: kernel MFU
 * (balanced, no communication), compute imbalance and compute ops. The difference is the share of
 * the kernels' time spent on launches (one per batch shape of an op, src/cost/op-cost.ts), which
 * the planner's balance model (kernel time of the tiles) does not see.
 *
 * Run: npx tsx bench/launch-share.ts [--batch bimodal] [--world 16] [--seed 1]
 *                                    [--strategies fcp,magi] [--loader-layout] (FCP in mode (b))
 *                                    [--magi chunk,overlap] (default 4096,3: the tuned magi at 16 ranks)
 *                                    (bytescale: its tuned rules, work-sized groups packed by work)
 */
import { simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import type { Plan } from '../src/plan/types.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const args = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(args, k, d);
const problem = resolveProblem({
  batch: val('--batch', 'bimodal'),
  world: Number(val('--world', '16')),
  tokensPerRank: 32768,
  seed: Number(val('--seed', '1')),
});
const [chunk, overlap] = val('--magi', '4096,3').split(',').map(Number);
const loaderLayout = args.includes('--loader-layout');

/** FCP in the chosen mode, MagiAttention as given, ByteScale with its tuned rules (docs/baselines.md). */
const optionsOf = (s: string): Record<string, unknown> =>
  s === 'fcp'
    ? { loaderLayout }
    : s === 'magi'
      ? { chunkSize: chunk, overlapDegree: overlap }
      : s === 'bytescale'
        ? { bytescaleSizing: 'work', bytescalePacking: 'work', bytescalePow2: false }
        : {};

console.log(
  `launch share (simulated): ${val('--batch', 'bimodal')} ${problem.world} ranks seed ${val('--seed', '1')}${loaderLayout ? ', FCP mode (b)' : ''}`,
);
console.log('strategy  phase     kernel MFU  no launch  launch share  compute imbal  no launch   ops');
for (const s of val('--strategies', 'fcp,magi').split(',')) {
  const plan: Plan = getPlanner(s).plan(problem, optionsOf(s));
  const withL = simulatePlan(plan);
  const noL = simulatePlan(plan, { launchMs: { forward: 0, backward: 0 } });
  for (const dir of ['forward', 'backward'] as const) {
    const a = withL[dir];
    const b = noL[dir];
    console.log(
      `${s.padEnd(9)} ${dir.padEnd(9)} ${a.kernelMfu.toFixed(3).padStart(10)} ${b.kernelMfu.toFixed(3).padStart(10)} ` +
        `${(100 * (1 - a.kernelMfu / b.kernelMfu)).toFixed(1).padStart(12)}% ` +
        `${(100 * a.computeImbalance).toFixed(1).padStart(13)}% ${(100 * b.computeImbalance).toFixed(1).padStart(9)}% ${String(a.ops).padStart(6)}`,
    );
  }
}

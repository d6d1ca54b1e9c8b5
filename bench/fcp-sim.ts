/**
 * Simulated attention MFU of FCP against the baselines, and FCP's ablation, on the simulator's
 * default cluster (hopper-ib) and kernel model.
 *
 * Run: npx tsx bench/fcp-sim.ts [--worlds 16,64,256] [--batches longtail,magi] [--seeds 1]
 *                              [--strategies fcp,ring,bytescale,wlb,magi]
 *      npx tsx bench/fcp-sim.ts --ablation [--worlds 128] [--batches longtail] [--seeds 1]
 *
 * Comparison table: per batch, world and strategy, forward / backward MFU (mean over seeds) and
 * FCP's ratio to the best baseline. Ablation (the paper's order at 128 ranks): no pipeline (every
 * fetch before any compute, one round per group, all-at-once rounds, no compute during the
 * reshuffle) -> + pipeline -> + congestion-free rounds -> + coalescing -> + reshuffle overlap
 * (the default planner).
 */

import { simulatePlan } from '../src/executors/sim/index.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { resolveProblem } from '../src/problem/problem.ts';

interface Args {
  worlds: number[];
  batches: string[];
  seeds: number[];
  strategies: string[];
  ablation: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    worlds: [],
    batches: ['longtail'],
    seeds: [1],
    strategies: ['fcp', 'ring', 'bytescale', 'wlb', 'magi'],
    ablation: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1] ?? '';
    if (k === '--ablation') a.ablation = true;
    else if (k === '--worlds') a.worlds = v.split(',').map(Number);
    else if (k === '--batches') a.batches = v.split(',');
    else if (k === '--seeds') a.seeds = v.split(',').map(Number);
    else if (k === '--strategies') a.strategies = v.split(',');
    else continue;
    if (k !== '--ablation') i++;
  }
  if (a.worlds.length === 0) a.worlds = a.ablation ? [128] : [16, 64, 256];
  return a;
}

function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padStart(w[i]!)).join('  ');
  return [line(head), line(w.map((n) => '-'.repeat(n))), ...rows.map(line)].join('\n');
}

/** Mean forward and backward MFU of a strategy over the seeds. */
function mfu(
  strategy: string,
  batch: string,
  world: number,
  seeds: number[],
  o: FcpPlannerOptions,
): [number, number] {
  let f = 0;
  let b = 0;
  for (const seed of seeds) {
    const problem = resolveProblem({ batch, world, seed });
    const plan = getPlanner(strategy).plan(problem, strategy === 'fcp' ? o : {});
    const r = simulatePlan(plan);
    f += r.forward.mfu;
    b += r.backward.mfu;
  }
  return [f / seeds.length, b / seeds.length];
}

const ABLATION: [string, FcpPlannerOptions][] = [
  ['no pipeline', { noPipeline: true, rounds: 'naive', coalesce: 1, noReshuffleOverlap: true }],
  ['+ pipeline', { rounds: 'naive', coalesce: 1, noReshuffleOverlap: true }],
  ['+ congestion-free rounds', { coalesce: 1, noReshuffleOverlap: true }],
  ['+ coalescing', { noReshuffleOverlap: true }],
  ['+ reshuffle overlap', {}],
];

const a = parseArgs(process.argv.slice(2));
const f3 = (x: number): string => x.toFixed(3);
if (a.ablation) {
  for (const batch of a.batches)
    for (const world of a.worlds) {
      const rows = ABLATION.map(([name, o]) => {
        const [f, b] = mfu('fcp', batch, world, a.seeds, o);
        return [name, f3(f), f3(b)];
      });
      console.log(`\nFCP ablation: ${batch}, ${world} ranks, seeds ${a.seeds.join(',')} (simulated MFU)`);
      console.log(table(['step', 'fwd', 'bwd'], rows));
    }
} else {
  for (const batch of a.batches) {
    const rows: string[][] = [];
    for (const world of a.worlds) {
      const res = a.strategies.map((s) => [s, ...mfu(s, batch, world, a.seeds, {})] as const);
      const fcp = res.find((r) => r[0] === 'fcp');
      let bestF = 0;
      let bestB = 0;
      for (const [s, f, b] of res)
        if (s !== 'fcp') {
          bestF = Math.max(bestF, f);
          bestB = Math.max(bestB, b);
        }
      for (const [s, f, b] of res)
        rows.push([
          String(world),
          s,
          f3(f),
          f3(b),
          s === 'fcp' && fcp && bestF > 0 ? `${(f / bestF).toFixed(2)}x / ${(b / bestB).toFixed(2)}x` : '',
        ]);
    }
    console.log(
      `\nSimulated attention MFU: ${batch}, seeds ${a.seeds.join(',')} (hopper-ib, default kernel model)`,
    );
    console.log(table(['world', 'strategy', 'fwd', 'bwd', 'fcp / best baseline'], rows));
  }
}

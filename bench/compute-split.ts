/**
 * What a phase's compute imbalance is made of (simulated): per rank, the simulator's op times
 * (executors/sim/prepare.ts with src/cost/op-cost.ts, as `fcp simulate` runs them) split into
 * kernel time, launch overheads and empty varlen tiles (the same preparation with those costs set
 * to 0), beside the planner's own view of the rank's work: its tasks' modelled kernel time in that
 * phase alone (kernel-time.ts `taskMs` times the cluster's compute slowdown, no launches; the
 * placement balances forward plus backward in one weight, phase-swaps.ts / token-swap.ts then each
 * phase). Prints, per batch and phase, the imbalance (max / mean - 1) of each, how far the makespan
 * lies above the mean compute, how closely a rank's launch time follows the rows it holds (the
 * correlation and the ms per row), and the busiest ranks with their parts.
 *
 * Found with it (docs/results.md, "Session 31"): mode (a) at 16 ranks, ratio-5920, `longtail` seed
 * 2 forward: the planner's per-phase imbalance is 2.3% after the phase exchanges and launches
 * vary 0.24-0.83 ms per rank (5% of the busiest rank's compute), most on ranks with many short
 * sequences; empty varlen tiles cost nothing there.
 *
 * Run: npx tsx bench/compute-split.ts [--worlds 16] [--seeds 1,2,3] [--batch longtail] [--cluster ratio-5920]
 *                                     [--loader-layout] [--pxn] [--dir forward,backward] [--list 4]
 */

import { imbalance } from '../src/core/stats.ts';
import { ChunkCoster } from '../src/cost/chunks.ts';
import { KernelModel, type KernelOptions } from '../src/cost/kernel.ts';
import { OpCost } from '../src/cost/op-cost.ts';
import { preparePhase } from '../src/executors/sim/prepare.ts';
import { chainsAsGroups } from '../src/plan/chains.ts';
import { KernelTime } from '../src/planners/fcp/kernel-time.ts';
import { argValue, planForReplay, type Replayed, replayPhase } from './fcp-replay.ts';

const args = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(args, k, d);
const worlds = val('--worlds', '16').split(',').map(Number);
const seeds = val('--seeds', '1,2,3').split(',').map(Number);
const dirs = val('--dir', 'forward,backward').split(',') as ('forward' | 'backward')[];
const listN = Number(val('--list', '4'));
const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;
const ms = (x: number): string => x.toFixed(2);

for (const world of worlds)
  for (const seed of seeds) {
    const r = planForReplay({
      batch: val('--batch', 'longtail'),
      world,
      seed,
      clusterName: val('--cluster', 'ratio-5920'),
      network: 'fluid',
      loaderLayout: args.includes('--loader-layout'),
      ...(args.includes('--pxn') ? { routing: 'pxn' as const } : {}),
    });
    const { plan, kernel: k } = r;
    // The simulator's kernel model again with launches (and empty tiles) free, op times through the
    // simulator's own preparation (prepare.ts), so the three columns differ only in those costs.
    const zero = { forward: 0, backward: 0 };
    const ctxWith = (o: KernelOptions): Replayed['ctx'] => {
      const km = new KernelModel(plan.model, {
        calibration: k.calibration,
        peakTflops: k.peakTflops,
        slowdown: k.slowdown,
        policy: k.policy,
        denseMinLen: k.denseMinLen,
        ...o,
      });
      return { ...r.ctx, op: new OpCost(km, plan.mask), chunks: new ChunkCoster(plan, km, true) };
    };
    const variants = [ctxWith({ launchMs: zero }), ctxWith({ launchMs: zero, emptyTileMs: 0 })];
    const tm = new KernelTime(plan.model);
    const t = plan.tasks;
    const causal = plan.mask === 'causal';
    for (const dir of dirs) {
      const c = plan[dir].compute;
      const perRank = (opDur: Float64Array): Float64Array => {
        const out = new Float64Array(world);
        for (let i = 0; i < c.rank.length; i++) out[c.rank[i]!]! += opDur[i]!;
        return out;
      };
      const { prep, run } = replayPhase(r, dir, false);
      const [noLaunch, kernel] = variants.map((ctx) =>
        perRank(preparePhase(ctx, chainsAsGroups(plan[dir]), dir).opDur),
      ) as [Float64Array, Float64Array];
      const full = perRank(prep.opDur);
      const modelled = new Float64Array(world);
      for (let i = 0; i < t.rank.length; i++)
        modelled[t.rank[i]!]! +=
          tm.taskMs(dir, causal, t.qStart[i]!, t.qLength[i]!, t.kvStart[i]!, t.kvLength[i]!) * k.slowdown;
      const launches = full.map((v, i) => v - noLaunch[i]!);
      const empty = noLaunch.map((v, i) => v - kernel[i]!);
      const mean = full.reduce((a, b) => a + b, 0) / world;
      const mode = args.includes('--loader-layout') ? 'b' : 'a';
      console.log(
        `${val('--batch', 'longtail')} ${world} seed ${seed} ${dir} (${mode}): makespan ${ms(run.makespanMs)} ms, ` +
          `${pct(run.makespanMs / mean - 1)} above the mean compute ${ms(mean)}; imbalance: simulated ${pct(imbalance(full))}, ` +
          `without launches ${pct(imbalance(noLaunch))}, kernel only ${pct(imbalance(kernel))}, planner's tasks ${pct(imbalance(modelled))} (simulated)`,
      );
      console.log(
        `  launches per rank ${ms(Math.min(...launches))}-${ms(Math.max(...launches))} ms, empty tiles ${ms(Math.min(...empty))}-${ms(Math.max(...empty))} ms`,
      );
      // Whether launches follow the rows a rank holds (runs of sequences in the home layout): what
      // a launch term per run in the exchanges' loads would model (docs/results.md, "Session 32").
      const rows = new Float64Array(world);
      for (let i = 0; i < plan.homeLayout.rank.length; i++) rows[plan.homeLayout.rank[i]!]! += 1;
      const fit = fitLine(rows, launches);
      console.log(
        `  launches against home rows per rank (${Math.min(...rows)}-${Math.max(...rows)}): r ${fit.r.toFixed(2)}, ${fit.slope.toFixed(3)} ms per row`,
      );
      const order = [...full.keys()].sort((a, b) => full[b]! - full[a]! || a - b);
      for (const q of order.slice(0, listN)) {
        const ops = c.rank.reduce((n, x) => n + (x === q ? 1 : 0), 0);
        console.log(
          `  rank ${q}: ${ms(full[q]!)} ms = kernel ${ms(kernel[q]!)} + launches ${ms(launches[q]!)} + empty tiles ${ms(empty[q]!)}; ` +
            `planner's tasks ${ms(modelled[q]!)} ms; ${ops} ops`,
        );
      }
    }
  }

/** Pearson correlation of y with x and the least-squares slope of y on x (0 where x is constant). */
function fitLine(x: ArrayLike<number>, y: ArrayLike<number>): { r: number; slope: number } {
  const n = x.length;
  let mx = 0;
  let my = 0;
  for (let i = 0; i < n; i++) {
    mx += x[i]! / n;
    my += y[i]! / n;
  }
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (x[i]! - mx) * (y[i]! - my);
    sxx += (x[i]! - mx) ** 2;
    syy += (y[i]! - my) ** 2;
  }
  return { r: sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : 0, slope: sxx > 0 ? sxy / sxx : 0 };
}

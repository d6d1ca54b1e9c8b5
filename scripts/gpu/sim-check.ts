/**
 * Simulator check (issue 6): the simulator's predicted compute time of the replayed ranks against
 * the time the GPU script measured for the same rank programs (no SMs reserved for communication,
 * as in the replay). Reads docs/results-gpu/h200-run*.json, writes docs/results-gpu/sim-check.json.
 *   npx tsx scripts/gpu/sim-check.ts [--run 13 [--mode fused]]
 * Kernel policy `auto` is compared with the runtime's `auto`, `varlen` with its `flash`. No padding
 * is charged (the runtime does not pad ring chunks). Errors are against the measured op time
 * (kernels plus the runtime's gathers and float32 merges) and, where the run was profiled, against
 * the kernel-only time.
 */
import { writeFileSync } from 'node:fs';
import { loadCalibration } from '../../src/cost/calibration.ts';
import { resolveCluster } from '../../src/problem/cluster.ts';
import { dataPath } from '../../src/core/data-dir.ts';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { readPlan } from '../../src/plan/io.ts';
import { readReplayRuns } from './replay-runs.ts';

const root = new URL('../../', import.meta.url).pathname;
// `--run N --mode M`: one later results file (h200-runN.json) and its replay mode M (default
// `fused`, the runtime's defaults), written to sim-check-runN.json; without it, runs 1-3.
const at = process.argv.indexOf('--run');
const run = at >= 0 ? process.argv[at + 1]! : null;
const modeAt = process.argv.indexOf('--mode');
const mode = modeAt >= 0 ? process.argv[modeAt + 1]! : 'fused';
const runs = run === null ? readReplayRuns(root) : readReplayRuns(root, false, [`h200-run${run}.json`], mode);
const calibrations = {
  measured: loadCalibration([dataPath('calibration/h200-measured.json')]),
  shipped: loadCalibration([dataPath('calibration/h200-torch2.11-flash-varlen.json'), dataPath('calibration/h200-torch2.11-sdpa.json')]),
};
const cluster = resolveCluster('hopper-ib', { commSms: 0 });
const rows: Record<string, unknown>[] = [];
console.log('plan               rank      policy  calib     fwd meas  fwd sim  err    bwd meas  bwd sim  err');
for (const [name, list] of runs) {
  const plan = readPlan(`${root}scripts/gpu/plans/${name}.json.gz`);
  for (const [calName, calibration] of Object.entries(calibrations))
    for (const policy of ['auto', 'varlen'] as const) {
      const sim = simulatePlan(plan, { cluster, calibration, kernel: policy, padding: false });
      for (const r of list.filter((x) => x.kernel === (policy === 'auto' ? 'auto' : 'flash'))) {
        const f = sim.forward.computeMs[r.rank]!;
        const b = sim.backward.computeMs[r.rank]!;
        const ko = r.kernel_only_ms ?? undefined;
        const kernelMs = (dir: string) => (ko ? Object.entries(ko).reduce((t, [k, v]) => (k.startsWith(dir) ? t + v : t), 0) : null);
        const kf = kernelMs('forward');
        const kb = kernelMs('backward');
        const row = {
          plan: name,
          which: r.which,
          rank: r.rank,
          policy,
          calibration: calName,
          forwardMeasuredMs: r.forward_ms,
          forwardSimMs: f,
          forwardError: f / r.forward_ms - 1,
          backwardMeasuredMs: r.backward_ms,
          backwardSimMs: b,
          backwardError: b / r.backward_ms - 1,
          forwardKernelMs: kf,
          forwardKernelError: kf ? f / kf - 1 : null,
          backwardKernelMs: kb,
          backwardKernelError: kb ? b / kb - 1 : null,
          run: r.run,
        };
        rows.push(row);
        const pct = (x: number) => `${(100 * x).toFixed(0).padStart(4)}%`;
        console.log(
          `${name.padEnd(18)} ${r.which.padEnd(8)} ${policy.padEnd(7)} ${calName.padEnd(8)} ${r.forward_ms.toFixed(1).padStart(8)} ${f.toFixed(1).padStart(8)} ${pct(row.forwardError)} ${r.backward_ms.toFixed(1).padStart(9)} ${b.toFixed(1).padStart(8)} ${pct(row.backwardError)}`,
        );
      }
    }
}
writeFileSync(`${root}docs/results-gpu/sim-check${run === null ? '' : `-run${run}`}.json`, `${JSON.stringify({ cluster: 'hopper-ib, commSms 0, no padding', rows }, null, 1)}\n`);

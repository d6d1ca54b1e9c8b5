/**
 * The kernel model against the GPU runtime: for every rank program the H200 script replayed
 * (docs/results-gpu/h200-run*.json, plans in scripts/gpu/plans), the simulator's compute time of
 * that rank (default calibration, no SMs reserved for communication, no padding: the runtime does
 * not pad) against the measured kernel-only time and the measured op time (kernels plus the
 * runtime's gathers and float32 merges). Prints a table and the RMS error against kernel time.
 *
 *   npx tsx bench/simulator-check.ts
 */
import { readReplayRuns } from '../scripts/gpu/replay-runs.ts';
import { simulatePlan } from '../src/executors/sim/index.ts';
import { readPlan } from '../src/plan/io.ts';
import { resolveCluster } from '../src/problem/cluster.ts';

const root = new URL('../', import.meta.url).pathname;
const runs = readReplayRuns(root, true);
if (runs.size === 0) {
  console.log('no GPU replay results in docs/results-gpu/');
  process.exit(0);
}
const cluster = resolveCluster('hopper-ib', { commSms: 0 });
const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(0)}%`;
console.log('plan             rank      policy   phase     kernel ms   op ms    sim ms   vs kernel  vs op');
const errors: number[] = [];
for (const [name, list] of runs) {
  const plan = readPlan(`${root}scripts/gpu/plans/${name}.json.gz`);
  for (const policy of ['auto', 'varlen'] as const) {
    const sim = simulatePlan(plan, { cluster, kernel: policy, padding: false });
    for (const r of list.filter((x) => x.kernel === (policy === 'auto' ? 'auto' : 'flash')))
      for (const dir of ['forward', 'backward'] as const) {
        const ko = r.kernel_only_ms ?? undefined;
        const kernel = ko
          ? Object.entries(ko).reduce((s, [k, v]) => (k.startsWith(dir) ? s + v : s), 0)
          : Number.NaN;
        const op = dir === 'forward' ? r.forward_ms : r.backward_ms;
        const t = sim[dir].computeMs[r.rank]!;
        if (kernel > 0) errors.push(t / kernel - 1);
        console.log(
          `${name.padEnd(16)} ${r.which.padEnd(9)} ${policy.padEnd(8)} ${dir.padEnd(9)} ${(kernel > 0 ? kernel.toFixed(1) : '-').padStart(9)} ${op.toFixed(1).padStart(7)} ${t.toFixed(1).padStart(8)} ${(kernel > 0 ? pct(t / kernel - 1) : '-').padStart(10)} ${pct(t / op - 1).padStart(6)}`,
        );
      }
  }
}
const rms = Math.sqrt(errors.reduce((s, e) => s + e * e, 0) / Math.max(1, errors.length));
console.log(
  `\nagainst kernel-only time: ${errors.length} rank-phases, RMS error ${(100 * rms).toFixed(1)}%, worst ${(100 * Math.max(...errors.map(Math.abs))).toFixed(0)}%`,
);

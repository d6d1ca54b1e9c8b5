/**
 * The simulator's laws (src/executors/sim/laws.ts) on seeded random plans of every strategy: worlds
 * 8-48 on nodes of 4 or 8 GPUs (last nodes often partly filled), every batch generator, both
 * cluster presets of the grid and the torus, direct or PXN routing, fluid or contention, causal or
 * full, FCP in both modes. Each case simulates its plan three ways for the laws, and under both
 * network models to count where contention runs faster than fluid (not a law: laws.ts); a law broken beyond its slack
 * is printed with the case and counted, and each law's nearest approach (or worst excess within
 * the slack: fair sharing's anomalies, laws.ts) is printed at the end. Exit code 1 when any law broke.
 *
 * Run: npx tsx bench/fuzz-sim.ts [--cases 100] [--first 0] [--large] (64-256 ranks, 16-32K tokens a rank,
 *                                  no torus)
 */
import { Rng } from '../src/core/rng.ts';
import { simulatePlan } from '../src/executors/sim/index.ts';
import { simLawChecks } from '../src/executors/sim/laws.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const cases = Number(argValue(argv, '--cases', '100'));
const first = Number(argValue(argv, '--first', '0'));
/** `--large`: the grid's scale instead (64-256 ranks, 16-32K tokens a rank). */
const large = argv.includes('--large');
const STRATEGIES = ['fcp', 'ring', 'bytescale', 'wlb', 'magi'];
const BATCHES = ['longtail', 'magi', 'bimodal', 'uniform', 'weak-longtail', 'fixed'];
const CLUSTERS = ['hopper-ib', 'ratio-5920', 'torus'];

const t0 = performance.now();
let bad = 0;
/** Phases simulated under both network models, those faster under contention, and the most so. */
let phases = 0;
let faster = 0;
let fastest = { gain: 0, label: '' };
/** Per law, the case that came nearest to breaking it (or broke it most). */
const worst = new Map<string, { by: number; label: string }>();
for (let i = first; i < first + cases; i++) {
  const r = new Rng(5000 + i);
  const pick = <T>(xs: readonly T[]): T => xs[r.int(0, xs.length - 1)]!;
  const strategy = pick(STRATEGIES);
  const world = large ? r.int(64, 256) : r.int(8, 48);
  const gpusPerNode = pick([4, 8]);
  const batch = pick(BATCHES);
  // The torus at 200+ ranks simulates for many minutes a plan (multi-hop flows): not in --large.
  const clusterName = pick(large ? CLUSTERS.slice(0, 2) : CLUSTERS);
  const routing = r.next() < 0.5 ? ('pxn' as const) : ('direct' as const);
  const network = r.next() < 0.3 ? ('contention' as const) : ('fluid' as const);
  const mask = r.next() < 0.8 ? ('causal' as const) : ('full' as const);
  const modeB = strategy === 'fcp' && r.next() < 0.5;
  const cluster = resolveCluster(clusterName, clusterName === 'torus' ? {} : { network, routing });
  const problem = resolveProblem({
    batch,
    world,
    tokensPerRank: large ? pick([16384, 32768]) : pick([2048, 4096, 8192]),
    seed: 1 + i,
    cluster,
    gpusPerNode,
    mask,
  });
  const label = `#${i} ${strategy}${modeB ? ' (b)' : ''} ${batch} world ${world} (${gpusPerNode}/node) ${clusterName} ${routing} ${network} ${mask}`;
  let plan: ReturnType<ReturnType<typeof getPlanner>['plan']>;
  try {
    plan = getPlanner(strategy).plan(problem, modeB ? { loaderLayout: true } : {});
  } catch (e) {
    const coded = (e as { issues?: { code: string }[] }).issues;
    if (!coded) throw e;
    console.log(`refused  ${label}: ${coded.map((x) => x.code).join(', ')}`);
    continue;
  }
  for (const c of simLawChecks(plan, cluster)) {
    if (c.by > (worst.get(c.law)?.by ?? Number.NEGATIVE_INFINITY)) worst.set(c.law, { by: c.by, label });
    if (c.by <= c.slack) continue;
    bad++;
    console.log(`BAD      ${label} ${c.phase}: ${c.law}, by ${(c.by * 100).toFixed(4)}% (${c.detail})`);
  }
  // Not a law (laws.ts): the contention model against the fluid one, counted where it is faster.
  if (clusterName !== 'torus') {
    const sim = (network: 'fluid' | 'contention') =>
      simulatePlan(plan, { cluster: { ...cluster, network }, skipValidation: true });
    const [f, c] = [sim('fluid'), sim('contention')];
    for (const phase of ['forward', 'backward'] as const) {
      phases++;
      const gain = (f[phase].makespanMs - c[phase].makespanMs) / f[phase].makespanMs;
      if (gain <= 1e-9) continue;
      faster++;
      if (gain > fastest.gain) fastest = { gain, label: `${label} ${phase}` };
    }
  }
  if ((i - first + 1) % 25 === 0)
    process.stderr.write(
      `fuzz-sim: ${i - first + 1}/${cases} cases, ${bad} broken, ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
    );
}
console.log(
  `fuzz-sim: cases ${first}-${first + cases - 1}: ${bad} laws broken, ${((performance.now() - t0) / 1000).toFixed(0)} s`,
);
for (const [law, w] of worst)
  console.log(
    `  ${law}: worst ${(w.by * 100).toFixed(4)}% of the makespan (${w.label}; > 0: exceeded, within its slack or not)`,
  );
console.log(
  `  not a law: contention faster than fluid in ${faster} of ${phases} phases` +
    (faster > 0 ? `, most ${(fastest.gain * 100).toFixed(2)}% (${fastest.label})` : ''),
);
process.exitCode = bad > 0 ? 1 : 0;

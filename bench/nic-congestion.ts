/**
 * NIC congestion of FCP's plans under NCCL's PXN routing, with and without the rounds split for the
 * rail NICs (src/planners/fcp/transfers/rail-rounds.ts; `--no-rail-rounds` keeps the rounds as
 * placed): per batch, world and mode, the rounds of each phase, how many of those that cross nodes
 * put two or more messages on one NIC, and the worst count (the report's NIC congestion,
 * src/plan/report-nic.ts), and the most messages into one GPU's NVLink port in a round (its
 * NVLink port congestion: a node mate's message and one it forwards across nodes under PXN). The split moves no transfer to another group, so it changes no simulated
 * time while groups are not chained (`commCoalesce` >= the group size, the default).
 *
 * Run: npx tsx bench/nic-congestion.ts [--worlds 16,32,128] [--batches longtail,magi,bimodal] [--seed 1]
 */
import { planReport } from '../src/plan/report.ts';
import type { Plan } from '../src/plan/types.ts';
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import { resolveCluster } from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const args = process.argv.slice(2);
const list = (k: string, d: string): string[] => argValue(args, k, d).split(',');
const seed = Number(argValue(args, '--seed', '1'));
const G = 8;
const route = { gpusPerNode: G, routing: 'pxn' as const };

/** Rounds crossing nodes, and of them those with two or more messages on one PXN NIC. */
function sharedRounds(plan: Plan, dir: 'forward' | 'backward'): { cross: number; shared: number } {
  const t = plan[dir].transfers;
  const perRound = new Map<number, Map<number, Set<string>>>();
  for (let i = 0; i < t.src.length; i++) {
    const s = t.src[i]!;
    const d = t.dst[i]!;
    if (Math.floor(s / G) === Math.floor(d / G)) continue;
    const nic = Math.floor(s / G) * G + (d % G);
    const r = t.round[i]!;
    const byNic = perRound.get(r) ?? new Map<number, Set<string>>();
    const messages = byNic.get(nic) ?? new Set<string>();
    messages.add(`${s} ${d}`);
    byNic.set(nic, messages);
    perRound.set(r, byNic);
  }
  let shared = 0;
  for (const byNic of perRound.values()) if ([...byNic.values()].some((m) => m.size > 1)) shared++;
  return { cross: perRound.size, shared };
}

console.log(
  'batch     GPUs  mode  phase     rounds (as placed -> split)  crossing rounds sharing a NIC  NIC congestion  NVLink port congestion',
);
for (const batch of list('--batches', 'longtail,magi,bimodal'))
  for (const world of list('--worlds', '16,32,128').map(Number))
    for (const loaderLayout of [false, true]) {
      const problem = resolveProblem({
        batch,
        world,
        seed,
        tokensPerRank: 32768,
        cluster: resolveCluster('hopper-ib', { routing: 'pxn' }),
      });
      const base: FcpPlannerOptions = loaderLayout ? { loaderLayout: true } : {};
      const ablated: FcpPlannerOptions = { ...base, noRailRounds: true };
      const placed = fcpPlanner.plan(problem, ablated);
      const split = fcpPlanner.plan(problem, base);
      const a = planReport(placed, route);
      const b = planReport(split, route);
      for (const dir of ['forward', 'backward'] as const) {
        const sa = sharedRounds(placed, dir);
        const sb = sharedRounds(split, dir);
        console.log(
          [
            batch.padEnd(9),
            String(world).padStart(4),
            `  (${loaderLayout ? 'b' : 'a'})`,
            `  ${dir.padEnd(8)}`,
            `  ${String(a[dir].rounds).padStart(5)} -> ${String(b[dir].rounds).padEnd(5)}`,
            `               ${`${sa.shared}/${sa.cross}`.padStart(8)} -> ${`${sb.shared}/${sb.cross}`.padEnd(8)}`,
            `      ${a[dir].nicCongestion} -> ${b[dir].nicCongestion}`,
            `           ${a[dir].nvlinkCongestion} -> ${b[dir].nvlinkCongestion}`,
          ].join(''),
        );
      }
    }

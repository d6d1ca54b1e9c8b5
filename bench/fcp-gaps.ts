/**
 * Where a rank's idle time goes (simulated): for one FCP plan per world, replays each phase on the
 * simulator and splits every rank's idle time into the wait before its first op, the waits between
 * ops and the tail after its last op, each charged to the kinds of transfer in the group entry the
 * op waited for (or, for the tail, the entries still open after the last op). Prints the mean over
 * ranks and the critical rank (latest end), with its wait list and its bytes across nodes as time
 * at the NIC's bandwidth beside the busiest NIC's (a volume bound: a rank can wait for K/V while
 * every NIC carries less than its compute); `--rank R` also prints rank R's group entries (each
 * flow: kind, sender > receiver, MB, whether it waits for an op) and its ops.
 *
 * Run: npx tsx bench/fcp-gaps.ts [--worlds 16,64] [--batch longtail] [--seeds 1,2,3] [--loader-layout] [--pxn] [--nic-swaps]
 *                                [--dir forward|backward] [--list 12] [--rank R] [--cluster hopper-ib]
 *                                [--network fluid|contention]
 */

import { sameNode } from '../src/core/nodes.ts';
import { argValue, networkArg, planForReplay, replayPhase } from './fcp-replay.ts';

const args = process.argv.slice(2);
const val = (k: string, d: string): string => argValue(args, k, d);
const worlds = val('--worlds', '16,64').split(',').map(Number);
const seeds = val('--seeds', '1').split(',').map(Number);
const showRank = Number(val('--rank', '-1'));
const batch = val('--batch', 'longtail');
const dirs = val('--dir', 'forward,backward').split(',') as ('forward' | 'backward')[];
const listN = Number(val('--list', '12'));
const loaderLayout = args.includes('--loader-layout');
// The network model the plan is made for and replayed on (the planner's estimate reads it too).
const network = networkArg(args, 'fcp-gaps');
const KINDS = ['in', 'kv', 'out', 'dkv'];
const f1 = (x: number): string => x.toFixed(1);

/** Kinds of the flows of one entry, as a label ("in+kv"). */
const kindsOf = (p: ReturnType<typeof replayPhase>['prep'], e: number): { label: string; mask: number } => {
  let mask = 0;
  for (let k = p.entryFlowOff[e]!; k < p.entryFlowOff[e + 1]!; k++)
    mask |= 1 << p.flowKind[p.entryFlows[k]!]!;
  return { label: KINDS.filter((_, i) => mask & (1 << i)).join('+') || '-', mask };
};

for (const world of worlds)
  for (const seed of seeds) {
    const replayed = planForReplay({
      batch,
      world,
      seed,
      clusterName: val('--cluster', 'hopper-ib'),
      network,
      loaderLayout,
      ...(args.includes('--pxn') ? { routing: 'pxn' as const } : {}),
      ...(args.includes('--nic-swaps') ? { options: { nicSwaps: true } } : {}),
    });
    const plan = replayed.plan;
    for (const dir of dirs) {
      const { prep: p, run } = replayPhase(replayed, dir, network === 'contention');
      const head = new Float64Array(world);
      const gaps = new Float64Array(world);
      const tail = new Float64Array(world);
      const byKind = new Map<string, number>();
      const add = (k: string, v: number): void => {
        byKind.set(k, (byKind.get(k) ?? 0) + v);
      };
      let crit = 0;
      for (let r = 0; r < world; r++) if (run.endMs[r]! > run.endMs[crit]!) crit = r;
      const critList: string[] = [];
      for (let r = 0; r < world; r++) {
        let prev = 0;
        for (let k = p.rankOpOff[r]!; k < p.rankOpOff[r + 1]!; k++) {
          const op = p.rankOps[k]!;
          const gap = run.opStart[op]! - prev;
          const w = p.opWait[op]!;
          if (gap > 1e-6) {
            const kinds = w >= 0 ? kindsOf(p, w).label : 'none';
            add(`${prev === 0 ? 'head' : 'gap'} ${kinds}`, gap);
            if (prev === 0) head[r] = gap;
            else gaps[r]! += gap;
            if (r === crit)
              critList.push(
                `  wait ${f1(gap)} ms at ${f1(prev)} for group ${w >= 0 ? p.entryGroup[w] : -1} (${kinds}, entered ${w >= 0 ? f1(run.entryStart[w]!) : '-'})`,
              );
          }
          prev = run.opEnd[op]!;
        }
        tail[r] = run.endMs[r]! - prev;
        if (tail[r]! > 1e-6) {
          // Kinds of the entries still open after the last op.
          let mask = 0;
          for (let e = p.rankEntryOff[p.streams * r]!; e < p.rankEntryOff[p.streams * (r + 1)]!; e++)
            if (run.entryEnd[e]! > prev + 1e-9) mask |= kindsOf(p, e).mask;
          add(`tail ${KINDS.filter((_, i) => mask & (1 << i)).join('+')}`, tail[r]!);
          if (r === crit) critList.push(`  tail ${f1(tail[r]!)} ms after ${f1(prev)}`);
        }
      }
      const mean = (a: Float64Array): string => f1(a.reduce((s, v) => s + v, 0) / world);
      console.log(
        `${batch} ${world} seed ${seed} ${dir}${loaderLayout ? ' (b)' : ' (a)'}: makespan ${f1(run.makespanMs)} ms, compute max ${f1(Math.max(...run.computeMs))}; idle per rank mean: head ${mean(head)}, gaps ${mean(gaps)}, tail ${mean(tail)} (simulated)`,
      );
      const kinds = [...byKind.entries()].sort((a, b) => b[1] - a[1]);
      console.log(
        `  idle by cause (ms per rank): ${kinds.map(([k, v]) => `${k} ${f1(v / world)}`).join(', ')}`,
      );
      console.log(
        `  critical rank ${crit}: end ${f1(run.endMs[crit]!)}, compute ${f1(run.computeMs[crit]!)}, head ${f1(head[crit]!)}, gaps ${f1(gaps[crit]!)}, tail ${f1(tail[crit]!)}`,
      );
      for (const line of critList.slice(0, listN)) console.log(line);
      console.log(`  ${nicLine(p, replayed.cluster, crit)}`);
      if (showRank >= 0 && showRank < world) printRank(p, run, plan[dir].compute, showRank);
    }
  }

/**
 * Each rank's bytes across nodes, sent and received, as time at its NIC's bandwidth (a volume
 * bound, not a schedule): the critical rank's, the busiest NIC's and the mean of the ranks' larger
 * direction.
 */
function nicLine(
  p: ReturnType<typeof replayPhase>['prep'],
  cluster: { gpusPerNode: number; nicGBps: number },
  crit: number,
): string {
  const W = p.world;
  const out = new Float64Array(W);
  const inn = new Float64Array(W);
  for (let f = 0; f < p.flowSrc.length; f++) {
    const s = p.flowSrc[f]!;
    const d = p.flowDst[f]!;
    if (sameNode(s, d, cluster.gpusPerNode)) continue;
    out[s]! += p.flowBytes[f]!;
    inn[d]! += p.flowBytes[f]!;
  }
  const perMs = cluster.nicGBps * 1e6;
  const ms = (r: number): number => Math.max(out[r]!, inn[r]!) / perMs;
  let busiest = 0;
  let sum = 0;
  for (let r = 0; r < W; r++) {
    sum += ms(r);
    if (ms(r) > ms(busiest)) busiest = r;
  }
  return `NIC volume (bytes across nodes at ${cluster.nicGBps} GB/s): critical rank sends ${f1(out[crit]! / perMs)} ms, receives ${f1(inn[crit]! / perMs)} ms; busiest NIC rank ${busiest} ${f1(ms(busiest))} ms; mean ${f1(sum / W)} ms`;
}

/** Rank r's group entries (flows with kind, ends, MB, op dependency) and its ops, simulated times. */
function printRank(
  p: ReturnType<typeof replayPhase>['prep'],
  run: ReturnType<typeof replayPhase>['run'],
  c: { after: Int32Array; taskOffsets: Int32Array },
  r: number,
): void {
  for (let e = p.rankEntryOff[p.streams * r]!; e < p.rankEntryOff[p.streams * (r + 1)]!; e++) {
    const flows: string[] = [];
    for (let k = p.entryFlowOff[e]!; k < p.entryFlowOff[e + 1]!; k++) {
      const f = p.entryFlows[k]!;
      const dep = p.flowDeps[f]! > 0 ? '(op)' : '';
      flows.push(
        `${KINDS[p.flowKind[f]!]}:${p.flowSrc[f]}>${p.flowDst[f]}:${(p.flowBytes[f]! / 1e6).toFixed(0)}MB${dep}`,
      );
    }
    console.log(
      `  group ${p.entryGroup[e]} ${f1(run.entryStart[e]!)}-${f1(run.entryEnd[e]!)} ms: ${flows.join(' ')}`,
    );
  }
  for (let k = p.rankOpOff[r]!; k < p.rankOpOff[r + 1]!; k++) {
    const op = p.rankOps[k]!;
    const n = c.taskOffsets[op + 1]! - c.taskOffsets[op]!;
    console.log(
      `  op ${op} after ${c.after[op]} ${f1(run.opStart[op]!)}-${f1(run.opEnd[op]!)} ms, ${n} tasks`,
    );
  }
}

/**
 * What bench/fcp-gaps.ts and bench/fcp-timeline.ts share: reading `--key value` arguments, planning
 * one FCP batch and replaying one of its phases on the simulator (the same engine `fcp simulate`
 * runs, one phase at a time, so a bench can read per-op and per-entry times).
 */

import { basename } from 'node:path';
import { ChunkCoster } from '../src/cost/chunks.ts';
import { KernelModel } from '../src/cost/kernel.ts';
import { Network } from '../src/cost/network.ts';
import { OpCost } from '../src/cost/op-cost.ts';
import { runPhase } from '../src/executors/sim/engine.ts';
import { preparePhase } from '../src/executors/sim/prepare.ts';
import { RATE_DEFAULTS } from '../src/executors/sim/rates.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { chainsAsGroups } from '../src/plan/chains.ts';
import type { Plan } from '../src/plan/types.ts';
import type { FcpPlannerOptions } from '../src/planners/fcp/options.ts';
import {
  type ClusterSpec,
  computeSlowdown,
  NETWORK_MODELS,
  type NetworkModel,
  resolveCluster,
} from '../src/problem/cluster.ts';
import { resolveProblem } from '../src/problem/problem.ts';

/** The value after flag `k` in `args`, or `d` when the flag is absent. */
export function argValue(args: readonly string[], k: string, d: string): string {
  const i = args.indexOf(k);
  return i >= 0 ? args[i + 1]! : d;
}

/**
 * The network model of `--network` in `args` (default fluid); any other name than
 * NETWORK_MODELS' is one line naming `bench` and exit 2.
 */
export function networkArg(args: readonly string[], bench: string): NetworkModel {
  const m = argValue(args, '--network', 'fluid');
  if (!(NETWORK_MODELS as readonly string[]).includes(m)) {
    console.error(`${bench}: --network must be ${NETWORK_MODELS.join(' or ')} (got '${m}')`);
    process.exit(2);
  }
  return m as NetworkModel;
}

/** The batches a quality bench sweeps: `--batches` kinds x `--worlds` x `--seeds`, under `--network`. */
export interface BatchGrid {
  readonly batches: string[];
  readonly worlds: number[];
  readonly seeds: number[];
  readonly network: NetworkModel;
}

/** Reads {@link BatchGrid} from `args`, with the bench's own default worlds and seeds (lists: `a,b,c`). */
export function batchGrid(args: readonly string[], worlds: string, seeds: string): BatchGrid {
  const list = (k: string, d: string): string[] => argValue(args, k, d).split(',');
  return {
    batches: list('--batches', 'longtail,magi,bimodal'),
    worlds: list('--worlds', worlds).map(Number),
    seeds: list('--seeds', seeds).map(Number),
    network: networkArg(args, basename(process.argv[1] ?? 'bench', '.ts')),
  };
}

/** One planned batch with the models a replay needs. */
export interface Replayed {
  readonly plan: Plan;
  readonly cluster: ClusterSpec;
  readonly kernel: KernelModel;
  readonly net: Network;
  readonly ctx: Parameters<typeof preparePhase>[0];
}

/** What to plan: a generated batch on a named cluster, FCP in mode (a) or (b). */
export interface ReplaySpec {
  readonly batch: string;
  readonly world: number;
  readonly seed: number;
  readonly clusterName: string;
  readonly network: NetworkModel;
  readonly loaderLayout: boolean;
  /** NCCL routing across nodes (default: the preset's). */
  readonly routing?: 'direct' | 'pxn';
  /** Planner options beside the mode. */
  readonly options?: Partial<FcpPlannerOptions>;
}

/** Plans `spec` with FCP and builds the kernel, network and chunk models of the simulator. */
export function planForReplay(spec: ReplaySpec): Replayed {
  const cluster = resolveCluster(spec.clusterName, {
    network: spec.network,
    ...(spec.routing !== undefined ? { routing: spec.routing } : {}),
  });
  const problem = resolveProblem({ batch: spec.batch, world: spec.world, seed: spec.seed, cluster });
  const plan = getPlanner('fcp').plan(problem, {
    ...(spec.options ?? {}),
    ...(spec.loaderLayout ? { loaderLayout: true } : {}),
  });
  const kernel = new KernelModel(plan.model, {
    peakTflops: cluster.peakTflops,
    slowdown: computeSlowdown(cluster),
    policy: 'auto',
  });
  const net = new Network(cluster, plan.world);
  const ctx = {
    plan,
    network: net,
    op: new OpCost(kernel, plan.mask),
    chunks: new ChunkCoster(plan, kernel, true),
  };
  return { plan, cluster, kernel, net, ctx };
}

/**
 * Replays phase `dir` of a planned batch. `contention`: apply the cluster's contention model when
 * its network has one (false: the fluid model whatever the cluster says).
 */
export function replayPhase(
  r: Replayed,
  dir: 'forward' | 'backward',
  contention: boolean,
): { prep: ReturnType<typeof preparePhase>; run: ReturnType<typeof runPhase> } {
  const prep = preparePhase(r.ctx, chainsAsGroups(r.plan[dir]), dir);
  const c =
    contention && r.net.hasContention() ? { mask: r.net.contended, loss: r.cluster.contentionLoss } : null;
  const run = runPhase(prep, r.net.capacity, RATE_DEFAULTS, c);
  return { prep, run };
}

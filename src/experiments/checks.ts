/**
 * The demo's view of the other components: the validator's rule-6 report, the simulator, and the
 * CPU runtime's numerical check, each reduced to the plain numbers the results file keeps. The
 * pipeline talks to them only through this module.
 */

import { CpuWorkerPool } from '../executors/cpu/pool.ts';
import { randomInputs } from '../executors/inputs.ts';
import { compareOutputs, type ReferenceOutputs, referenceAttention } from '../executors/reference.ts';
import { getExecutor } from '../executors/registry.ts';
import { simulatePlan } from '../executors/sim/index.ts';
import type { SequenceInputs } from '../executors/types.ts';
import { partLength } from '../plan/parts.ts';
import { residentKvPeak } from '../plan/report-resident.ts';
import type { Mask, ModelShape, Plan } from '../plan/types.ts';
import { validatePlan } from '../plan/validate.ts';
import { CLUSTER_NAMES, resolveCluster } from '../problem/cluster.ts';
import type { NumericsRun, RankMemory, StrategyRun } from '../report/results.ts';
import type { RawEvent } from '../report/timeline.ts';

/** Names of the simulator's cluster presets. */
export function clusterNames(): string[] {
  return [...CLUSTER_NAMES];
}

/** The validator's verdict and rule-6 numbers of a plan. */
export type PlanCheck = Pick<
  StrategyRun,
  | 'valid'
  | 'issueCodes'
  | 'issueCount'
  | 'computeImbalance'
  | 'commImbalance'
  | 'bytes'
  | 'totalBytes'
  | 'rounds'
  | 'groups'
  | 'congestion'
  | 'peakResidentTokens'
>;

/** Validates a plan (rules 1-5) and keeps its rule-6 report. */
export function checkPlan(plan: Plan): PlanCheck {
  const { issues, report, omitted } = validatePlan(plan);
  const bytes: PlanCheck['bytes'] = [];
  for (const phase of ['forward', 'backward'] as const)
    for (const kind of ['in', 'kv', 'dkv', 'out'] as const)
      bytes.push({ phase, kind, bytes: report[phase].bytes[kind] });
  return {
    valid: issues.length === 0,
    issueCodes: [...new Set(issues.map((i) => i.code))].slice(0, 10),
    issueCount: issues.length + omitted,
    computeImbalance: report.computeImbalance,
    commImbalance: report.commImbalance,
    bytes,
    totalBytes: report.totalBytes,
    rounds: { forward: report.forward.rounds, backward: report.backward.rounds },
    groups: { forward: report.forward.groups, backward: report.backward.groups },
    congestion: { forward: report.forward.congestion, backward: report.backward.congestion },
    peakResidentTokens: report.peakResidentTokens,
  };
}

const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : {};

/**
 * The configuration a plan's planner chose or was given, in a few words, from `plan.meta` (each
 * planner records its choices there): FCP's block size and knobs, ring's variant, ByteScale's ring
 * groups, Magi's chunk size and overlap, and for wlb which of ring and bytescale it picked.
 * Undefined when the meta says nothing the report knows.
 */
export function configOf(plan: Plan): string | undefined {
  const m = obj(plan.meta);
  const planner = typeof m.planner === 'string' ? m.planner : plan.strategy;
  if (planner === 'wlb') {
    const w = obj(m.wlb);
    const est = obj(w.estimateMs);
    const ms = (x: unknown): string => (typeof x === 'number' ? `${x.toFixed(1)} ms` : '?');
    const inner = configOf({ ...plan, meta: { ...m, planner: w.chosen } });
    return `chose ${String(w.chosen)} (${String(w.estimator)} estimate: ring ${ms(est.ring)}, bytescale ${ms(est.bytescale)})${inner ? `: ${inner}` : ''}`;
  }
  if (planner === 'fcp') {
    const o = obj(m.options);
    const off = [
      o.noPipeline === true ? 'no pipeline' : '',
      o.rounds === 'naive' ? 'naive rounds' : '',
      o.noReshuffleOverlap === true ? 'no reshuffle overlap' : '',
      o.noLocality === true ? 'no locality' : '',
      o.fixedBlocks === true ? 'fixed blocks' : '',
    ].filter((x) => x !== '');
    return `blocks ${String(o.blockSize)}, coalesce ${String(o.coalesce)}, balance ${String(o.balance)}${off.length ? `, ${off.join(', ')}` : ''}`;
  }
  if (planner === 'ring') return `${String(m.variant)}, padded to multiples of ${String(m.padTo)}`;
  if (planner === 'bytescale') {
    const sizes = Array.isArray(m.ringGroupSizes) ? m.ringGroupSizes : [];
    const shown = sizes.length > 6 ? `${sizes.slice(0, 6).join(', ')}, ...` : sizes.join(', ');
    return `${String(m.ringGroups)} ring groups (sizes ${shown || '-'}), ${String(m.singleRankSequences)} sequences whole on one rank`;
  }
  if (planner === 'magi')
    return `chunks ${String(m.chunkSize)}, overlap degree ${String(m.overlapDegree)}, ${String(m.backend)}`;
  return undefined;
}

/**
 * Per-rank memory of a plan in tokens: home tokens (the home layout, chunk rows summed over their
 * set) and home plus the most K/V tokens held at once from `kv` receptions, the larger phase (the
 * validator's resident-K/V model, src/plan/report-resident.ts).
 */
export function memoryOf(plan: Plan, limitTokens: number): RankMemory {
  const W = plan.world;
  const home = new Float64Array(W);
  const h = plan.homeLayout;
  for (let i = 0; i < h.rank.length; i++) home[h.rank[i]!]! += h.length[i]!;
  const sets = plan.seqSets;
  const cache = new Map<string, number>();
  const chunkTokens = (set: number, parts: number, part: number): number => {
    const key = `${set}/${parts}/${part}`;
    let t = cache.get(key);
    if (t === undefined) {
      t = 0;
      if (sets)
        for (let j = sets.offsets[set]!; j < sets.offsets[set + 1]!; j++)
          t += partLength(plan.sequences[sets.seqs[j]!]!, parts, part);
      cache.set(key, t);
    }
    return t;
  };
  const hc = plan.homeChunks;
  if (hc)
    for (let i = 0; i < hc.rank.length; i++)
      home[hc.rank[i]!]! += chunkTokens(hc.set[i]!, hc.parts[i]!, hc.part[i]!);
  const fwd = residentKvPeak(plan, plan.forward, chunkTokens);
  const bwd = residentKvPeak(plan, plan.backward, chunkTokens);
  const peak = Array.from(home, (x, r) => x + Math.max(fwd[r]!, bwd[r]!));
  return { strategy: plan.strategy, world: W, limitTokens, home: Array.from(home), peak };
}

/** What the report keeps of a simulation. */
export interface SimNumbers {
  mfuForward: number;
  mfuBackward: number;
  forwardMs: number;
  backwardMs: number;
  /** Per-rank events per phase (times from the phase's start, ms), when a trace was asked for. */
  trace?: { forward: RawEvent[]; backward: RawEvent[] };
}

interface ChromeEvent {
  name?: string;
  ph?: string;
  pid?: number;
  tid?: number;
  ts?: number;
  dur?: number;
  cat?: string;
}

/**
 * Per-rank events of the simulator's Chrome trace: thread 1 is the compute stream, thread 2 the
 * communication stream (one event per rank and comm group, named `... (in+kv)` after the kinds it
 * carries). The backward phase follows the forward on the trace's clock; it is shifted back to 0.
 */
export function eventsOfTrace(
  trace: unknown,
  forwardMs: number,
): { forward: RawEvent[]; backward: RawEvent[] } {
  const out = { forward: [] as RawEvent[], backward: [] as RawEvent[] };
  const events = (trace as { traceEvents?: ChromeEvent[] } | undefined)?.traceEvents ?? [];
  for (const e of events) {
    if (e.ph !== 'X' || (e.cat !== 'forward' && e.cat !== 'backward')) continue;
    if (typeof e.pid !== 'number' || typeof e.ts !== 'number' || typeof e.dur !== 'number') continue;
    const shift = e.cat === 'backward' ? forwardMs : 0;
    const start = e.ts / 1000 - shift;
    const compute = e.tid === 1;
    out[e.cat].push({
      rank: e.pid,
      lane: compute ? 0 : 1,
      start,
      end: start + e.dur / 1000,
      kind: compute ? 'compute' : (/\(([^)]*)\)\s*$/.exec(e.name ?? '')?.[1] ?? 'comm'),
    });
  }
  return out;
}

/**
 * Simulates a plan on a cluster preset; `trace` also returns per-rank events. `gpusPerNode` (the
 * problem's `--gpus-per-node`) overrides the preset's NVLink domain on switched clusters.
 */
export function simulate(
  plan: Plan,
  cluster: string,
  options: { trace: boolean; gpusPerNode?: number },
): SimNumbers {
  const preset = resolveCluster(cluster);
  const spec =
    options.gpusPerNode !== undefined && preset.topology === 'switch'
      ? resolveCluster(cluster, { gpusPerNode: options.gpusPerNode })
      : preset;
  const r = simulatePlan(plan, { cluster: spec, trace: options.trace });
  const out: SimNumbers = {
    mfuForward: r.forward.mfu,
    mfuBackward: r.backward.mfu,
    forwardMs: r.forward.makespanMs,
    backwardMs: r.backward.makespanMs,
  };
  if (options.trace && r.trace !== undefined) out.trace = eventsOfTrace(r.trace, r.forward.makespanMs);
  return out;
}

/** Largest accepted relative error of every output in the demo's check (the CPU runtime is float32). */
export const NUMERICS_TOLERANCE = 1e-5;

/**
 * The CPU runtime's numerical check of several plans of one batch: seeded random inputs and the
 * float64 reference attention are computed once and shared, since every strategy's plan of a batch
 * must produce the same outputs; each plan runs on the `cpu` executor (workers from one pool) and
 * O, dQ, dK, dV are compared with the reference by relative error ||a - b|| / ||b||, as
 * `fcp verify` does.
 */
export class NumericsCheck {
  private readonly inputs: SequenceInputs;
  private reference: ReferenceOutputs | undefined;
  private readonly pool = new CpuWorkerPool();

  constructor(
    private readonly sequences: Int32Array,
    private readonly model: ModelShape,
    private readonly mask: Mask,
    seed: number,
  ) {
    this.inputs = randomInputs(sequences, model, seed);
  }

  /** Runs one plan of the batch and compares its outputs. */
  async check(plan: Plan): Promise<Pick<NumericsRun, 'relError' | 'tolerance' | 'ok'>> {
    const same =
      plan.sequences.length === this.sequences.length &&
      plan.sequences.every((l, i) => l === this.sequences[i]);
    if (!same) throw new Error(`plan ${plan.strategy} holds other sequences than the checked batch`);
    const run = await getExecutor('cpu').run(plan, this.inputs, { pool: this.pool });
    if (!run.outputs) throw new Error('the cpu executor returned no outputs');
    this.reference ??= referenceAttention(this.model, this.mask, this.inputs);
    const e = compareOutputs(run.outputs, this.reference);
    const ok = [e.o, e.dq, e.dk, e.dv].every((x) => x <= NUMERICS_TOLERANCE);
    return { relError: { o: e.o, dq: e.dq, dk: e.dk, dv: e.dv }, tolerance: NUMERICS_TOLERANCE, ok };
  }

  /** Terminates the workers. */
  async close(): Promise<void> {
    await this.pool.close();
  }
}

/**
 * `fcp simulate plan.json`: replay a plan on a modelled cluster (the `sim` executor) and print the
 * forward and backward makespan, attention MFU, balance, exposed communication, reshuffle time and
 * bytes. `--json` prints the full result (per-rank arrays included); `--trace FILE` writes a Chrome
 * trace for ui.perfetto.dev. Cluster and kernel-model options are shared with `fcp compare`.
 */
import type { Command } from 'commander';
import { fail } from '../core/issues.ts';
import { checkOutputFile } from '../core/outputs.ts';
import { calibrationFromOption } from '../cost/calibration.ts';
import { contentionOverrides, loadNetworkParams } from '../cost/contention.ts';
import { KERNEL_POLICIES, type KernelPolicy } from '../cost/kernel.ts';
import {
  type SimOptions,
  type SimPhaseResult,
  type SimResult,
  simulatePlan,
} from '../executors/sim/index.ts';
import { SIM_OPTION_SPECS } from '../executors/sim/option-specs.ts';
import type { FreeKinds } from '../executors/sim/prepare.ts';
import { parseSimgridModel, simgridEngine } from '../executors/simgrid/index.ts';
import { readPlan, writeFileAtomic } from '../plan/io.ts';
import { KIND_NAMES } from '../plan/types.ts';
import { requireValidPlan } from '../plan/validate.ts';
import {
  CLUSTER_NAMES,
  type ClusterOverrides,
  NETWORK_MODELS,
  type NetworkModel,
  type Routing,
  resolveCluster,
  torusShapeNote,
} from '../problem/cluster.ts';
import { addSpecOption, intOption, specValue } from './common.ts';
import { addOutputOptions, type Cell, outputOf } from './output.ts';
import type { CsvTable } from './tables.ts';

/** Adds the cluster and cost-model options (simulate, compare). */
export function addSimOptions(cmd: Command, standalone = true): Command {
  // Beside the problem options (compare), `--cluster` and `--gpus-per-node` are already declared.
  if (standalone)
    cmd.option('--cluster <preset>', `cluster preset (${CLUSTER_NAMES.join(', ')})`, 'hopper-ib');
  for (const spec of SIM_OPTION_SPECS) addSpecOption(cmd, spec);
  if (standalone) cmd.option('--gpus-per-node <n>', 'GPUs per NVLink node (preset: 8)');
  return cmd;
}

/** Commander's values of {@link addSimOptions} -> {@link SimOptions}. */
export function simOptionsFrom(o: Record<string, unknown>, extra: ClusterOverrides = {}): SimOptions {
  const ov: { -readonly [K in keyof ClusterOverrides]: ClusterOverrides[K] } = { ...extra };
  // Cluster fields (declared with a `target`): numbers that override the preset.
  for (const spec of SIM_OPTION_SPECS)
    if (spec.target !== undefined && (spec.type === 'int' || spec.type === 'number')) {
      const v = specValue(o, spec);
      if (v !== undefined) (ov as Record<string, unknown>)[spec.target] = v;
    }
  if (o.gpusPerNode !== undefined) ov.gpusPerNode = intOption(o.gpusPerNode, 'gpusPerNode');
  if (o.torusDims !== undefined)
    ov.torusDims = String(o.torusDims)
      .split(/[x,]/)
      .map((s) => intOption(s, 'torusDims'));
  networkFrom(o, ov);
  const out: SimOptions = { cluster: resolveCluster(String(o.cluster ?? 'hopper-ib'), ov) };
  const engine = String(o.engine ?? 'builtin');
  if (engine === 'simgrid') {
    if (out.cluster!.routing !== 'direct')
      fail(
        'option.routing',
        "the SimGrid engine routes every message by its sender's NIC; drop --routing",
        'routing',
      );
    if (out.cluster!.network !== 'fluid')
      fail(
        'option.network',
        'the SimGrid engine uses its own network model (--simgrid-model); drop --network/--network-params',
        'network',
      );
    out.engine = simgridEngine(parseSimgridModel(String(o.simgridModel ?? 'ib')));
  } else if (engine !== 'builtin')
    fail('option.engine', `--engine must be builtin or simgrid (got ${engine})`, 'engine');
  if (o.calibration !== undefined) out.calibration = calibrationFromOption(String(o.calibration));
  const raw = String(o.kernel ?? 'auto');
  const kernel = (raw === 'flash' ? 'varlen' : raw) as KernelPolicy;
  if (!KERNEL_POLICIES.includes(kernel))
    fail(
      'option.kernel',
      `--kernel must be one of ${KERNEL_POLICIES.join(', ')} or flash (got ${raw})`,
      'kernel',
    );
  out.kernel = kernel;
  const mode = String(o.rates ?? 'local');
  if (mode !== 'local' && mode !== 'exact')
    fail('option.rates', `--rates must be local or exact (got ${mode})`, 'rates');
  out.rates = { mode };
  if (o.padding === false) out.padding = false;
  if (o.freeKinds !== undefined) out.freeKinds = parseFreeKinds(String(o.freeKinds));
  if (o.rateHops !== undefined) {
    const hops = intOption(o.rateHops, 'rateHops');
    if (hops < 1) fail('option.rateHops', `--rate-hops must be at least 1 (got ${hops})`, 'rateHops');
    out.rates.hops = hops;
  }
  return out;
}

/** The line that marks a what-if run (`--free-kinds`) in the text output of simulate and compare. */
export function freeKindsLine(fk: FreeKinds): string {
  const names = (codes: readonly number[]): string => codes.map((k) => KIND_NAMES[k]).join(', ') || 'none';
  return `what-if, not a real time: forward ${names(fk.forward)} and backward ${names(fk.backward)} transfers carry no bytes (--free-kinds)`;
}

/**
 * `--free-kinds`: comma-separated kind names (in, kv, out, dkv), each for both phases or prefixed
 * `forward.` / `backward.`; anything else is option error `option.freeKinds`.
 */
export function parseFreeKinds(spec: string): FreeKinds {
  const forward: number[] = [];
  const backward: number[] = [];
  for (const raw of spec.split(',')) {
    const item = raw.trim();
    const dot = item.indexOf('.');
    const phase = dot < 0 ? '' : item.slice(0, dot);
    const name = dot < 0 ? item : item.slice(dot + 1);
    const code = (KIND_NAMES as readonly string[]).indexOf(name);
    if (code < 0 || (phase !== '' && phase !== 'forward' && phase !== 'backward'))
      fail(
        'option.freeKinds',
        `--free-kinds takes in, kv, out, dkv, each optionally prefixed forward. or backward. (got ${JSON.stringify(item)})`,
        'freeKinds',
      );
    if (phase !== 'backward' && !forward.includes(code)) forward.push(code);
    if (phase !== 'forward' && !backward.includes(code)) backward.push(code);
  }
  return { forward, backward };
}

/** `--network` and `--network-params` into cluster overrides (validated by resolveCluster). */
function networkFrom(
  o: Record<string, unknown>,
  ov: { -readonly [K in keyof ClusterOverrides]: ClusterOverrides[K] },
): void {
  if (o.networkParams !== undefined) {
    Object.assign(ov, contentionOverrides(loadNetworkParams(String(o.networkParams))));
    ov.network = 'contention';
  }
  if (o.network !== undefined) {
    const m = String(o.network);
    if (!(NETWORK_MODELS as readonly string[]).includes(m))
      fail('option.network', `--network must be ${NETWORK_MODELS.join(' or ')} (got ${m})`, 'network');
    ov.network = m as NetworkModel;
  }
  // resolveCluster rejects a value other than direct or pxn (`option.routing`).
  if (o.routing !== undefined) ov.routing = String(o.routing) as Routing;
}

const f3 = (x: number): string => x.toFixed(3);
const gb = (b: number): string => (b / 1e9).toFixed(2);

/**
 * The "network model: ..." line of `simulate` and `compare`: the model, the routing when it is not
 * the default, and the engine with `detail` (e.g. the contention parameters), then `tail`.
 */
export function networkLabel(
  network: string,
  routing: string | undefined,
  engine: string,
  tail: string,
  detail = '',
): string {
  return `network model: ${network}${routing === 'pxn' ? ', routing pxn' : ''} (engine ${engine}${detail}); ${tail}`;
}

/** Human-readable summary of a simulation. */
export function formatSimResult(r: SimResult): string {
  const c = r.cluster;
  const lines = [
    `plan: ${r.strategy}, ${r.world} ranks; cluster ${c.name} (${c.peakTflops} TFLOP/s, ${c.commSms}/${c.totalSms} SMs for comm, ` +
      (c.topology === 'torus'
        ? `torus links ${c.linkGBps} GB/s`
        : `NVLink ${c.nvlinkGBps} GB/s, NIC ${c.nicGBps} GB/s, ${c.gpusPerNode} GPUs/node`) +
      `); kernels ${r.kernel.policy}${r.kernel.denseBackend ? ` (dense: ${r.kernel.denseBackend})` : ''}`,
    networkLabel(
      r.network,
      c.routing,
      r.engine,
      'all times simulated',
      r.network === 'contention'
        ? `, loss ${c.contentionLoss}, ${c.contentionMsgUs} us per extra message`
        : '',
    ),
  ];
  const rows: [string, (p: SimPhaseResult) => string][] = [
    ['makespan ms', (p) => f3(p.makespanMs)],
    ['attention MFU', (p) => f3(p.mfu)],
    ['kernel MFU (balanced, no comm)', (p) => f3(p.kernelMfu)],
    ['compute imbalance', (p) => f3(p.computeImbalance)],
    ['comm imbalance (bytes)', (p) => f3(p.commImbalance)],
    ['compute ms mean / max', (p) => `${f3(mean(p.computeMs))} / ${f3(Math.max(...p.computeMs))}`],
    ['exposed comm ms mean / max', (p) => `${f3(p.meanExposedCommMs)} / ${f3(p.maxExposedCommMs)}`],
    ['reshuffle in / out ms', (p) => `${f3(p.reshuffle.inMs)} / ${f3(p.reshuffle.outMs)}`],
    [
      'GB in / kv / out / dkv',
      (p) => `${gb(p.bytes.in)} / ${gb(p.bytes.kv)} / ${gb(p.bytes.out)} / ${gb(p.bytes.dkv)}`,
    ],
    ['ops / flows / groups', (p) => `${p.ops} / ${p.flows} / ${p.groups}`],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  lines.push(`${''.padEnd(w)}  ${'forward'.padStart(28)}  ${'backward'.padStart(28)}`);
  for (const [k, fn] of rows)
    lines.push(`${k.padEnd(w)}  ${fn(r.forward).padStart(28)}  ${fn(r.backward).padStart(28)}`);
  lines.push(`overall MFU (forward + backward): ${f3(r.mfu)}`);
  return lines.join('\n');
}

/** One CSV row per phase; every number simulated (ms, fractions, bytes). */
export function simCsv(r: SimResult): CsvTable {
  const header = [
    'phase',
    'strategy',
    'world',
    'cluster',
    'network',
    'makespan_ms',
    'mfu',
    'kernel_mfu',
    'compute_imbalance',
    'comm_imbalance',
    'compute_ms_mean',
    'compute_ms_max',
    'exposed_comm_ms_mean',
    'exposed_comm_ms_max',
    'reshuffle_in_ms',
    'reshuffle_out_ms',
    'bytes_in',
    'bytes_kv',
    'bytes_out',
    'bytes_dkv',
    'ops',
    'flows',
    'groups',
  ];
  const row = (name: string, p: SimPhaseResult): Cell[] => [
    name,
    r.strategy,
    r.world,
    r.cluster.name,
    r.network,
    p.makespanMs,
    p.mfu,
    p.kernelMfu,
    p.computeImbalance,
    p.commImbalance,
    mean(p.computeMs),
    p.computeMs.reduce((a, b) => Math.max(a, b), 0),
    p.meanExposedCommMs,
    p.maxExposedCommMs,
    p.reshuffle.inMs,
    p.reshuffle.outMs,
    p.bytes.in,
    p.bytes.kv,
    p.bytes.out,
    p.bytes.dkv,
    p.ops,
    p.flows,
    p.groups,
  ];
  return [header, [row('forward', r.forward), row('backward', r.backward)]];
}

function mean(a: readonly number[]): number {
  return a.length === 0 ? 0 : a.reduce((s, v) => s + v, 0) / a.length;
}

/** Registers `fcp simulate`. */
export function register(program: Command): void {
  const cmd = program
    .command('simulate')
    .description(
      'simulate a plan on a modelled cluster: makespan, attention MFU, balance, exposed communication',
    )
    .argument('<plan>', 'plan file (.json or .json.gz)')
    .option('--trace <file>', 'write a Chrome trace (ui.perfetto.dev)');
  addOutputOptions(cmd, {
    json: 'the full result (per-rank arrays included; times simulated)',
    csv: 'one row per phase (forward, backward): makespan, MFU, imbalance, exposed comm, bytes (simulated)',
  });
  addSimOptions(cmd);
  cmd.action((planPath: string, o: Record<string, unknown>) => {
    const out = outputOf('simulate', o);
    if (o.trace !== undefined) checkOutputFile(String(o.trace), '--trace');
    const opts = simOptionsFrom(o);
    if (o.trace !== undefined) opts.trace = true;
    // Reading and checking a plan of 4096 ranks take about 1 and 8 s: steps of their own.
    const progress = out.progress(3);
    progress.step(`read ${planPath}`);
    const plan = readPlan(planPath);
    progress.step(`validate ${plan.world} ranks`);
    requireValidPlan(plan, planPath, (f) => progress.fraction(f));
    const torus = opts.cluster ? torusShapeNote(opts.cluster, plan.world) : null;
    if (torus !== null) out.note(torus);
    progress.step(`simulate ${plan.strategy}, ${plan.world} ranks`);
    opts.onProgress = (f) => progress.fraction(f);
    opts.skipValidation = true;
    const r = simulatePlan(plan, opts);
    progress.done();
    if (o.trace !== undefined) {
      writeFileAtomic(String(o.trace), JSON.stringify(r.trace));
      out.wrote(String(o.trace), 'Chrome trace, open in ui.perfetto.dev');
      delete r.trace;
    }
    if (out.json) out.printJson(r);
    else if (out.csv) out.printCsv(...simCsv(r));
    else
      out.text(
        formatSimResult(r) +
          (opts.freeKinds ? `\n${freeKindsLine(opts.freeKinds)}` : '') +
          routingNote(plan, r.cluster.routing) +
          (r.engine === 'builtin' ? networkNote(plan, r.network) : '') +
          calibrationNote(plan, opts.calibration?.sources),
      );
  });
}

type PlanMeta = { strategy: string; meta?: Record<string, unknown> };

/**
 * A note when an FCP plan was made for another setting of the cluster option `key` than it is
 * simulated under (FCP records a non-default one in `meta[key]`; the baselines' plans are the
 * same under any).
 */
function plannedForNote(
  plan: PlanMeta,
  key: 'network' | 'routing',
  fallback: string,
  simulated: string,
): string {
  if (plan.strategy !== 'fcp') return '';
  const v = plan.meta?.[key];
  const planned = typeof v === 'string' ? v : fallback;
  return planned === simulated
    ? ''
    : `\nnote: the plan was made for --${key} ${planned}, simulated under --${key} ${simulated}`;
}

/**
 * A note when an FCP plan was made for another network model than it is simulated under (its
 * estimates, and so its self-tuner's choices, charge NIC ports for concurrent flows under contention).
 */
export function networkNote(plan: PlanMeta, simulated: string): string {
  return plannedForNote(plan, 'network', 'fluid', simulated);
}

/**
 * A note when an FCP plan was made with other kernel tables than it is simulated with: its tiles
 * and placement weights come from its time model (`meta.options.calibration`: `default` or the
 * files' names). `sources`: the simulation's files; undefined for the default tables.
 */
export function calibrationNote(plan: PlanMeta, sources: readonly string[] | undefined): string {
  if (plan.strategy !== 'fcp') return '';
  const name = (v: unknown): string =>
    Array.isArray(v) ? v.map((f) => String(f).split(/[\\/]/).pop()).join(',') : 'default';
  const options = plan.meta?.options as Record<string, unknown> | undefined;
  const planned = name(options?.calibration);
  const simulated = name(sources);
  return planned === simulated
    ? ''
    : `\nnote: the plan was made for --calibration ${planned}, simulated under --calibration ${simulated}`;
}

/**
 * A note when the plan was made for another NCCL routing than it is simulated under (its two-hop
 * reshuffle and its rail-NIC rounds are planned only under pxn).
 */
export function routingNote(plan: PlanMeta, simulated: string): string {
  return plannedForNote(plan, 'routing', 'direct', simulated);
}

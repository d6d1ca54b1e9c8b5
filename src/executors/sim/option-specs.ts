/**
 * The simulator's command-line options (`fcp simulate`, `fcp compare`), declared once
 * (src/core/option-spec.ts): the flags and the option table of docs/cli.md are generated from
 * this list. Defaults come from where the simulator takes them: the rate solver's
 * {@link RATE_DEFAULTS}, and for cluster fields the `hopper-ib` preset (other presets differ, so
 * the doc says "preset").
 */
import type { OptionSpec } from '../../core/option-spec.ts';
import { CLUSTER_PRESETS, NETWORK_MODELS, ROUTINGS } from '../../problem/cluster.ts';
import { SIMGRID_MODELS } from '../simgrid/index.ts';
import { RATE_DEFAULTS } from './rates.ts';

const H = CLUSTER_PRESETS['hopper-ib']!;
const preset = (v: number): string => `preset (hopper-ib: ${v})`;

/** Defaults of the simulator's options that are not cluster fields. */
export const SIM_CLI_DEFAULTS = { kernel: 'auto', engine: 'builtin', simgridModel: 'ib' } as const;

/**
 * The kernel calibration: the simulator's kernel model reads it, and FCP's time model plans with
 * it (`fcp compare`, `fcp plan`), so a plan is made for the kernels it is simulated on.
 */
export const CALIBRATION_SPEC: OptionSpec = {
  key: 'calibration',
  owner: 'sim',
  type: 'string',
  placeholder: 'file[,file]',
  defaultDoc: 'data/calibration (H200)',
  doc: "kernel calibration JSON file(s); FCP's planner plans with the same tables",
};

/** The simulator's options in the order `--help` lists them (cluster fields override the preset). */
export const SIM_OPTION_SPECS: readonly OptionSpec[] = [
  {
    key: 'freeKinds',
    owner: 'sim',
    type: 'string',
    placeholder: 'kinds',
    doc: 'what-if, not a real time: transfers of these kinds carry no bytes (latency kept), an upper bound on what hiding them would buy; comma-separated in, kv, out, dkv, each for both phases or prefixed forward. or backward. (e.g. forward.in)',
  },
  CALIBRATION_SPEC,
  {
    key: 'kernel',
    owner: 'sim',
    type: 'enum',
    values: ['auto', 'varlen', 'flash', 'cudnn'],
    placeholder: 'policy',
    default: SIM_CLI_DEFAULTS.kernel,
    doc: "the GPU runtime's kernel policy: auto (dense cuDNN for pieces >= 512, varlen flash otherwise), varlen (= flash), or cudnn",
  },
  {
    key: 'peakTflops',
    target: 'peakTflops',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.peakTflops),
    doc: 'GPU peak TFLOP/s',
  },
  {
    key: 'commSms',
    target: 'commSms',
    owner: 'sim',
    type: 'int',
    defaultDoc: preset(H.commSms),
    doc: 'SMs reserved for communication',
  },
  {
    key: 'totalSms',
    target: 'totalSms',
    owner: 'sim',
    type: 'int',
    defaultDoc: preset(H.totalSms),
    doc: 'SMs per GPU',
  },
  {
    key: 'nvlinkGbps',
    target: 'nvlinkGBps',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.nvlinkGBps),
    doc: 'per-GPU NVLink GB/s per direction',
  },
  {
    key: 'nicGbps',
    target: 'nicGBps',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.nicGBps),
    doc: 'per-GPU NIC GB/s per direction',
  },
  {
    key: 'nodeNicGbps',
    target: 'nodeNicGBps',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.nodeNicGBps),
    doc: 'aggregate NIC GB/s of a node (0: uncapped)',
  },
  {
    key: 'latencyUs',
    target: 'latencyUs',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.latencyUs),
    doc: 'per-message latency across nodes (torus: base latency), us',
  },
  {
    key: 'nvlinkLatencyUs',
    target: 'nvlinkLatencyUs',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.nvlinkLatencyUs),
    doc: 'per-message latency inside a node, us',
  },
  {
    key: 'linkGbps',
    target: 'linkGBps',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.linkGBps),
    doc: 'torus: GB/s of each neighbour link per direction',
  },
  {
    key: 'hopUs',
    target: 'hopUs',
    owner: 'sim',
    type: 'number',
    defaultDoc: preset(H.hopUs),
    doc: 'torus: latency per hop, us',
  },
  {
    key: 'torusDims',
    owner: 'sim',
    type: 'string',
    placeholder: 'AxB',
    defaultDoc: 'most square 2-D',
    doc: 'torus dimensions',
  },
  {
    key: 'rates',
    owner: 'sim',
    type: 'enum',
    values: ['local', 'exact'],
    default: RATE_DEFAULTS.mode,
    doc: 'rate solver: local (neighbourhood of each change) or exact (whole component)',
  },
  {
    key: 'rateHops',
    owner: 'sim',
    type: 'int',
    default: RATE_DEFAULTS.hops,
    passDefault: false,
    doc: 'local rate solver: levels of flows re-balanced per change',
  },
  {
    key: 'network',
    owner: 'sim',
    type: 'enum',
    values: NETWORK_MODELS,
    placeholder: 'model',
    defaultDoc: `preset (hopper-ib: ${H.network})`,
    doc: `network model of the built-in engine: ${NETWORK_MODELS.join(' or ')} (NIC ports lose bandwidth and pay a per-message cost with concurrent flows; data/network/contention.json); \`fcp compare\` plans for it too, \`fcp plan --network\` likewise`,
  },
  {
    key: 'routing',
    owner: 'sim',
    type: 'enum',
    values: ROUTINGS,
    placeholder: 'how',
    defaultDoc: `preset (hopper-ib: ${H.routing})`,
    doc: "which NIC a message across nodes leaves by: direct (the sender's own; NCCL_P2P_PXN_LEVEL=0) or pxn (the one on the receiver's rail, through a node peer over NVLink: NCCL's default for point-to-point); `fcp compare` plans for it too (FCP's mode (a) relays its reshuffle across nodes under pxn), `fcp plan --routing` likewise",
  },
  {
    key: 'networkParams',
    owner: 'sim',
    type: 'string',
    placeholder: 'file',
    doc: 'contention parameters (fcp-network/1 JSON; implies --network contention)',
  },
  {
    key: 'engine',
    owner: 'sim',
    type: 'enum',
    values: ['builtin', 'simgrid'],
    placeholder: 'name',
    default: SIM_CLI_DEFAULTS.engine,
    doc: 'builtin (our discrete-event engine) or simgrid (SimGrid 3.32, python3-simgrid)',
  },
  {
    key: 'simgridModel',
    owner: 'sim',
    type: 'enum',
    values: SIMGRID_MODELS,
    placeholder: 'model',
    default: SIM_CLI_DEFAULTS.simgridModel,
    doc: `SimGrid network model: ${SIMGRID_MODELS.join(', ')} (cm02: every factor 1)`,
  },
];

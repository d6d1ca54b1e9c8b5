/**
 * The contention network model: what a NIC port loses when several flows go through it at once
 * (incast at a receiver, outcast at a sender), as pure functions of the cluster so that the
 * planner's timing and the simulator charge the same thing.
 *
 * - Bandwidth: a port with k concurrent flows keeps eta(k) = 1 - loss * (1 - 1/k) of its capacity
 *   (eta(1) = 1; it falls towards 1 - loss as k grows). The flows share what is left max-min fairly.
 * - Per-message cost: each flow pays msgUs for every further message its busiest NIC port carries in
 *   the same transfer group (NCCL's proxy posts a group's messages one after another).
 *
 * With k = 1 both terms vanish, so a congestion-free round (every rank sends one message and
 * receives one) costs exactly what the fluid model charges. The parameters are fitted to published
 * NCCL measurements (data/network/contention.json, {@link fitContention}); `--network-params FILE`
 * takes another fit in the same format.
 */
import { readFileSync } from 'node:fs';
import { dataPath } from '../core/data-dir.ts';
import { fail } from '../core/issues.ts';
import type { ClusterOverrides, ClusterSpec } from '../problem/cluster.ts';

/** Format tag of network parameter files. */
export const NETWORK_PARAMS_FORMAT = 'fcp-network/1';

/** The shipped fit, relative to `data/`. */
export const DEFAULT_NETWORK_PARAMS_FILE = 'network/contention.json';

/** Parameters of the contention model. */
export interface ContentionParams {
  /** Fraction of a port's bandwidth lost as its concurrent flows grow, in [0, 1). */
  readonly loss: number;
  /** Cost of each further concurrent message on a port, microseconds. */
  readonly msgUs: number;
}

/** Bandwidth fraction a port keeps with `k` concurrent flows: 1 - loss * (1 - 1/k); 1 for k <= 1. */
export function portEfficiency(loss: number, k: number): number {
  return k <= 1 ? 1 : 1 - loss * (1 - 1 / k);
}

/** Bandwidth fraction a NIC port of `cluster` keeps with `k` concurrent flows (1 under `fluid`). */
export function clusterPortEfficiency(cluster: ClusterSpec, k: number): number {
  return cluster.network === 'contention' ? portEfficiency(cluster.contentionLoss, k) : 1;
}

/** Usable bandwidth of one NIC port of `cluster` carrying `k` concurrent flows, GB/s. */
export function effectivePortGBps(cluster: ClusterSpec, k: number): number {
  return cluster.nicGBps * clusterPortEfficiency(cluster, k);
}

/** Per-message cost a flow pays when its busiest NIC port carries `k` messages of its group, us (0 under `fluid`). */
export function messageCostUs(cluster: ClusterSpec, k: number): number {
  return cluster.network === 'contention' ? cluster.contentionMsgUs * Math.max(0, k - 1) : 0;
}

/**
 * Time for one NIC port to move `bytes` in total as `k` concurrent flows started together, ms:
 * latency + per-message cost + bytes at the port's usable bandwidth. The planner's estimate of a
 * transfer group's busiest port; the simulator charges the same when nothing else shares the port.
 */
export function concurrentPortMs(cluster: ClusterSpec, k: number, bytes: number): number {
  const bw = effectivePortGBps(cluster, Math.max(1, k)) * 1e6; // bytes per ms
  return (cluster.latencyUs + messageCostUs(cluster, k)) / 1000 + bytes / bw;
}

// ---------------------------------------------------------------------------------------------
// Parameter files and the fit.

/** One published measurement the fit uses (data/network/contention.json `measurements`). */
export interface NetworkMeasurement {
  readonly id: string;
  readonly source: string;
  readonly kind: 'p2p' | 'alltoall-time' | 'alltoall-busbw-min';
  readonly what: string;
  readonly nodes?: number;
  readonly gpusPerNode?: number;
  readonly bytesPerRank?: number;
  /** Point-to-point NIC bandwidth of the measured system, GB/s (default: the fit's). */
  readonly p2pGBps?: number;
  readonly measured: { lo?: number; hi?: number; value?: number; min?: number };
}

const MEASUREMENT_KINDS: readonly NetworkMeasurement['kind'][] = [
  'p2p',
  'alltoall-time',
  'alltoall-busbw-min',
];

/** A network parameter file. */
export interface NetworkParamsDoc {
  readonly format: string;
  readonly params: ContentionParams;
  /** Reference point-to-point bandwidth and latency the measurements are modelled with. */
  readonly fit?: { readonly p2pGBps: number; readonly latencyUs: number };
  readonly measurements?: readonly NetworkMeasurement[];
}

/** Validates a parsed parameter file. FcpError `network.params` naming the bad field. */
export function parseNetworkParams(json: unknown, where: string): NetworkParamsDoc {
  const bad = (msg: string): never =>
    fail(
      'network.params',
      `${where}: ${msg}; see data/network/contention.json for the format`,
      'networkParams',
    );
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return bad('not a JSON object');
  const o = json as Record<string, unknown>;
  if (o.format !== NETWORK_PARAMS_FORMAT)
    bad(`format must be "${NETWORK_PARAMS_FORMAT}" (got ${JSON.stringify(o.format)})`);
  const p = o.params as Record<string, unknown> | undefined;
  if (typeof p !== 'object' || p === null) return bad('missing "params" object');
  const loss = p.loss;
  const msgUs = p.msgUs;
  if (typeof loss !== 'number' || !Number.isFinite(loss) || loss < 0 || loss >= 1)
    bad(`params.loss must be a number in [0, 1) (got ${JSON.stringify(loss)})`);
  if (typeof msgUs !== 'number' || !Number.isFinite(msgUs) || msgUs < 0)
    bad(`params.msgUs must be a non-negative number (got ${JSON.stringify(msgUs)})`);
  const fit = o.fit as Record<string, unknown> | undefined;
  let fitOut: NetworkParamsDoc['fit'];
  if (fit !== undefined) {
    const pos = (k: string): number => {
      const v = fit[k];
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
        bad(`fit.${k} must be a non-negative number`);
      return v as number;
    };
    fitOut = { p2pGBps: pos('p2pGBps'), latencyUs: pos('latencyUs') };
    if (fitOut.p2pGBps <= 0) bad('fit.p2pGBps must be positive');
  }
  const ms = o.measurements;
  if (ms !== undefined && !Array.isArray(ms)) bad('"measurements" must be an array');
  for (const [i, m] of ((ms as unknown[] | undefined) ?? []).entries()) {
    const x = m as Record<string, unknown> | null;
    if (typeof x !== 'object' || x === null || typeof x.id !== 'string')
      bad(`measurements[${i}] needs a string "id"`);
    if (!MEASUREMENT_KINDS.includes(x!.kind as NetworkMeasurement['kind']))
      bad(`measurements[${i}].kind must be one of ${MEASUREMENT_KINDS.join(', ')}`);
    if (typeof x!.measured !== 'object' || x!.measured === null)
      bad(`measurements[${i}] needs a "measured" object`);
  }
  const out: NetworkParamsDoc = {
    format: NETWORK_PARAMS_FORMAT,
    params: { loss: loss as number, msgUs: msgUs as number },
    ...(fitOut ? { fit: fitOut } : {}),
    ...(ms ? { measurements: ms as NetworkMeasurement[] } : {}),
  };
  return out;
}

/** Reads a parameter file. FcpError `io.read`, `network.json` or `network.params`. */
export function loadNetworkParams(path: string): NetworkParamsDoc {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    return fail(
      'io.read',
      `cannot read network parameters ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      'networkParams',
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return fail('network.json', `${path} is not JSON: ${(e as Error).message}`, 'networkParams');
  }
  return parseNetworkParams(json, path);
}

/** The shipped fit (data/network/contention.json). */
export function defaultNetworkParams(): NetworkParamsDoc {
  return loadNetworkParams(dataPath(DEFAULT_NETWORK_PARAMS_FILE));
}

/** Cluster overrides carrying a parameter file's contention parameters. */
export function contentionOverrides(doc: NetworkParamsDoc): ClusterOverrides {
  return { contentionLoss: doc.params.loss, contentionMsgUs: doc.params.msgUs };
}

/**
 * Modelled time of an NCCL all-to-all (nccl-tests alltoall_perf) under the contention model, us:
 * `nodes` x `gpusPerNode` ranks, `bytesPerRank` per rank split evenly over all ranks; each rank's NIC
 * carries its k = ranks - gpusPerNode remote messages at once (intra-node messages take NVLink and
 * are not the bottleneck): latency + msgUs * (k - 1) + k * m / (p2p * eta(k)).
 */
export function alltoallUs(
  p: ContentionParams,
  nodes: number,
  gpusPerNode: number,
  bytesPerRank: number,
  p2pGBps: number,
  latencyUs: number,
): number {
  const ranks = nodes * gpusPerNode;
  const k = ranks - gpusPerNode;
  if (k <= 0) return latencyUs;
  const m = bytesPerRank / ranks;
  return latencyUs + p.msgUs * (k - 1) + (k * m) / (p2pGBps * 1e3 * portEfficiency(p.loss, k));
}

/** nccl-tests' alltoall busbw for a time: bytesPerRank / t * (ranks - 1) / ranks (nccl-tests #130), GB/s. */
export function alltoallBusBw(ranks: number, bytesPerRank: number, us: number): number {
  return (bytesPerRank / (us * 1e3)) * ((ranks - 1) / ranks);
}

/** One row of the fit table. */
export interface FitRow {
  readonly id: string;
  readonly what: string;
  readonly measured: string;
  readonly model: number;
  /** Relative error of the model against the measurement (the worse end of a range); 0 for a bound met. */
  readonly error: number;
  /** True when the model is within 10% of the measurement (or meets the bound). */
  readonly ok: boolean;
}

const need = (m: NetworkMeasurement, k: 'nodes' | 'gpusPerNode' | 'bytesPerRank'): number => {
  const v = m[k];
  if (typeof v !== 'number' || !(v > 0))
    fail('network.params', `measurement ${m.id} needs a positive ${k}`, 'networkParams');
  return v as number;
};

function fitRef(doc: NetworkParamsDoc): { p2pGBps: number; latencyUs: number } {
  if (!doc.fit)
    return fail('network.params', 'the file has no "fit" block to model measurements with', 'networkParams');
  return doc.fit;
}

/** The model's value for one measurement (GB/s for p2p and busbw kinds, us for times). */
export function modelValue(doc: NetworkParamsDoc, p: ContentionParams, m: NetworkMeasurement): number {
  const ref = fitRef(doc);
  const bw = m.p2pGBps ?? ref.p2pGBps;
  if (m.kind === 'p2p') return bw * portEfficiency(p.loss, 1);
  const nodes = need(m, 'nodes');
  const g = need(m, 'gpusPerNode');
  const bytes = need(m, 'bytesPerRank');
  const us = alltoallUs(p, nodes, g, bytes, bw, ref.latencyUs);
  if (m.kind === 'alltoall-time') return us;
  return alltoallBusBw(nodes * g, bytes, us);
}

/** Model against every measurement of `doc` (with `p`, default the file's own parameters). */
export function fitTable(doc: NetworkParamsDoc, p: ContentionParams = doc.params): FitRow[] {
  return (doc.measurements ?? []).map((m) => {
    const v = modelValue(doc, p, m);
    const x = m.measured;
    let error: number;
    let measured: string;
    if (m.kind === 'alltoall-busbw-min') {
      measured = `> ${x.min}`;
      error = v >= (x.min ?? 0) ? 0 : v / (x.min ?? 1) - 1;
    } else if (x.value !== undefined) {
      measured = String(x.value);
      error = v / x.value - 1;
    } else {
      measured = `${x.lo}-${x.hi}`;
      const e1 = v / (x.lo ?? v) - 1;
      const e2 = v / (x.hi ?? v) - 1;
      error = Math.abs(e1) > Math.abs(e2) ? e1 : e2;
    }
    return { id: m.id, what: m.what, measured, model: v, error, ok: Math.abs(error) <= 0.1 };
  });
}

/**
 * Refits the parameters from the measurements of `doc` (the method in its `fit.method`): loss is
 * the middle of the range the lower bounds on all-to-all busbw allow, msgUs makes the modelled
 * all-to-all times match the mean of the measured ones.
 */
export function fitContention(doc: NetworkParamsDoc): ContentionParams {
  const ref = fitRef(doc);
  const ms = doc.measurements ?? [];
  // Upper bound on loss: eta(k) >= busbw_min / (p2p * ranks/(ranks-1) * (N-1)/N ...), solved on
  // large messages where the per-message term is negligible (checked by fitTable afterwards).
  let maxLoss = 0.99;
  for (const m of ms) {
    if (m.kind !== 'alltoall-busbw-min') continue;
    const nodes = need(m, 'nodes');
    const g = need(m, 'gpusPerNode');
    const bw = m.p2pGBps ?? ref.p2pGBps;
    const ranks = nodes * g;
    const k = ranks - g;
    // busbw = S/t * (n-1)/n with t ~ k*m/(bw*eta) and m = S/n: busbw = bw * eta * (n-1)/k.
    const etaMin = ((m.measured.min ?? 0) * k) / (bw * (ranks - 1));
    maxLoss = Math.min(maxLoss, Math.max(0, (1 - etaMin) / (1 - 1 / k)));
  }
  const loss = maxLoss / 2;
  const times = ms.filter((m) => m.kind === 'alltoall-time');
  if (times.length === 0) return { loss, msgUs: 0 };
  // msgUs: least squares over the time measurements of t = a + msgUs * (k - 1) (a: the rest).
  let num = 0;
  let den = 0;
  for (const m of times) {
    const base = modelValue(doc, { loss, msgUs: 0 }, m);
    const k = need(m, 'nodes') * need(m, 'gpusPerNode') - need(m, 'gpusPerNode');
    num += (m.measured.value! - base) * (k - 1);
    den += (k - 1) * (k - 1);
  }
  return { loss, msgUs: den > 0 ? Math.max(0, num / den) : 0 };
}

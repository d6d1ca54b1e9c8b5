/**
 * Prints the headline tables of docs/results.md and the README from the folders that
 * docs/results/run-headline.sh writes: FCP in mode (a) (transparent reshuffle from the even user
 * layout) and mode (b) (loader layout, equal tokens per rank) against every baseline at its best
 * (`--baselines best`), per batch, cluster and network model, and the acceptance grid of issue 15 (16-4096 ranks). All numbers
 * are simulated.
 * Usage: npx tsx scripts/headline-tables.ts [docs/results] [--bounds] [--peer-bounds]
 *   --bounds: each missed grid cell also shows `[no idle R, kernels R]`, the two bounds its label
 *   reads (the run's mean `no idle` MFU and mean kernel MFU over the strongest baseline's MFU).
 *   --peer-bounds: after the grid, every met ratio checked against each baseline's own kernel MFU
 *   (its tasks perfectly balanced with nothing exposed): how many of FCP's wins a peer that
 *   re-balanced its work for free (e.g. MagiAttention's dynamic solver, which also moves Q and O)
 *   could still take, and which.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultCalibration } from '../src/cost/calibration.ts';
import { denseLayerMs } from '../src/cost/dense.ts';
import { pointPairs } from '../src/cost/efficiency.ts';
import { KernelModel } from '../src/cost/kernel.ts';
import { LLAMA3_70B } from '../src/model/attention.ts';
import { CLUSTER_PRESETS, computeSlowdown } from '../src/problem/cluster.ts';

interface Summary {
  strategy: string;
  world: number;
  mfuForward: { mean: number };
  mfuBackward: { mean: number };
  tokenImbalance?: number;
  /** Set by {@link readRouted} when the pxn run was kept. */
  routing?: 'pxn';
}
interface Row {
  strategy: string;
  world: number;
  config: Record<string, unknown>;
  tokenImbalance?: number;
  makespans: { forwardMs: number; backwardMs: number };
  mfuForward: number;
  mfuBackward: number;
  kernelMfu?: { forward: number; backward: number };
  imbalances?: { computeForward: number; commForward: number; computeBackward: number; commBackward: number };
}
interface Compare {
  summary: Summary[];
  rows: Row[];
  tokensPerRank: number;
  cluster: { peakTflops: number };
}

/**
 * Modelled time of one whole layer on the busiest rank, forward + backward (ms): the simulated
 * attention makespans plus the rest of the layer (projections, MLP) for the most tokens any rank
 * holds in the layout the model runs on (src/cost/dense.ts). Mean over the batches.
 */
function layerMs(c: Compare, s: string, w: number): number | undefined {
  const rows = c.rows.filter((r) => r.strategy === s && r.world === w);
  if (rows.length === 0) return undefined;
  let sum = 0;
  for (const r of rows) {
    const tokens = c.tokensPerRank * (1 + (r.tokenImbalance ?? 0));
    const dense =
      denseLayerMs(LLAMA3_70B, tokens, c.cluster.peakTflops, 'forward') +
      denseLayerMs(LLAMA3_70B, tokens, c.cluster.peakTflops, 'backward');
    sum += r.makespans.forwardMs + r.makespans.backwardMs + dense;
  }
  return sum / rows.length;
}

/** Whole-layer time per strategy and FCP's speedup over the fastest baseline by that measure. */
function layerTable(batch: string, setting: string): string | null {
  const best = read(`best-${batch}-${setting}`);
  const a = read(`fcp-${batch}-${setting}-a`);
  const b = read(`fcp-${batch}-${setting}-b`);
  if (!best || !a || !b) return null;
  const worlds = worldsOf(a, b);
  const lines = [
    `| GPUs | fcp (a) | fcp (b) | ${BASELINES.join(' | ')} | fastest baseline / fcp (a) | fastest baseline / fcp (b) |`,
    `|---:|---|---|${BASELINES.map(() => '---').join('|')}|---|---|`,
  ];
  for (const w of worlds) {
    const ta = layerMs(a, 'fcp', w);
    const tb = layerMs(b, 'fcp', w);
    const tbs = BASELINES.map((s) => layerMs(best, s, w));
    const fastest = Math.min(...tbs.filter((x): x is number => x !== undefined));
    const ms = (x?: number, name = '') => (x === undefined ? absent(name, w) : x.toFixed(0));
    // No baseline at this world (its folder is missing): no speedup, not Infinity.
    const speedup = (t?: number) => (t && Number.isFinite(fastest) ? `${(fastest / t).toFixed(2)}x` : '-');
    lines.push(
      `| ${label(batch, setting, w)} | ${ms(ta)} | ${ms(tb)} | ${tbs.map((x, i) => ms(x, BASELINES[i])).join(' | ')} | ${speedup(ta)} | ${speedup(tb)} |`,
    );
  }
  return lines.join('\n');
}

const cliArgs = process.argv.slice(2);
const dir = cliArgs.find((a) => !a.startsWith('--')) ?? 'docs/results';
const showBounds = cliArgs.includes('--bounds');
const showPeerBounds = cliArgs.includes('--peer-bounds');
/** One folder's compare.json, or null. */
const readOne = (name: string): Compare | null => {
  const p = join(dir, name, 'compare.json');
  return existsSync(p) ? (JSON.parse(readFileSync(p, 'utf8')) as Compare) : null;
};
/** Forward + backward makespan of `s` at `w`, summed over the batches (ms). */
const totalMs = (c: Compare, s: string, w: number): number =>
  c.rows
    .filter((r) => r.strategy === s && r.world === w)
    .reduce((t, r) => t + r.makespans.forwardMs + r.makespans.backwardMs, 0);
/**
 * One folder under the routing that suits each strategy: `name` (direct routing) and, where
 * run-headline.sh ROUTING=pxn wrote it, `name-pxn`; per strategy and world the one with the shorter
 * forward + backward time over the batches is kept (a job sets NCCL's PXN level once, for both
 * directions), its summary marked `routing: 'pxn'`.
 */
const readRouted = (name: string): Compare | null => {
  const direct = readOne(name);
  const pxn = readOne(`${name}-pxn`);
  if (direct === null || pxn === null) return direct ?? pxn;
  const summary: Summary[] = [];
  const rows: Row[] = [];
  for (const d of direct.summary) {
    const p = pxn.summary.find((x) => x.strategy === d.strategy && x.world === d.world);
    const usePxn = p !== undefined && totalMs(pxn, d.strategy, d.world) < totalMs(direct, d.strategy, d.world);
    const from = usePxn ? pxn : direct;
    summary.push(usePxn ? { ...p, routing: 'pxn' } : d);
    rows.push(...from.rows.filter((r) => r.strategy === d.strategy && r.world === d.world));
  }
  return { ...direct, summary, rows };
};
/**
 * A comparison at every scale: `name` (16-256 ranks, run-headline.sh) merged with `large-<name>`
 * (1024 ranks) and `large4096-<name>` (4096 ranks; run-headline-large.sh), whichever exist. A
 * world present in two folders is taken from the first (the smaller-scale folder).
 */
const read = (name: string): Compare | null => {
  const parts = [name, `large-${name}`, `large4096-${name}`]
    .map(readRouted)
    .filter((c): c is Compare => c !== null);
  if (parts.length === 0) return null;
  const seen = new Set<number>();
  const summary: Summary[] = [];
  const rows: Row[] = [];
  for (const c of parts) {
    const ws = new Set(c.summary.map((s) => s.world).filter((w) => !seen.has(w)));
    summary.push(...c.summary.filter((s) => ws.has(s.world)));
    rows.push(...c.rows.filter((r) => ws.has(r.world)));
    for (const w of ws) seen.add(w);
  }
  return { ...parts[0]!, summary, rows };
};
/** World sizes any of the comparisons holds, ascending. */
const worldsOf = (...cs: (Compare | null)[]): number[] =>
  [...new Set(cs.flatMap((c) => c?.summary.map((s) => s.world) ?? []))].sort((x, y) => x - y);
const f = (x: number) => x.toFixed(3);
/**
 * True when the baselines of (batch, setting) at `world` were tuned by a restricted sweep
 * (`fcp compare --sweep-from`: at 4096 ranks, each baseline's default and its own 1024-rank winner;
 * docs/baselines.md "At 1024 ranks and more"). compare.json records `sweepFrom` then.
 */
const restricted = (batch: string, setting: string, world: number, suffix = ''): boolean =>
  [`best-${batch}-${setting}`, `large-best-${batch}-${setting}`, `large4096-best-${batch}-${setting}`].some((n) => {
    const c = readOne(`${n}${suffix}`) as (Compare & { sweepFrom?: string; worlds?: number[] }) | null;
    return c?.sweepFrom !== undefined && (c.worlds ?? c.summary.map((x) => x.world)).includes(world);
  });
/**
 * A world's row label: `4096*` where the baselines' sweep was restricted ({@link restricted}),
 * `1024†` where their `--routing pxn` run's was (its default and its direct-routing winner).
 */
const label = (batch: string, setting: string, world: number): string =>
  `${world}${restricted(batch, setting, world) ? '*' : ''}${restricted(batch, setting, world, '-pxn') ? '†' : ''}`;
const BASELINES = ['ring', 'bytescale', 'wlb', 'magi'];
/**
 * What a missing cell prints: `excl.` for ring and wlb at >= 1024 ranks, which
 * run-headline-large.sh leaves out by rule (docs/baselines.md "At 1024 ranks and more"), '-' for a
 * run not made.
 */
const absent = (strategy: string, world: number): string =>
  (strategy === 'ring' || strategy === 'wlb') && world >= 1024 ? 'excl.' : '-';

/** One table: rows = world sizes; columns = fcp (a), fcp (b), each baseline, FCP / best baseline. */
function table(batch: string, setting: string): string | null {
  const best = read(`best-${batch}-${setting}`);
  const a = read(`fcp-${batch}-${setting}-a`);
  const b = read(`fcp-${batch}-${setting}-b`);
  if (!best) return null;
  const worlds = worldsOf(best, a, b);
  const get = (c: Compare | null, s: string, w: number) => c?.summary.find((x) => x.strategy === s && x.world === w);
  const lines = [
    `| GPUs | fcp (a) | fcp (b) | ${BASELINES.join(' | ')} | best baseline | fcp (a) / best | fcp (b) / best |`,
    `|---:|---|---|${BASELINES.map(() => '---').join('|')}|---|---|---|`,
  ];
  for (const w of worlds) {
    const fa = get(a, 'fcp', w);
    const fb = get(b, 'fcp', w);
    const cells = BASELINES.map((s) => get(best, s, w));
    // The strongest rival per direction (forward and backward may be different baselines).
    let bf = 0;
    let bb = 0;
    let name = '';
    cells.forEach((c, i) => {
      if (c && c.mfuForward.mean > bf) {
        bf = c.mfuForward.mean;
        name = BASELINES[i]!;
      }
      if (c) bb = Math.max(bb, c.mfuBackward.mean);
    });
    const pair = (s?: Summary, name = '') =>
      s ? `${f(s.mfuForward.mean)} / ${f(s.mfuBackward.mean)}${s.routing ? ' (pxn)' : ''}` : absent(name, w);
    const ratio = (s?: Summary) =>
      s && bf > 0 ? `${(s.mfuForward.mean / bf).toFixed(2)}x / ${(s.mfuBackward.mean / bb).toFixed(2)}x` : '-';
    lines.push(
      `| ${label(batch, setting, w)} | ${pair(fa)} | ${pair(fb)} | ${cells.map((c, i) => pair(c, BASELINES[i])).join(' | ')} | ${name} | ${ratio(fa)} | ${ratio(fb)} |`,
    );
  }
  return lines.join('\n');
}

/** Token imbalance of the layout the rest of the model runs on, per strategy and world. */
function tokenTable(batch: string, setting: string): string | null {
  const best = read(`best-${batch}-${setting}`);
  const a = read(`fcp-${batch}-${setting}-a`);
  const b = read(`fcp-${batch}-${setting}-b`);
  if (!best) return null;
  const worlds = worldsOf(best, a, b);
  const cell = (c: Compare | null, s: string, w: number) => {
    const x = c?.summary.find((r) => r.strategy === s && r.world === w);
    if (!x) return absent(s, w);
    return x.tokenImbalance === undefined ? '-' : `${(100 * x.tokenImbalance).toFixed(1)}%`;
  };
  const lines = [
    `| GPUs | fcp (a) | fcp (b) | ${BASELINES.join(' | ')} |`,
    `|---:|---|---|${BASELINES.map(() => '---').join('|')}|`,
  ];
  for (const w of worlds)
    lines.push(`| ${label(batch, setting, w)} | ${cell(a, 'fcp', w)} | ${cell(b, 'fcp', w)} | ${BASELINES.map((s) => cell(best, s, w)).join(' | ')} |`);
  return lines.join('\n');
}

/**
 * FCP's own quality per mode and world, means over the batches (issue 15's other acceptance lines):
 * attention MFU over its kernel MFU (balanced, no communication; target >= 0.85 in mode (b),
 * >= 0.80 in mode (a) up to 256 ranks), compute imbalance (<= 3%) and communication imbalance
 * (<= 10%) of the simulated phases, forward / backward.
 */
function qualityTable(batch: string, setting: string): string | null {
  const a = read(`fcp-${batch}-${setting}-a`);
  const b = read(`fcp-${batch}-${setting}-b`);
  if (!a || !b) return null;
  const mean = (rows: Row[], x: (r: Row) => number | undefined) => {
    const v = rows.map(x).filter((y): y is number => y !== undefined);
    return v.length ? v.reduce((p, q) => p + q, 0) / v.length : undefined;
  };
  const pct = (x?: number) => (x === undefined ? '-' : `${(100 * x).toFixed(1)}%`);
  const num = (x?: number) => (x === undefined ? '-' : x.toFixed(2));
  const cells = (c: Compare, w: number) => {
    const rows = c.rows.filter((r) => r.strategy === 'fcp' && r.world === w);
    if (rows.length === 0) return '- | - | -';
    const share = (dir: 'forward' | 'backward') =>
      mean(rows, (r) => (r.kernelMfu ? (dir === 'forward' ? r.mfuForward : r.mfuBackward) / r.kernelMfu[dir] : undefined));
    const im = (k: keyof NonNullable<Row['imbalances']>) => mean(rows, (r) => r.imbalances?.[k]);
    return `${num(share('forward'))} / ${num(share('backward'))} | ${pct(im('computeForward'))} / ${pct(im('computeBackward'))} | ${pct(im('commForward'))} / ${pct(im('commBackward'))}`;
  };
  const lines = [
    '| GPUs | (a) MFU / kernel MFU | (a) compute imbalance | (a) comm imbalance | (b) MFU / kernel MFU | (b) compute imbalance | (b) comm imbalance |',
    '|---:|---|---|---|---|---|---|',
  ];
  for (const w of worldsOf(a, b)) lines.push(`| ${w} | ${cells(a, w)} | ${cells(b, w)} |`);
  return lines.join('\n');
}

/** The configuration each baseline's sweep chose, per world. */
function configs(batch: string, setting: string): string | null {
  const best = read(`best-${batch}-${setting}`);
  if (!best) return null;
  const seen = new Map<string, string>();
  for (const r of best.rows) {
    const k = `${r.strategy} ${r.world}`;
    if (!seen.has(k))
      seen.set(
        k,
        Object.entries(r.config)
          .map(([a, b]) => `${a}=${b}`)
          .join(' '),
      );
  }
  return ['| baseline | GPUs | configuration |', '|---|---:|---|', ...[...seen].map(([k, v]) => `| ${k.replace(' ', ' | ')} | ${v} |`)].join('\n');
}

/**
 * The best MFU any measured launch of the default kernel calibration reaches, per direction, on
 * the SMs the simulated clusters leave to compute: no plan can beat it on average, so a target
 * that asks for more than this over the strongest baseline is out of reach with these kernels.
 * FLOPs as the kernel model counts them. Every strategy's simulated kernels run on totalSms -
 * commSms SMs (src/cost/kernel.ts; hopper-ib and ratio-5920 both reserve 6 of 132), so the
 * ceiling is the best launch's MFU over that slowdown (sessions 7-8 left the slowdown out and
 * quoted 0.697 / 0.557, which no simulated plan can reach).
 */
function kernelCeiling(): { forward: number; backward: number } {
  const cal = defaultCalibration();
  const kernel = new KernelModel(LLAMA3_70B, { calibration: cal });
  const slowdowns = ['hopper-ib', 'ratio-5920'].map((n) => computeSlowdown(CLUSTER_PRESETS[n]!));
  const slowdown = Math.min(...slowdowns);
  const out = { forward: 0, backward: 0 };
  for (const p of [...cal.dense, ...cal.varlen]) {
    const pairs = p.count * pointPairs(p.lq, p.lk, p.causal);
    const mfu = (ms: number, dir: 'forward' | 'backward') =>
      kernel.flops(dir, pairs) / (ms * slowdown * 1e9 * kernel.peakTflops);
    out.forward = Math.max(out.forward, mfu(p.fwdMs, 'forward'));
    if (p.bwdMs !== undefined) out.backward = Math.max(out.backward, mfu(p.bwdMs, 'backward'));
  }
  return out;
}
const CEILING = kernelCeiling();

/**
 * A ratio this close to its target is marked as near in the grid's summary: the spread that
 * re-measuring the kernel table gave (docs/results.md, "Session 37": median 0.005-0.012x, up to
 * 0.05x over 60 ratios).
 */
const NEAR = 0.02;

/** Issue 15's target for FCP over the strongest tuned baseline: 1.0x at 16-32 ranks, 1.13x above. */
const targetOf = (world: number): number => (world <= 32 ? 1.0 : 1.13);

const SETTINGS = ['fluid', 'contention', 'ratio5920', 'ratio5920-contention'];
const SETTING_NAME: Record<string, string> = {
  fluid: 'hopper-ib fluid',
  contention: 'hopper-ib contention',
  ratio5920: 'ratio-5920 fluid',
  'ratio5920-contention': 'ratio-5920 contention',
};

/**
 * The highest mean kernel MFU (`dir`) among the baselines at `w` in `best`, and whose: what the
 * strongest peer would reach with its own tasks perfectly balanced and no communication exposed
 * (src/executors/sim/index.ts, `kernelMfu`). [0, '-'] when no row records one.
 */
function peerKernels(best: Compare | null, w: number, dir: 'forward' | 'backward'): [number, string] {
  let top: [number, string] = [0, '-'];
  for (const s of BASELINES) {
    const rows = best?.rows.filter((r) => r.strategy === s && r.world === w && r.kernelMfu) ?? [];
    if (rows.length === 0) continue;
    const k = rows.reduce((sum, r) => sum + r.kernelMfu![dir], 0) / rows.length;
    if (k > top[0]) top = [k, s];
  }
  return top;
}

/**
 * MagiAttention's mean MFU (`dir`) at `w` in `best` with its compute imbalance removed and nothing
 * else changed: the busiest rank's compute excess over the mean (imbalance x mean compute; mean
 * compute / makespan = MFU / kernel MFU) taken off the makespan, its communication and waits kept.
 * What its dynamic solver (docs/baselines.md) could add at most by balance; it balances by moving
 * Q and O as well, so it also adds bytes and runs one overlap stage (neither charged here). Only
 * magi: the other peers have no such solver (theirs are modelled as they are). 0 without rows.
 */
function peerRebalanced(best: Compare | null, w: number, dir: 'forward' | 'backward'): number {
  const rows = best?.rows.filter((r) => r.strategy === 'magi' && r.world === w && r.kernelMfu && r.imbalances) ?? [];
  if (rows.length === 0) return 0;
  const one = (r: Row): number => {
    const mfu = dir === 'forward' ? r.mfuForward : r.mfuBackward;
    const imb = dir === 'forward' ? r.imbalances!.computeForward : r.imbalances!.computeBackward;
    return mfu / (1 - (imb * mfu) / r.kernelMfu![dir]);
  };
  return rows.reduce((sum, r) => sum + one(r), 0) / rows.length;
}

/**
 * The acceptance grid of issue 15: per batch x cluster x network x world, FCP mode (a) and (b)
 * over the strongest tuned baseline, forward and backward separately (the strongest baseline is
 * taken per direction), each ratio marked against its target. Missing runs print '-'.
 */
function acceptanceGrid(): string {
  const lines = [
    '| batch | cluster, network | GPUs | strongest fwd | strongest bwd | (a) fwd | (a) bwd | (b) fwd | (b) bwd | target |',
    '|---|---|---:|---|---|---|---|---|---|---:|',
  ];
  let met = 0;
  let total = 0;
  let nearMet = 0;
  let nearMiss = 0;
  let aboveCeiling = 0;
  let aboveKernels = 0;
  let balanceBound = 0;
  let idleBound = 0;
  // --peer-bounds: met ratios that also clear the target over every baseline's kernel MFU, and
  // the lines of those that do not.
  let peerSafe = 0;
  const peerAtRisk: string[] = [];
  // --peer-bounds: met ratios that also clear the target over every baseline rebalanced
  // (peerRebalanced), and the lines of those that do not.
  let rebalancedSafe = 0;
  const rebalancedAtRisk: string[] = [];
  // --peer-bounds: ratios whose FCP run's own kernel MFU is below the highest peer kernel MFU.
  let kernelsBelow = 0;
  let kernelsCompared = 0;
  const kernelRatios: number[] = [];
  // Ranges per batch, cluster and scale (fluid and contention together), for the summary table.
  const summary = new Map<string, number[][]>();
  for (const batch of ['longtail', 'magi', 'bimodal'])
    for (const setting of SETTINGS) {
      const best = read(`best-${batch}-${setting}`);
      const a = read(`fcp-${batch}-${setting}-a`);
      const b = read(`fcp-${batch}-${setting}-b`);
      for (const w of worldsOf(best, a, b)) {
        const get = (c: Compare | null, s: string) => c?.summary.find((x) => x.strategy === s && x.world === w);
        let bf: [number, string] = [0, '-'];
        let bb: [number, string] = [0, '-'];
        for (const s of BASELINES) {
          const x = get(best, s);
          const n = x?.routing ? `${s} (pxn)` : s;
          if (x && x.mfuForward.mean > bf[0]) bf = [x.mfuForward.mean, n];
          if (x && x.mfuBackward.mean > bb[0]) bb = [x.mfuBackward.mean, n];
        }
        const t = targetOf(w);
        /**
         * One cell: FCP's MFU `x` over the strongest baseline's `ref`; `bounds`: the mean kernel
         * MFU of that FCP run (its MFU with perfect balance and nothing exposed, so no schedule of
         * its tasks beats it) and its mean `no idle` MFU (the busiest rank's compute as the
         * makespan: that run's balance, nothing exposed; bench/cell-bounds.ts prints both).
         */
        const ratio = (
          x: number | undefined,
          ref: number,
          ceiling: number,
          bounds: { kernels: number; noIdle: number } | undefined,
          pxn?: string,
        ) => {
          if (x === undefined || ref <= 0) return '-';
          const via = pxn ? ' (pxn)' : '';
          total++;
          const r = x / ref;
          if (r >= t) met++;
          if (Math.abs(r - t) < NEAR) {
            if (r >= t) nearMet++;
            else nearMiss++;
          }
          if (r >= t) return `${r.toFixed(3)}x${via}`;
          // A miss whose target needs more MFU than the kernels ever reach; else one that needs
          // more than FCP's own kernels as planned reach; else more than its compute balance
          // allows with nothing exposed; else what is short is idle time (waits, exposed transfers).
          const need = t * ref;
          let why = ' (miss, idle)';
          if (need > ceiling) {
            why = ' (miss, ceiling)';
            aboveCeiling++;
          } else if (bounds !== undefined && need > bounds.kernels) {
            why = ' (miss, kernels)';
            aboveKernels++;
          } else if (bounds !== undefined && need > bounds.noIdle) {
            why = ' (miss, balance)';
            balanceBound++;
          } else idleBound++;
          const shown =
            showBounds && bounds !== undefined
              ? ` [no idle ${(bounds.noIdle / ref).toFixed(3)}x, kernels ${(bounds.kernels / ref).toFixed(3)}x]`
              : '';
          return `${r.toFixed(3)}x${via}${why}${shown}`;
        };
        /**
         * Mean kernel MFU and mean `no idle` MFU (kernel MFU over 1 + compute imbalance: the
         * busiest rank's compute as the makespan) of FCP's rows at `w` in `c` (the kept routing's).
         */
        const boundsOf = (
          c: Compare | null,
          dir: 'forward' | 'backward',
        ): { kernels: number; noIdle: number } | undefined => {
          const rows = c?.rows.filter((r) => r.strategy === 'fcp' && r.world === w && r.kernelMfu) ?? [];
          if (rows.length === 0) return undefined;
          const imb = (r: (typeof rows)[number]): number =>
            (dir === 'forward' ? r.imbalances?.computeForward : r.imbalances?.computeBackward) ?? 0;
          return {
            kernels: rows.reduce((s, r) => s + r.kernelMfu![dir], 0) / rows.length,
            noIdle: rows.reduce((s, r) => s + r.kernelMfu![dir] / (1 + imb(r)), 0) / rows.length,
          };
        };
        const fa = get(a, 'fcp');
        const fb = get(b, 'fcp');
        if (showPeerBounds) {
          const checks: [number | undefined, number, 'forward' | 'backward', string][] = [
            [fa?.mfuForward.mean, bf[0], 'forward', '(a) fwd'],
            [fa?.mfuBackward.mean, bb[0], 'backward', '(a) bwd'],
            [fb?.mfuForward.mean, bf[0], 'forward', '(b) fwd'],
            [fb?.mfuBackward.mean, bb[0], 'backward', '(b) bwd'],
          ];
          for (const [x, ref, dir, col] of checks) {
            if (x === undefined || ref <= 0) continue;
            const [peer, who] = peerKernels(best, w, dir);
            const own = boundsOf(col.startsWith('(a)') ? a : b, dir);
            if (own !== undefined && peer > 0) {
              kernelsCompared++;
              kernelRatios.push(own.kernels / peer);
              if (own.kernels < peer) kernelsBelow++;
            }
            if (x / ref < t) continue;
            // The strongest baseline as run, or magi rebalanced where that is stronger.
            const even = Math.max(ref, peerRebalanced(best, w, dir));
            if (x >= t * even) rebalancedSafe++;
            else
              rebalancedAtRisk.push(
                `| ${batch} | ${SETTING_NAME[setting]} | ${label(batch, setting, w)} | ${col} | ${(x / ref).toFixed(3)}x | ${f(even)} | ${(x / even).toFixed(3)}x |`,
              );
            if (x >= t * peer) peerSafe++;
            else
              peerAtRisk.push(
                `| ${batch} | ${SETTING_NAME[setting]} | ${label(batch, setting, w)} | ${col} | ${(x / ref).toFixed(3)}x | ${who} ${f(peer)} | ${(x / peer).toFixed(3)}x |`,
              );
          }
        }
        const key = `${batch} | ${SETTING_NAME[setting]!.split(' ')[0]} | ${w <= 256 ? '16-256' : w}`;
        const cols = summary.get(key) ?? [[], [], [], []];
        const refs = [bf[0], bb[0], bf[0], bb[0]];
        [fa?.mfuForward.mean, fa?.mfuBackward.mean, fb?.mfuForward.mean, fb?.mfuBackward.mean].forEach((x, i) => {
          if (x !== undefined && refs[i]! > 0) cols[i]!.push(x / refs[i]!);
        });
        summary.set(key, cols);
        lines.push(
          `| ${batch} | ${SETTING_NAME[setting]} | ${label(batch, setting, w)} | ${bf[1]} ${bf[0] ? f(bf[0]) : '-'} | ${bb[1]} ${bb[0] ? f(bb[0]) : '-'} | ${ratio(fa?.mfuForward.mean, bf[0], CEILING.forward, boundsOf(a, 'forward'), fa?.routing)} | ${ratio(fa?.mfuBackward.mean, bb[0], CEILING.backward, boundsOf(a, 'backward'), fa?.routing)} | ${ratio(fb?.mfuForward.mean, bf[0], CEILING.forward, boundsOf(b, 'forward'), fb?.routing)} | ${ratio(fb?.mfuBackward.mean, bb[0], CEILING.backward, boundsOf(b, 'backward'), fb?.routing)} | ${t.toFixed(2)}x |`,
        );
      }
    }
  lines.push(
    '',
    `Targets met: ${met} of ${total} ratios present (the grid has 3 batches x 4 settings x 7 worlds x 4 = 336). ` +
      `\`(miss, ceiling)\`: ${aboveCeiling} of the misses ask for more MFU than any measured launch of the kernel calibration reaches ` +
      `on the SMs left to compute (${CEILING.forward.toFixed(3)} forward, ${CEILING.backward.toFixed(3)} backward: data/calibration/h200-measured.json's best launch, 6 of 132 SMs reserved for communication as every simulated strategy pays): out of reach for any plan with these kernels. ` +
      `\`(miss, kernels)\`: ${aboveKernels} more ask for more than FCP's own kernels reach as that run planned them (its mean kernel MFU: the MFU of its tasks with perfect balance and no exposed communication, src/executors/sim/index.ts): no schedule of those tasks meets them, only other tiles (block sizes, launches) could. ` +
      `\`(miss, balance)\`: ${balanceBound} more ask for more than that run's compute balance allows with nothing exposed (its mean MFU with the busiest rank's compute as the makespan, bench/cell-bounds.ts's \`no idle\`): a better balance of its tasks is needed first. ` +
      `\`(miss, idle)\`: the other ${idleBound}, where that run's compute would meet the target and idle time (waits for transfers, exposed communication, tails) is what is short. ` +
      `Within ${NEAR}x of their target: ${nearMet} of the met and ${nearMiss} of the missed ratios. Two kernel tables of one GPU timed a minute apart moved FCP's ratio by a median of 0.005-0.012x and up to 0.05x on the 60 ratios measured (bench/calibration-sensitivity.ts, docs/results.md "Session 37"): verdicts that close could turn on a re-measured table.`,
  );
  /** `min-max (median m)` of ratios, three decimals. */
  const spread = (xs: number[]): string => {
    if (xs.length === 0) return '-';
    const v = [...xs].sort((x, y) => x - y);
    return `${v[0]!.toFixed(3)}-${v[v.length - 1]!.toFixed(3)} (median ${v[Math.floor(v.length / 2)]!.toFixed(3)})`;
  };
  if (showPeerBounds)
    lines.push(
      '',
      `Against a perfectly balanced peer (\`--peer-bounds\`): ${peerSafe} of the ${met} met ratios still meet their target over every baseline's kernel MFU (the MFU of that baseline's own tasks with perfect balance and nothing exposed, mean of the batches), so no re-balancing of the peers' work takes them. The other ${peerAtRisk.length} could be taken by a peer that balanced its work without cost. FCP's own kernel MFU is below the highest peer kernel MFU in ${kernelsBelow} of the ${kernelsCompared} ratios (FCP's over the peer's: ${spread(kernelRatios)}): its wins come from balance and hidden communication, not from faster kernels.`,
      '',
      '| batch | cluster, network | GPUs | ratio | met | highest peer kernel MFU | FCP / it |',
      '|---|---|---:|---|---|---|---|',
      ...peerAtRisk,
      '',
      `Against MagiAttention with its compute imbalance removed for free (its MFU with the busiest rank's compute excess over the mean taken off the makespan, its communication and waits kept; mean of the batches), where that beats the strongest baseline as run: ${rebalancedSafe} of the ${met} met ratios still meet their target. This is what its dynamic solver (docs/baselines.md) could add by balance at most; it balances by also moving Q and O, whose bytes and its single overlap stage are not charged here. The other ${rebalancedAtRisk.length}:`,
      '',
      '| batch | cluster, network | GPUs | ratio | met | strongest, magi rebalanced | FCP / it |',
      '|---|---|---:|---|---|---|---|',
      ...rebalancedAtRisk,
    );
  const range = (xs: number[]): string => {
    if (xs.length === 0) return '-';
    const lo = Math.min(...xs).toFixed(2);
    const hi = Math.max(...xs).toFixed(2);
    return lo === hi ? `${lo}x` : `${lo}-${hi}x`;
  };
  lines.push(
    '',
    'Summary: FCP / strongest tuned baseline, forward / backward, fluid and contention together:',
    '',
    '| batch | cluster | ranks | mode (a) | mode (b) |',
    '|---|---|---|---|---|',
    ...[...summary].map(
      ([k, c]) => `| ${k} | ${range(c[0]!)} / ${range(c[1]!)} | ${range(c[2]!)} / ${range(c[3]!)} |`,
    ),
  );
  return lines.join('\n');
}

for (const batch of ['longtail', 'magi', 'bimodal'])
  for (const setting of SETTINGS) {
    const t = table(batch, setting);
    if (!t) continue;
    console.log(
      `### ${batch}, ${setting} (simulated; MFU forward / backward; mean of 3 batches; \`(pxn)\`: that strategy's run under \`--routing pxn\`, kept for its shorter forward + backward time, docs/network.md)\n\n${t}\n`,
    );
    const tt = tokenTable(batch, setting);
    if (tt) console.log(`Token imbalance of the layout the rest of the model runs on:\n\n${tt}\n`);
    const lt = layerTable(batch, setting);
    if (lt)
      console.log(
        `Whole layer on the busiest rank, forward + backward, ms (simulated attention + modelled projections and MLP for the tokens of the layout; src/cost/dense.ts):\n\n${lt}\n`,
      );
    const q = setting === 'fluid' ? qualityTable(batch, setting) : null;
    if (q)
      console.log(
        `FCP's own quality, forward / backward, mean of the batches (targets up to 256 ranks: MFU / kernel MFU >= 0.85 in (b), >= 0.80 in (a); compute imbalance <= 3%; communication imbalance <= 10%):\n\n${q}\n`,
      );
    const c = configs(batch, setting);
    if (c && setting === 'fluid' && batch === 'longtail') console.log(`Baseline configurations chosen by the sweep:\n\n${c}\n`);
  }

/** Whether any row of the tables is {@link restricted} (`suffix` '-pxn': its `--routing pxn` run). */
const anyRestricted = (suffix = ''): boolean =>
  ['longtail', 'magi', 'bimodal'].some((b) =>
    SETTINGS.some((st) => worldsOf(read(`best-${b}-${st}`)).some((w) => restricted(b, st, w, suffix))),
  );
if (anyRestricted('-pxn'))
  console.log(
    "`†`: the baselines' run under `--routing pxn` screened only each baseline's default, its winner under direct routing at that scale and, since session 41, the winner of the PXN run it replaced (`fcp compare --sweep-from`, SWEEP_FROM in docs/results/run-headline.sh); their direct-routing run there is a full sweep (except where `*` says otherwise), and the better of the two is kept.\n",
  );
if (anyRestricted())
  console.log(
  "`*` (4096 ranks): each baseline's sweep screened only its default and its own winner at 1024 ranks on the same batch-setting (`fcp compare --sweep-from`, docs/baselines.md \"At 1024 ranks and more\"); rows without `*` ran the full sweep.\n",
);
console.log(
  '`excl.`: left out of the baselines at >= 1024 ranks (docs/baselines.md "At 1024 ranks and more"): ring (at 256 ranks its tuned MFU is 26-124x below the strongest other baseline on every batch-setting) and wlb (its tuned MFU equals bytescale\'s in all 36 cells at 64-256 ranks).\n',
);
console.log(`### Acceptance grid (issue 15; simulated; FCP MFU over the strongest tuned baseline's, per direction)\n\n${acceptanceGrid()}\n`);

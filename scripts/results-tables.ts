/**
 * Prints the markdown tables of the simulated part of docs/results.md from the `compare.json`
 * files under docs/results/ (written by `bash docs/results/run-all.sh`), so every table there can
 * be regenerated. Usage: `npx tsx scripts/results-tables.ts [section ...]` (no section: all).
 * Each block starts with the `fcp compare` lines of the folders it reads, taken from run-all.sh.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const RESULTS = join(ROOT, 'docs', 'results');
const ORDER = ['fcp', 'ring', 'bytescale', 'wlb', 'magi'];

interface Stat {
  mean: number;
  min: number;
  max: number;
}
interface Summary {
  strategy: string;
  world: number;
  batches: number;
  mfuForward: Stat;
  mfuBackward: Stat;
  computeImbalanceForward: number;
  commImbalanceForward: number;
}
interface Row {
  strategy: string;
  world: number;
  batch: number;
  mfuForward: number;
  mfuBackward: number;
  makespans: { forwardMs: number; backwardMs: number };
  bytes: { forward: number; backward: number };
  kernelMfu: { forward: number; backward: number };
  exposedCommMs: { forward: number; backward: number };
}
interface Compare {
  summary: Summary[];
  rows: Row[];
}

const cache = new Map<string, Compare>();
function load(folder: string): Compare {
  let c = cache.get(folder);
  if (c === undefined) {
    c = JSON.parse(readFileSync(join(RESULTS, folder, 'compare.json'), 'utf8')) as Compare;
    cache.set(folder, c);
  }
  return c;
}

/** `run NAME ARGS` lines of run-all.sh, with `X=...` variables and `for v in ...; do` loops expanded. */
function runAllCommands(): Map<string, string> {
  const lines = readFileSync(join(RESULTS, 'run-all.sh'), 'utf8').split('\n');
  const vars = new Map<string, string>();
  const out = new Map<string, string>();
  const subst = (s: string, env: Map<string, string>): string =>
    s.replace(/\$\{?(\w+)\}?/g, (m, v: string) => env.get(v) ?? m);
  const emit = (line: string, env: Map<string, string>): void => {
    const m = /^run (\S+) (.*)$/.exec(subst(line.trim(), env));
    if (m !== null) out.set(m[1]!, `fcp compare ${m[2]!} --out docs/results/${m[1]!}`);
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    const assign = /^([A-Z_]+)=(\S+)$/.exec(line);
    const loop = /^for (\w+) in (.*); do$/.exec(line);
    if (assign !== null) vars.set(assign[1]!, assign[2]!);
    else if (loop !== null) {
      const body: string[] = [];
      while (lines[++i]!.trim() !== 'done') body.push(lines[i]!);
      for (const v of loop[2]!.trim().split(/\s+/)) {
        const env = new Map(vars).set(loop[1]!, v);
        for (const b of body) emit(b, env);
      }
    } else emit(line, vars);
  }
  return out;
}
const COMMANDS = runAllCommands();

function commands(folders: string[]): string {
  const lines = folders.map((f) => {
    const c = COMMANDS.get(f);
    if (c === undefined) throw new Error(`${f} is not in docs/results/run-all.sh`);
    return c;
  });
  return ['```', 'bash docs/results/run-all.sh   # reruns all of the folders below, among others', ...lines, '```'].join(
    '\n',
  );
}

function summaries(folders: string[]): Summary[] {
  return folders.flatMap((f) => load(f).summary);
}
function find(ss: Summary[], strategy: string, world: number): Summary | undefined {
  return ss.find((s) => s.strategy === strategy && s.world === world);
}
function strategiesOf(ss: Summary[]): string[] {
  return ORDER.filter((s) => ss.some((x) => x.strategy === s));
}
function worldsOf(ss: Summary[]): number[] {
  return [...new Set(ss.map((s) => s.world))].sort((a, b) => a - b);
}
const f3 = (x: number): string => x.toFixed(3);
const f2 = (x: number): string => x.toFixed(2);
const f1 = (x: number): string => x.toFixed(1);
const pct0 = (x: number): string => `${Math.round(x * 100)}%`;
const pct1 = (x: number): string => `${(x * 100).toFixed(1)}%`;

function table(head: string[], rows: string[][], firstLeft = true): string {
  const align = head.map((_, i) => (i === 0 && firstLeft ? '---' : '---:'));
  return [head, align, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

/** Mean attention MFU forward / backward per strategy and world. */
function mfuTable(ss: Summary[], worlds = worldsOf(ss)): string {
  const rows = strategiesOf(ss).map((st) => [
    st,
    ...worlds.map((w) => {
      const s = find(ss, st, w);
      return s === undefined ? '-' : `${f3(s.mfuForward.mean)} / ${f3(s.mfuBackward.mean)}`;
    }),
  ]);
  return table(['strategy', ...worlds.map(String)], rows);
}

/** FCP's mean MFU divided by each baseline's, forward / backward. */
function ratioTable(ss: Summary[], worlds = worldsOf(ss)): string {
  const rows = strategiesOf(ss)
    .filter((s) => s !== 'fcp')
    .map((st) => [
      st,
      ...worlds.map((w) => {
        const a = find(ss, 'fcp', w);
        const b = find(ss, st, w);
        if (a === undefined || b === undefined) return '-';
        return `${f2(a.mfuForward.mean / b.mfuForward.mean)} / ${f2(a.mfuBackward.mean / b.mfuBackward.mean)}`;
      }),
    ]);
  return table(['FCP / baseline', ...worlds.map(String)], rows);
}

/** Forward compute / communication imbalance (max/mean - 1), mean over batches. */
function imbalanceTable(ss: Summary[]): string {
  const worlds = worldsOf(ss);
  const rows = strategiesOf(ss).map((st) => [
    st,
    ...worlds.map((w) => {
      const s = find(ss, st, w);
      return s === undefined ? '-' : `${pct0(s.computeImbalanceForward)} / ${pct0(s.commImbalanceForward)}`;
    }),
  ]);
  return table(['strategy', ...worlds.map(String)], rows);
}

const mean = (xs: number[]): number => xs.reduce((s, v) => s + v, 0) / Math.max(1, xs.length);

/**
 * Forward detail per strategy and world (means over batches): kernel MFU, makespan, mean compute
 * time per rank (makespan x MFU / kernel MFU), mean exposed communication, bytes moved in total.
 */
function detailTable(folders: string[], strategies: string[]): string {
  const rows: string[][] = [];
  for (const f of folders) {
    const c = load(f);
    for (const st of strategies) {
      for (const w of worldsOf(c.summary)) {
        const rs = c.rows.filter((r) => r.strategy === st && r.world === w);
        if (rs.length === 0) continue;
        const make = mean(rs.map((r) => r.makespans.forwardMs));
        const compute = mean(rs.map((r) => (r.makespans.forwardMs * r.mfuForward) / r.kernelMfu.forward));
        rows.push([
          st,
          String(w),
          `${f3(mean(rs.map((r) => r.kernelMfu.forward)))} / ${f3(mean(rs.map((r) => r.kernelMfu.backward)))}`,
          f1(make),
          f1(compute),
          f1(mean(rs.map((r) => r.exposedCommMs.forward))),
          f1(mean(rs.map((r) => r.bytes.forward)) / 1e9),
        ]);
      }
    }
  }
  return table(
    [
      'strategy',
      'ranks',
      'kernel MFU fwd / bwd',
      'fwd makespan ms',
      'fwd compute ms per rank',
      'fwd exposed comm ms per rank',
      'fwd GB moved',
    ],
    rows,
  );
}

/** One row per single-strategy folder (FCP at one world size): means over its batches. */
function configTable(folders: string[]): string {
  const rows = folders.map((f) => {
    const c = load(f);
    const s = c.summary[0]!;
    const rs = c.rows;
    return [
      f,
      f3(s.mfuForward.mean),
      f3(s.mfuBackward.mean),
      `${f3(mean(rs.map((r) => r.kernelMfu.forward)))} / ${f3(mean(rs.map((r) => r.kernelMfu.backward)))}`,
      `${f1(mean(rs.map((r) => r.makespans.forwardMs)))} / ${f1(mean(rs.map((r) => r.makespans.backwardMs)))}`,
      pct1(s.computeImbalanceForward),
      `${f1(mean(rs.map((r) => r.exposedCommMs.forward)))} / ${f1(mean(rs.map((r) => r.exposedCommMs.backward)))}`,
    ];
  });
  return table(
    [
      'config',
      'MFU fwd',
      'MFU bwd',
      'kernel MFU fwd/bwd',
      'makespan fwd/bwd ms',
      'compute imb fwd',
      'exposed comm fwd/bwd ms',
    ],
    rows,
  );
}

const ABLATION_STEPS = ['1-base', '2-pipeline', '3-rounds', '4-coalesce', '5-reshuffle'];
const PAPER_TABLE2: Record<string, string> = {
  '1-base': '(1) no pipeline | 0.29 / 0.37',
  '2-pipeline': '(2) + block pipeline | 0.48 / 0.46',
  '3-rounds': '(3) + congestion-free rounds | 0.62 / 0.59',
  '4-coalesce': '(4) + coalescing | 0.70 / 0.69',
  '5-reshuffle': '(5) + reshuffler | 0.75 / 0.74',
};
/** Our cumulative ablation next to the paper's Table 2 (GPU-X, 128 GPUs; constants from the paper). */
function paperTable(): string {
  const rows = ABLATION_STEPS.map((step) => {
    const ours = ['hopper-ib', 'ratio-5920'].map((c) => {
      const s = load(`ablation-${c}-${step}`).summary[0]!;
      return `${f3(s.mfuForward.mean)} / ${f3(s.mfuBackward.mean)}`;
    });
    return [...PAPER_TABLE2[step]!.split(' | '), ...ours];
  });
  return table(['step', 'paper (GPU-X, 128 GPUs) fwd / bwd', 'ours hopper-ib', 'ours ratio-5920'], rows).replace(
    /\| ---: \| ---: \| ---: \|/,
    '| --- | --- | --- |',
  );
}

const ablationFolders = ['hopper-ib', 'ratio-5920'].flatMap((c) => ABLATION_STEPS.map((s) => `ablation-${c}-${s}`));
const blockFolders = ['', 'fixed-'].flatMap((p) => [1024, 2048, 4096, 6144, 8192].map((b) => `blocks-${p}${b}`));

function weak(small: string, large: string[], name: string): string {
  const ss = summaries([small]);
  const ls = summaries(large);
  const parts = [
    `#### ${name}: commands`,
    commands([small, ...large]),
    `#### ${name}: MFU forward / backward, 16-256 ranks (mean over batches)`,
    mfuTable(ss),
    ratioTable(ss),
    `#### ${name}: 512-4096 ranks`,
    mfuTable(ls),
    ratioTable(ls),
    `#### ${name}: forward detail`,
    detailTable([small, ...large], ['fcp', 'magi']),
  ];
  return parts.join('\n\n');
}

const SECTIONS: Record<string, () => string> = {
  'weak-longtail': () => weak('weak-longtail', ['large-longtail', 'large-longtail-ring'], 'longtail'),
  'weak-magi': () => weak('weak-magi', ['large-magi'], 'magi'),
  imbalance: () =>
    [
      commands(['weak-longtail', 'weak-magi', 'large-longtail', 'large-magi']),
      '`longtail`, 16-256 ranks:',
      imbalanceTable(summaries(['weak-longtail'])),
      '`magi` workload, 16-256 ranks:',
      imbalanceTable(summaries(['weak-magi'])),
      '`longtail`, 512-4096 ranks:',
      imbalanceTable(summaries(['large-longtail', 'large-longtail-ring'])),
      '`magi` workload, 512-4096 ranks:',
      imbalanceTable(summaries(['large-magi'])),
    ].join('\n\n'),
  ablation: () => [commands(ablationFolders), configTable(ablationFolders), paperTable()].join('\n\n'),
  blocks: () => [commands(blockFolders), configTable(blockFolders)].join('\n\n'),
  workloads: () =>
    ['workload-bimodal', 'workload-weak-longtail', 'torus']
      .flatMap((f) => [
        `#### ${f}`,
        commands([f]),
        mfuTable(summaries([f])),
        ratioTable(summaries([f])),
        detailTable([f], ['fcp', 'magi']),
      ])
      .join('\n\n'),
  kernels: () =>
    ['weak-longtail-varlen', 'weak-longtail-ratio5920']
      .flatMap((f) => [`#### ${f}`, commands([f]), mfuTable(summaries([f])), ratioTable(summaries([f]))])
      .join('\n\n'),
};

const wanted = process.argv.slice(2);
for (const name of wanted.length > 0 ? wanted : Object.keys(SECTIONS)) {
  const section = SECTIONS[name];
  if (section === undefined) throw new Error(`unknown section ${name}; one of ${Object.keys(SECTIONS).join(', ')}`);
  console.log(`### ${name}\n\n${section()}\n`);
}

/**
 * `fcp compare-plans`: plan one batch with several strategies at several world sizes, validate
 * every plan, and print the validator's rule-6 metrics side by side (no simulation): compute and
 * communication imbalance, bytes by kind, rounds, worst congestion, tasks, planning time.
 * `--json` prints the rows as JSON, `--csv` as CSV; `-o FILE` also writes them as JSON (atomically).
 */
import type { Command } from 'commander';
import { fail } from '../core/issues.ts';
import { checkOutputFile } from '../core/outputs.ts';
import { getPlanner, plannerNames } from '../experiments/strategies.ts';
import { writeFileAtomic } from '../plan/io.ts';
import { validatePlan } from '../plan/validate.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { type ProblemOptions, resolveProblem } from '../problem/problem.ts';
import { type Progress, silentProgress } from '../report/progress.ts';
import {
  addPlannerOptions,
  addProblemOptions,
  intListOption,
  plannerOptionsFrom,
  problemOptionsFrom,
} from './common.ts';
import { addOutOption, addOutputOptions, outPath, outputOf } from './output.ts';
import type { CsvTable } from './tables.ts';

/** One (strategy, world) row. */
export interface CompareRow {
  strategy: string;
  world: number;
  sequences: number;
  tokens: number;
  /** True when the validator found no issue. */
  valid: boolean;
  /** Codes of the validator's issues (distinct, in order). */
  issueCodes: string[];
  /** Wall-clock planning time in milliseconds (the only non-deterministic field). */
  planMs: number;
  computeImbalance: number;
  commImbalance: number;
  /** Bytes by kind, forward plus backward. */
  bytes: { in: number; kv: number; out: number; dkv: number; total: number };
  rounds: { forward: number; backward: number };
  groups: { forward: number; backward: number };
  congestion: { forward: number; backward: number };
  /** Tasks after expanding chunk rows, and the rows that hold them. */
  tasks: number;
  taskRows: number;
  chunkTaskRows: number;
  peakResidentTokens: number;
  /** Strategy-specific note (wlb: the strategy it chose). */
  note: string;
}

/** What {@link comparePlans} runs. */
export interface CompareOptions {
  /** Problem options; `world` is replaced by each entry of `worlds`. */
  problem: ProblemOptions;
  worlds: number[];
  strategies: string[];
  planner: PlannerOptions;
}

/** Plans, validates and measures every (world, strategy) pair, worlds outermost. */
export function comparePlans(o: CompareOptions, progress: Progress = silentProgress): CompareRow[] {
  if (o.worlds.length === 0) fail('option.world', '--world names no world size', 'world');
  if (o.strategies.length === 0) fail('option.strategies', '--strategies names no strategy', 'strategies');
  const planners = o.strategies.map((s) => getPlanner(s)); // unknown names fail before any work
  const rows: CompareRow[] = [];
  for (const world of o.worlds) {
    const problem = resolveProblem({ ...o.problem, world });
    for (const planner of planners) {
      progress.step(`${planner.name} at ${world} ranks`);
      const t0 = performance.now();
      const plan = planner.plan(problem, o.planner);
      const planMs = performance.now() - t0;
      const { issues, report: r } = validatePlan(plan);
      const wlb = (plan.meta as { wlb?: { chosen?: string } } | undefined)?.wlb;
      rows.push({
        strategy: planner.name,
        world,
        sequences: r.sequences,
        tokens: r.tokens,
        valid: issues.length === 0,
        issueCodes: [...new Set(issues.map((i) => i.code))],
        planMs,
        computeImbalance: r.computeImbalance,
        commImbalance: r.commImbalance,
        bytes: {
          in: r.forward.bytes.in + r.backward.bytes.in,
          kv: r.forward.bytes.kv + r.backward.bytes.kv,
          out: r.forward.bytes.out + r.backward.bytes.out,
          dkv: r.forward.bytes.dkv + r.backward.bytes.dkv,
          total: r.totalBytes,
        },
        rounds: { forward: r.forward.rounds, backward: r.backward.rounds },
        groups: { forward: r.forward.groups, backward: r.backward.groups },
        congestion: { forward: r.forward.congestion, backward: r.backward.congestion },
        tasks: r.tasks,
        taskRows: r.taskRows,
        chunkTaskRows: r.chunkTaskRows,
        peakResidentTokens: r.peakResidentTokens,
        note: wlb?.chosen ? `chose ${wlb.chosen}` : '',
      });
    }
  }
  progress.done();
  return rows;
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
const gb = (x: number): string => (x / 1e9).toFixed(2);
const count = (x: number): string =>
  x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : x >= 1e4 ? `${(x / 1e3).toFixed(1)}k` : String(x);

/** The rows as an aligned text table (bytes in GB, forward plus backward). */
export function formatCompareTable(rows: CompareRow[]): string {
  const head = [
    'world',
    'strategy',
    'valid',
    'comp imb',
    'comm imb',
    'in GB',
    'kv GB',
    'dkv GB',
    'out GB',
    'total GB',
    'rounds f/b',
    'cong f/b',
    'tasks',
    'plan ms',
    'note',
  ];
  const body = rows.map((r) => [
    String(r.world),
    r.strategy,
    r.valid ? 'yes' : `NO: ${r.issueCodes.join(',')}`,
    pct(r.computeImbalance),
    pct(r.commImbalance),
    gb(r.bytes.in),
    gb(r.bytes.kv),
    gb(r.bytes.dkv),
    gb(r.bytes.out),
    gb(r.bytes.total),
    `${r.rounds.forward}/${r.rounds.backward}`,
    `${r.congestion.forward}/${r.congestion.backward}`,
    count(r.tasks),
    r.planMs.toFixed(0),
    r.note,
  ]);
  const all = [head, ...body];
  const width = head.map((_, c) => Math.max(...all.map((row) => row[c]!.length)));
  const left = new Set([1, 2, 14]);
  return all
    .map((row) =>
      row
        .map((cell, c) => (left.has(c) ? cell.padEnd(width[c]!) : cell.padStart(width[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The rows as a CSV table (bytes in bytes, times in ms, imbalances as fractions). */
export function comparePlansCsv(rows: readonly CompareRow[]): CsvTable {
  const header = [
    'world',
    'strategy',
    'valid',
    'issue_codes',
    'sequences',
    'tokens',
    'compute_imbalance',
    'comm_imbalance',
    'bytes_in',
    'bytes_kv',
    'bytes_dkv',
    'bytes_out',
    'bytes_total',
    'rounds_forward',
    'rounds_backward',
    'congestion_forward',
    'congestion_backward',
    'tasks',
    'peak_resident_tokens',
    'plan_ms',
    'note',
  ];
  return [
    header,
    rows.map((r) => [
      r.world,
      r.strategy,
      r.valid,
      r.issueCodes.join(' '),
      r.sequences,
      r.tokens,
      r.computeImbalance,
      r.commImbalance,
      r.bytes.in,
      r.bytes.kv,
      r.bytes.dkv,
      r.bytes.out,
      r.bytes.total,
      r.rounds.forward,
      r.rounds.backward,
      r.congestion.forward,
      r.congestion.backward,
      r.tasks,
      r.peakResidentTokens,
      Number(r.planMs.toFixed(3)),
      r.note,
    ]),
  ];
}

/** Registers `fcp compare-plans`. */
export function register(program: Command): void {
  const cmd = program
    .command('compare-plans')
    .description(
      'plan a batch with several strategies and world sizes, validate, and tabulate plan metrics (no simulation)',
    );
  addProblemOptions(cmd, { world: '16,64,256' });
  addPlannerOptions(cmd).option(
    '--strategies <list>',
    'comma-separated strategies (default: all registered)',
  );
  addOutOption(cmd, 'also write the rows as JSON to this file');
  addOutputOptions(cmd, {
    json: 'the rows (one per world and strategy)',
    csv: 'the table (one row per world and strategy; bytes in bytes, forward plus backward)',
  });
  cmd.action((opts: Record<string, unknown>) => {
    const out = outputOf('compare-plans', opts);
    const file = outPath(opts);
    const worlds = intListOption(opts.world, 'world');
    const strategies =
      opts.strategies === undefined
        ? plannerNames()
        : String(opts.strategies)
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s !== '');
    const problem = problemOptionsFrom({ ...opts, world: worlds[0] ?? 1 });
    const planner = plannerOptionsFrom(opts);
    if (file !== undefined) checkOutputFile(file, '--out');
    // Planning time grows with the world: weight the steps by it for the estimate.
    const progress = out.progress(
      worlds.length * strategies.length,
      worlds.flatMap((w) => strategies.map(() => w)),
    );
    const rows = comparePlans({ problem, worlds, strategies, planner }, progress);
    if (out.json) out.printJson(rows);
    else if (out.csv) out.printCsv(...comparePlansCsv(rows));
    else out.text(formatCompareTable(rows));
    if (file !== undefined) {
      writeFileAtomic(file, `${JSON.stringify(rows, null, 2)}\n`);
      out.wrote(file, `${rows.length} rows`);
    }
    if (rows.some((r) => !r.valid)) {
      out.note('some plans are invalid (see the valid column)');
      process.exitCode = 1;
    }
  });
}

/**
 * `fcp plan`: plans one batch with a strategy, checks the plan with the validator, prints a summary
 * and, with `-o`, writes the plan (`.json`, or gzip for `.json.gz`; atomically, so a failure
 * leaves no file behind).
 *
 *   fcp plan --strategy fcp --batch longtail --world 64 --tokens-per-rank 32768 --seed 1 \
 *            --mask causal --block-size 4096 -o plan.json.gz
 *   fcp plan --list
 *
 * The summary is the validator's rule-6 report (rounds, groups, Δ of `kv` and its rounds,
 * congestion, bytes by kind, compute and communication imbalance) plus, for `fcp`, the planner's
 * own statistics (blocks, units, tasks, Δ and rounds per kind, stage timings) and the reshuffle
 * bytes of the same plan without the locality tie-break. Bad input: one line per problem and exit
 * code 2 (main.ts); a plan that breaks a rule (a planner bug): the issues and exit code 1, and no
 * file is written.
 */
import type { Command } from 'commander';
import { fail, formatIssue } from '../core/issues.ts';
import { checkOutputFile } from '../core/outputs.ts';
import { calibrationFromOption } from '../cost/calibration.ts';
import { CALIBRATION_SPEC } from '../executors/sim/option-specs.ts';
import { allPlanners, getPlanner } from '../experiments/strategies.ts';
import { writePlan } from '../plan/io.ts';
import { ESTIMATE_ROW_LIMIT, estimateMemory, estimateRows, formatMemory } from '../plan/memory.ts';
import { formatReport, type planReport, reshuffleBytes } from '../plan/report.ts';
import type { Plan } from '../plan/types.ts';
import { validatePlan } from '../plan/validate.ts';
import type { FcpStats, TriedCandidate, TuningRecord } from '../planners/fcp/index.ts';
import { type NetworkModel, type Routing, resolveCluster } from '../problem/cluster.ts';
import {
  addPlannerOptions,
  addProblemOptions,
  addSpecOption,
  plannerOptionsFrom,
  problemFrom,
} from './common.ts';
import { startLocalityReplan } from './locality.ts';
import { addMemoryOptions, memoryOptionsFrom } from './memory-options.ts';
import { addOutOption, addOutputOptions, outPath, outputOf } from './output.ts';
import { reportCsv } from './tables.ts';

const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(2)} GB`;
const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;

/** What mode (b) records in `meta.loaderLayout` (planners/fcp/index.ts), as far as the summary reads it. */
interface LoaderLayoutMeta {
  swapSteps?: number;
  search?: string;
  levelledImbalance?: { forward: number; backward: number };
  swappedImbalance?: { forward: number; backward: number };
}

/**
 * One line: what the self-tuner planned and kept (issue 15, deliverable 5); null without a record.
 * `search`: mode (b)'s layout search level, which sized its candidates (the budget only when given).
 */
function tuningLine(t: TuningRecord | undefined, search?: string): string | null {
  const c = t?.candidates[t.chosen];
  if (!t || !c) return null;
  const name = (x: TriedCandidate): string =>
    `${x.blockSize !== undefined ? `blocks ${x.blockSize}, ` : ''}groups of ${x.coalesce}${x.fanOut ? ', relays' : ''}`;
  const others = t.candidates.filter((_, i) => i !== t.chosen).map((x) => x.estimateMs);
  const next = others.length > 0 ? `; next best ${Math.min(...others).toFixed(1)} ms` : '';
  const sized = search !== undefined ? `${search} layout search` : `budget ${t.budgetMs} ms`;
  return `self-tuning (${sized}): ${t.candidates.length} candidates, kept ${name(c)} (estimate ${c.estimateMs.toFixed(1)} ms fwd+bwd${next})`;
}

/** The planner-specific lines of the summary (FCP's statistics from `meta`). */
function fcpLines(plan: Plan): string[] {
  const st = plan.meta?.stats as FcpStats | undefined;
  if (!st) return [];
  const kinds = (p: FcpStats['forward']): string =>
    Object.keys(p.rounds)
      .map((k) => `${k} ${p.rounds[k]} rounds / Δ ${p.delta[k]} / ${p.transfers[k]} transfers`)
      .join(', ') +
    (p.relays ? `; two-hop across nodes (PXN): ${p.relays.in} in, ${p.relays.out} out relayed` : '');
  const lines = [
    `blocks ${st.blocks} (size ${st.blockSize.min}..${st.blockSize.max}), units ${st.units}, home runs ${st.homeRuns}, tasks ${st.tasks}`,
    `balance: ${pct(st.greedyImbalance)} after the greedy, ${st.refineSteps} refinement steps${
      st.phaseSwaps !== undefined ? `, per-phase exchanges ${st.phaseSwaps} (--phase-swaps)` : ''
    }${st.nicSwaps !== undefined ? `, NIC swaps ${st.nicSwaps} (--nic-swaps)` : ''}`,
    `forward (${st.forward.groups} groups): ${kinds(st.forward)}`,
    `backward (${st.backward.groups} groups): ${kinds(st.backward)}`,
  ];
  const ll = plan.meta?.loaderLayout as LoaderLayoutMeta | undefined;
  const tuned = tuningLine(
    plan.meta?.tuning as TuningRecord | undefined,
    ll ? (ll.search ?? 'full') : undefined,
  );
  if (tuned) lines.push(tuned);
  if (ll?.swapSteps !== undefined && ll.levelledImbalance && ll.swappedImbalance) {
    const { levelledImbalance: a, swappedImbalance: b } = ll;
    lines.push(
      `loader layout (${ll.search ?? 'full'} search): ${ll.swapSteps} token swaps, modelled compute imbalance fwd ${pct(a.forward)} -> ${pct(b.forward)}, bwd ${pct(a.backward)} -> ${pct(b.backward)}`,
    );
  }
  const t = plan.meta?.timings as Record<string, number> | undefined;
  if (t)
    lines.push(
      `planning stages (ms): ${Object.entries(t)
        .map(([k, v]) => `${k} ${v.toFixed(1)}`)
        .join(', ')}`,
    );
  return lines;
}

/** Registers `fcp plan`. */
export function register(program: Command): void {
  const cmd = program
    .command('plan')
    .description('plan a batch with a strategy, validate it, print a summary, and write it with -o')
    .option('--strategy <name>', 'planning strategy (see --list)', 'fcp')
    .option('--list', 'list the strategies and exit')
    .option('--no-validate', 'skip the validator (the summary then lacks the rule-6 report)')
    .option(
      '--no-compare-locality',
      'fcp: skip re-planning without the locality tie-break (mode (a) only: mode (b) has no reshuffle)',
    )
    .option(
      '--routing <how>',
      "NCCL routing across nodes the plan is made for: direct or pxn (NCCL's default for point-to-point; FCP's mode (a) then relays its reshuffle across nodes); simulate it with the same --routing (default: the preset's, direct)",
    )
    .option(
      '--network <model>',
      "network model the plan is made for: fluid or contention (FCP's estimates, and so its self-tuner, charge NIC ports for concurrent flows under contention); simulate it with the same --network (default: the preset's, fluid)",
    );
  // The kernel tables FCP's time model plans with, declared once with the simulator's options.
  addSpecOption(cmd, CALIBRATION_SPEC);
  addMemoryOptions(cmd);
  addOutOption(cmd, 'write the plan here (.json, or .json.gz for gzip)', undefined, '--output');
  addOutputOptions(cmd, {
    json: 'the summary (validity, issues, timings, statistics, report)',
    csv: 'the rule-6 report, one row per phase (forward, backward, total)',
  });
  addProblemOptions(cmd);
  addPlannerOptions(cmd);
  cmd.action(async (opts: Record<string, unknown>) => {
    const out = outputOf('plan', opts);
    if (opts.list) {
      const planners = allPlanners();
      const w = Math.max(...planners.map((p) => p.name.length));
      out.text(planners.map((p) => `${p.name.padEnd(w)}  ${p.description}`).join('\n'));
      return;
    }
    if (out.csv && opts.validate === false)
      fail('cli.conflictingOptions', '--csv prints the rule-6 report; drop --no-validate', 'csv');
    const planner = getPlanner(String(opts.strategy));
    const memOpts = opts.memory !== false ? memoryOptionsFrom(opts) : undefined;
    // resolveCluster rejects a routing other than direct or pxn (`option.routing`) and a network
    // model other than fluid or contention (`option.network`).
    const overrides = {
      ...(opts.routing !== undefined ? { routing: String(opts.routing) as Routing } : {}),
      ...(opts.network !== undefined ? { network: String(opts.network) as NetworkModel } : {}),
    };
    const problem = problemFrom(
      opts,
      Object.keys(overrides).length === 0
        ? {}
        : { cluster: resolveCluster(String(opts.cluster ?? 'hopper-ib'), overrides) },
    );
    const options = {
      ...plannerOptionsFrom(opts),
      ...(opts.calibration !== undefined
        ? { calibration: calibrationFromOption(String(opts.calibration)) }
        : {}),
    };
    // Progress lines on stderr for a slow run (mode (b) at 1024 ranks plans for seconds): the
    // planner reports its fraction done (PlannerOptions.onProgress), then each check is a step.
    const validate = opts.validate !== false;
    // Mode (b) (the loader layout) has no reshuffle at all: nothing to compare, no re-plan (at 512
    // ranks it took as long as the plan itself, for two zeros).
    const modeB = options.loaderLayout === true;
    const compareLocality =
      planner.name === 'fcp' && opts.compareLocality !== false && !options.noLocality && !modeB;
    const path = outPath(opts);
    // Before any planning: at 4096 ranks a plan takes seconds, and an unwritable path found only
    // when writing threw it away (bench/fuzz-cli.ts, session 39).
    if (path !== undefined) checkOutputFile(path, '--out');
    const progress = out.progress(
      1 + (validate ? 1 : 0) + (compareLocality ? 1 : 0) + (memOpts ? 1 : 0) + (path !== undefined ? 1 : 0),
    );
    const onProgress = (f: number): void => progress.fraction(f);
    // The plan without the locality tie-break, for its reshuffle bytes: at scale on a worker
    // thread from now on, while this thread plans, validates and estimates memory (locality.ts).
    const replan = compareLocality ? startLocalityReplan(planner.name, problem, options) : undefined;
    progress.step(`plan ${planner.name}, ${problem.world} ranks`);
    const t0 = performance.now();
    const plan = planner.plan(problem, { ...options, onProgress });
    const planMs = performance.now() - t0;

    let valid = true;
    let issues: string[] = [];
    let report = undefined as ReturnType<typeof planReport> | undefined;
    if (validate) {
      progress.step('validate');
      // NIC congestion counted for the nodes and routing the plan was made for.
      const nic = { gpusPerNode: problem.gpusPerNode, routing: problem.cluster.routing };
      const v = validatePlan(plan, { nic, onProgress });
      valid = v.issues.length === 0;
      issues = v.issues.map(formatIssue);
      report = v.report;
    }

    // Per-rank peak memory on the torch runtime (src/plan/memory.ts), for valid plans.
    // Plans of millions of (expanded chunk) rows are skipped: the estimate would take longer than planning.
    if (memOpts) progress.step('memory estimate');
    const rows = memOpts && valid ? estimateRows(plan) : 0;
    const memory =
      memOpts && valid && rows <= ESTIMATE_ROW_LIMIT ? estimateMemory(plan, memOpts, onProgress) : undefined;
    // Reshuffle bytes against the same plan without the locality tie-break (fcp only), before the
    // file: a re-plan that fails (a coded error) leaves no file, as it did on this thread.
    let locality: { bytes: number; withoutLocality: number } | undefined;
    if (replan) {
      progress.step('re-plan without the locality tie-break');
      locality = { bytes: reshuffleBytes(plan), withoutLocality: await replan.result() };
    }
    // The plan file (an invalid plan is never written): seconds at 4096 ranks (tens of MB of JSON).
    if (valid && path !== undefined) {
      progress.step(`write ${path}`);
      writePlan(path, plan);
    }
    progress.done();
    if (out.csv && report) {
      out.printCsv(...reportCsv(report));
    } else if (out.json) {
      const summary = {
        memory: memory && memOpts ? { ...memOpts, ranks: memory } : null,
        strategy: planner.name,
        valid,
        issues,
        planMs,
        timings: plan.meta?.timings ?? null,
        stats: plan.meta?.stats ?? null,
        report: report ?? null,
        reshuffle: locality ?? null,
      };
      out.printJson(summary);
    } else {
      const lines: string[] = [];
      if (report) lines.push(formatReport(report), '');
      lines.push(...fcpLines(plan));
      if (locality) {
        const saved = locality.withoutLocality > 0 ? 1 - locality.bytes / locality.withoutLocality : 0;
        lines.push(
          `reshuffle: ${gb(locality.bytes)} (without the locality tie-break: ${gb(locality.withoutLocality)}, ${pct(saved)} saved)`,
        );
      }
      if (memory && memOpts) lines.push(...formatMemory(memory, memOpts));
      else if (rows > ESTIMATE_ROW_LIMIT)
        lines.push(`memory per rank: not estimated (${rows} rows once chunk rows are expanded)`);
      lines.push(`planned in ${planMs.toFixed(1)} ms`);
      if (!valid)
        lines.push(`INVALID plan (${issues.length} issues; a planner bug, please report):`, ...issues);
      out.text(lines.join('\n'));
    }
    if (!valid) {
      process.exitCode = 1;
      return;
    }
    if (path !== undefined) out.wrote(path, `${planner.name} plan, ${plan.world} ranks`);
  });
}

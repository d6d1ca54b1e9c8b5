/**
 * The plan validator: checks rules 1-5 of docs/plan-format.md and computes the rule-6
 * report. `issues` is empty exactly when the plan is valid.
 *
 * Codes: `plan.structure.<what>` for malformed tables (ids out of range, bad CSR offsets, ...;
 * when any is found the rule checks are skipped and the report is all zeros), then
 * `plan.rule1.*` layouts, `plan.rule2.*` tasks, `plan.rule3.*` data presence, `plan.rule4.*`
 * outputs, `plan.rule5.*` ordering. Each issue names the table (`path`, e.g. `forward.transfers`
 * or `chunkTasks`) and the offending row when there is one. The number of issues is capped
 * (`maxIssues`, default 100) but every broken rule keeps at least one issue.
 *
 * Rule codes (`plan.` prefix omitted):
 * - rule1: `range` (layout row outside its sequence), `gap`, `overlap`.
 * - rule2: `pairMissing`, `pairOverlap`, `masked`, `notHome` (query range not home on the task's
 *   rank), `opRank` (task in an op of another rank), `taskNotRun`, `taskRunTwice`.
 * - rule3: `qMissing` (forward Q / backward dO not on the op's rank by its `after`), `kvMissing`,
 *   `senderMissing` (sender lacks what it sends before its group), `inNotHome`.
 * - rule4: `outMissing`, `outEarly` (out before the data is final), `outDuplicate`, `outNotUser`,
 *   `dkvLost`, `dkvDuplicate` (two pushes of one partial in one group), `dkvRace` (an op may add
 *   to a partial while it is pushed).
 * - rule5: `groupStart`, `groupOrder` (decreasing), `groupGap`, `sendAfterRank`, `deadlock`.
 * - also `plan.format` and `plan.structure.*` (world, mask, seqLength, columns, rank, seq, range,
 *   set, part, round, selfTransfer, kind, after, offsets, taskId, transferId, computeId).
 *
 * Decisions beyond docs/plan-format.md (documented for every planner and executor):
 * - Every task and every chunk task runs in exactly one compute op of the forward phase and in
 *   exactly one of the backward phase, an op of the task's own rank.
 * - A transfer may have several `sendAfter` ops (all on its sender); it waits for the latest.
 * - A task needs its whole key range [kvStart, kvStart+kvLength) present, not only attended keys.
 * - `in` goes from the user rank to the home rank, directly or through relays (a rank that is not
 *   the home receives it and sends it on in a later group: FCP's two-hop reshuffle across nodes);
 *   `out` from the home rank to the user rank, directly or through one such relay, and reaches the
 *   user rank only once per token; no transfer goes from a rank to itself.
 * - `dkv` semantics and the race rule: see validate-outputs.ts.
 *
 * Chunk rows are checked through a few expanded representative sequences (validate-expand.ts),
 * so ring-like plans validate in time independent of the number of sequences in a set.
 */

import { FcpError, type FcpIssue, issue } from '../core/issues.ts';
import { progressSpan } from '../core/progress-span.ts';
import { type PlanReport, planReport, zeroReport } from './report.ts';
import type { NicRoute } from './report-nic.ts';
import { PLAN_FORMAT, type Plan } from './types.ts';
import { checkChains } from './validate-chain.ts';
import { checkDataPresence, layoutHolding } from './validate-data.ts';
import { flattenPlan } from './validate-expand.ts';
import { bucketBySeq, RangeIndex } from './validate-index.ts';
import { IssueSink } from './validate-issues.ts';
import { checkLayout } from './validate-layout.ts';
import { checkOrder } from './validate-order.ts';
import { checkKvOrigin } from './validate-origin.ts';
import { checkOutputs } from './validate-outputs.ts';
import { checkStructure } from './validate-structure.ts';
import { checkTasks, opMembership } from './validate-tasks.ts';

export type { PlanReport } from './report.ts';

/** Options of {@link validatePlan}. */
export interface ValidateOptions {
  /** Most issues kept (default 100); every broken rule still keeps one. */
  maxIssues?: number;
  /** Node size and routing the report's NIC congestion is counted for (default: report.ts, planReport). */
  nic?: NicRoute;
  /**
   * Called with the fraction of the work done (non-decreasing, ending at 1), between stages: a
   * plan of millions of rows takes seconds (`fcp plan --world 4096`: about 7 s), and a command
   * shows progress on anything slower than 2 s.
   */
  onProgress?: (fraction: number) => void;
}

/**
 * Where validatePlan's stages end, as fractions of its time, measured (timestamps of the calls) on
 * plans of 4096 ranks: FCP's (3.9 million rows, 7.9 s) index 0.07, tasks 0.12, forward 0.28,
 * backward 0.55; magi's (2.0 million rows, 3.5 s) 0.10, 0.16, 0.32, 0.56; the rule-6 report the
 * rest (its own split: report.ts).
 */
const STAGE_END = { index: 0.08, tasks: 0.14, forward: 0.3, backward: 0.55 } as const;

/** What {@link validatePlan} found. */
export interface ValidationResult {
  /** Empty exactly when the plan is valid. */
  issues: FcpIssue[];
  report: PlanReport;
  /** Issues found beyond the cap and not listed. */
  omitted: number;
}

/** Validates a plan against rules 1-5 and reports rule 6. Pure; never throws on bad plans. */
export function validatePlan(plan: Plan, options: ValidateOptions = {}): ValidationResult {
  const maxIssues = options.maxIssues ?? 100;
  const progress = options.onProgress;
  const sink = new IssueSink(Number.isInteger(maxIssues) && maxIssues >= 1 ? maxIssues : 100);
  if (plan.format !== PLAN_FORMAT)
    sink.add('plan.format', `plan format ${JSON.stringify(plan.format)} is not ${PLAN_FORMAT}`, 'format');
  if (!checkStructure(plan, sink))
    return { issues: sink.issues, report: zeroReport(plan), omitted: sink.omitted };

  checkChains(plan, sink);
  const originsOk = checkKvOrigin(plan, sink);
  const fo = checkOrder(plan, plan.forward, 'forward', sink);
  const bo = checkOrder(plan, plan.backward, 'backward', sink);
  const fm = opMembership(plan, plan.forward, 'forward', sink);
  const bm = opMembership(plan, plan.backward, 'backward', sink);
  const flat = flattenPlan(plan, {
    opOfTask: { forward: fm.tasks, backward: bm.tasks },
    opOfChunkTask: { forward: fm.chunkTasks, backward: bm.chunkTasks },
    sendAfter: { forward: fo.transfers, backward: bo.transfers },
    chunkSendAfter: { forward: fo.chunkTransfers, backward: bo.chunkTransfers },
  });
  const nSeq = plan.sequences.length;
  const userB = checkLayout(flat, flat.user, 'userLayout', sink);
  const homeB = checkLayout(flat, flat.home, 'homeLayout', sink);
  const home = new RangeIndex(nSeq, [layoutHolding(flat.home)]);
  const t = flat.tasks;
  const taskB = { byQuery: bucketBySeq(nSeq, t.seq, t.n, t.qs), byKey: bucketBySeq(nSeq, t.seq, t.n, t.ks) };
  progress?.(STAGE_END.index);
  checkTasks(flat, home, taskB.byQuery, sink);
  progress?.(STAGE_END.tasks);
  let prev: number = STAGE_END.tasks;
  for (const ph of [flat.forward, flat.backward]) {
    checkDataPresence(flat, ph, home, sink, originsOk ? plan[ph.name].kvOrigin : undefined);
    progress?.((prev + STAGE_END[ph.name]) / 2); // the data checks take about half of a phase's time
    checkOutputs(flat, ph, userB, homeB, taskB, sink);
    progress?.(STAGE_END[ph.name]);
    prev = STAGE_END[ph.name];
  }
  const report = planReport(plan, options.nic, progressSpan(progress, STAGE_END.backward, 1));
  progress?.(1);
  return { issues: sink.issues, report, omitted: sink.omitted };
}

/**
 * Throws unless `plan` is valid: what every executor calls before any work. The error is one line
 * (the first broken check, its code and row, how many more there are, and how to list them all), not
 * the whole list: a broken plan often breaks dozens of checks and the first one names the defect.
 * `what` names the plan for the hint (e.g. its file); `onProgress` as in {@link ValidateOptions}.
 */
export function requireValidPlan(
  plan: Plan,
  what = 'the plan',
  onProgress?: (fraction: number) => void,
): void {
  const { issues, omitted } = validatePlan(plan, { maxIssues: 1, ...(onProgress ? { onProgress } : {}) });
  if (issues.length === 0) return;
  const first = issues[0]!;
  const more = issues.length - 1 + omitted;
  const hint = more > 0 ? ` (and ${more} more; \`fcp validate ${what}\` lists them)` : '';
  const msg = `${what} is invalid, nothing was run: ${first.message}${hint}`;
  throw new FcpError(issue(first.code, msg, first.path, first.row));
}

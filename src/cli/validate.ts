/**
 * `fcp validate PLAN`: checks a plan file against rules 1-5 of docs/plan-format.md and prints its rule-6
 * report. Exit 0: valid; 1: the plan breaks a rule (each issue printed as
 * `code at path[row]: message`); 2: the file is unreadable or malformed (FcpError from readPlan).
 */
import type { Command } from 'commander';
import { fail, formatIssue } from '../core/issues.ts';
import { readPlan } from '../plan/io.ts';
import { formatReport } from '../plan/report.ts';
import { defaultNicRoute, type NicRoute } from '../plan/report-nic.ts';
import { validatePlan } from '../plan/validate.ts';
import { intOption } from './common.ts';
import { addOutputOptions, outputOf } from './output.ts';
import { reportCsv } from './tables.ts';

/** Registers `fcp validate`. */
export function register(program: Command): void {
  const cmd = program
    .command('validate')
    .description('check a plan file against rules 1-5 and print its report (exit 1 when a rule is broken)')
    .argument('<plan>', 'plan file (.json, or .json.gz)')
    .option('--max-issues <n>', 'most issues listed (every broken rule keeps one)', '100')
    .option(
      '--gpus-per-node <n>',
      "GPUs per node, for the NIC and NVLink port congestion of the report (default: the plan's meta.gpusPerNode, else 8)",
    )
    .option(
      '--routing <how>',
      "NCCL routing across nodes, for the NIC congestion of the report: direct or pxn (default: the plan's meta.routing, else direct)",
    );
  addOutputOptions(cmd, {
    json: 'the result (valid, issues, report)',
    csv: 'the rule-6 report, one row per phase (forward, backward, total)',
  });
  cmd.action((file: string, opts: Record<string, unknown>) => {
    const out = outputOf('validate', opts);
    const maxIssues = intOption(opts.maxIssues, 'maxIssues');
    const given = opts.gpusPerNode === undefined ? undefined : intOption(opts.gpusPerNode, 'gpusPerNode');
    if (given !== undefined && given < 1)
      fail('option.gpusPerNode', `--gpus-per-node must be >= 1 (got ${given})`, 'gpusPerNode');
    if (opts.routing !== undefined && opts.routing !== 'direct' && opts.routing !== 'pxn')
      fail(
        'option.routing',
        `--routing must be direct or pxn (got ${JSON.stringify(opts.routing)})`,
        'routing',
      );
    // Progress lines on stderr for a large plan (4096 ranks: about 1 s to read, 7 s to check).
    const progress = out.progress(2);
    progress.step(`read ${file}`);
    const plan = readPlan(file);
    const recorded = defaultNicRoute(plan.meta);
    const routing = (opts.routing as NicRoute['routing'] | undefined) ?? recorded.routing;
    const gpusPerNode = given ?? recorded.gpusPerNode;
    progress.step(`validate ${plan.world} ranks`);
    const t0 = performance.now();
    const { issues, report, omitted } = validatePlan(plan, {
      maxIssues: Math.max(1, maxIssues),
      nic: { gpusPerNode, routing },
      onProgress: (f) => progress.fraction(f),
    });
    const ms = performance.now() - t0;
    progress.done();
    const valid = issues.length === 0;
    if (out.json) {
      out.printJson({ file, valid, issues, omitted, report });
    } else if (out.csv) {
      out.printCsv(...reportCsv(report));
      if (!valid)
        out.note(
          `invalid: ${file} breaks ${issues.length + omitted} checks (first: ${formatIssue(issues[0]!)})`,
        );
    } else {
      const lines = [formatReport(report), ''];
      if (valid) lines.push(`valid: ${file} obeys rules 1-5 (checked in ${ms.toFixed(0)} ms)`);
      else {
        lines.push(
          `invalid: ${file} breaks ${issues.length + omitted} checks${omitted > 0 ? ` (${omitted} not listed)` : ''}:`,
        );
        for (const i of issues) lines.push(formatIssue(i));
      }
      out.text(lines.join('\n'));
    }
    process.exitCode = valid ? 0 : 1;
  });
}

/**
 * `fcp demo`: the main job on built-in defaults. Plans a long-tailed batch with FCP and every
 * baseline, validates and simulates every plan, sweeps world sizes, checks numerics on the CPU
 * runtime, prints a summary table and writes the HTML report (atomically) with its raw results.
 */
import type { Command } from 'commander';
import { fail } from '../core/issues.ts';
import { runDemo } from '../experiments/demo.ts';
import {
  DEMO_DEFAULTS,
  type DemoOptions,
  demoSteps,
  resolveDemoOptions,
} from '../experiments/demo-options.ts';
import { provenanceOf } from '../report/provenance.ts';
import type { Results } from '../report/results.ts';
import { numericsVerdict, summaryText } from '../report/summary.ts';
import { checkOutDir, writeReport } from '../report/write.ts';
import { addProblemOptions, intListOption, intOption, problemOptionsFrom } from './common.ts';
import { addOutputOptions, outputOf } from './output.ts';
import type { CsvTable } from './tables.ts';

/** Problems that make the demo's own result wrong (not user errors): invalid plans, failed checks. */
export function demoFailures(r: Results): string[] {
  const out: string[] = [];
  for (const x of r.runs) {
    if (!x.valid)
      out.push(`${x.strategy}: invalid plan (${x.issueCodes.join(', ') || x.error || 'see results.json'})`);
    else if (x.error !== undefined) out.push(`${x.strategy}: ${x.error}`);
  }
  for (const n of r.numerics.runs)
    if (!n.ok)
      out.push(`${n.strategy}: numerical check ${n.error !== undefined ? `error: ${n.error}` : 'failed'}`);
  return out;
}

/** The summary table as CSV: one row per strategy of the main run, simulated numbers in base units. */
export function demoCsv(r: Results): CsvTable {
  const header = [
    'strategy',
    'valid',
    'mfu_forward',
    'mfu_backward',
    'forward_ms',
    'backward_ms',
    'compute_imbalance',
    'comm_imbalance',
    'bytes_total',
    'rounds_forward',
    'rounds_backward',
    'congestion_forward',
    'congestion_backward',
    'numerics',
    'error',
  ];
  return [
    header,
    r.runs.map((s) => {
      const ok = s.error === undefined;
      return [
        s.strategy,
        s.valid,
        ok ? s.mfuForward : null,
        ok ? s.mfuBackward : null,
        ok ? s.forwardMs : null,
        ok ? s.backwardMs : null,
        ok ? s.computeImbalance : null,
        ok ? s.commImbalance : null,
        ok ? s.totalBytes : null,
        ok ? s.rounds.forward : null,
        ok ? s.rounds.backward : null,
        ok ? s.congestion.forward : null,
        ok ? s.congestion.backward : null,
        numericsVerdict(r, s.strategy),
        s.error ?? '',
      ];
    }),
  ];
}

/** Parses the list of `--strategies` (comma-separated). */
function strategiesOption(v: unknown): string[] {
  const list = String(v)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 0) fail('option.strategies', '--strategies names no strategy', 'strategies');
  return list;
}

/** Commander's parsed values -> {@link DemoOptions}. */
export function demoOptionsFrom(o: Record<string, unknown>): DemoOptions {
  const out: DemoOptions = { problem: problemOptionsFrom(o) };
  if (o.strategies !== undefined) out.strategies = strategiesOption(o.strategies);
  if (o.cluster !== undefined) out.cluster = String(o.cluster);
  if (o.scaling !== undefined)
    out.scaling = String(o.scaling).trim() === 'none' ? [] : intListOption(o.scaling, 'scaling');
  if (o.ablation === false) out.ablation = false;
  if (o.numerics === false) out.numerics = null;
  else
    out.numerics = {
      world: intOption(o.numericsWorld ?? DEMO_DEFAULTS.numericsWorld, 'numericsWorld'),
      tokensPerRank: intOption(o.numericsTokens ?? DEMO_DEFAULTS.numericsTokensPerRank, 'numericsTokens'),
    };
  return out;
}

/** Registers `fcp demo`. */
export function register(program: Command): void {
  const cmd = program
    .command('demo')
    .description(
      'plan a long-tailed batch with FCP and every baseline, validate, simulate, check numerics, and write an HTML report',
    );
  addProblemOptions(cmd, { world: String(DEMO_DEFAULTS.world) })
    .option('--strategies <list>', 'comma-separated strategies (default: all registered)')
    .option(
      '--scaling <worlds>',
      'weak-scaling world sizes, comma-separated, or none (default: world/4,world/2,world)',
    )
    .option('--numerics-world <n>', 'ranks of the CPU numerical check', String(DEMO_DEFAULTS.numericsWorld))
    .option(
      '--numerics-tokens <n>',
      'tokens per rank of the CPU numerical check',
      String(DEMO_DEFAULTS.numericsTokensPerRank),
    )
    .option('--no-numerics', 'skip the CPU numerical check')
    .option('--no-ablation', "skip FCP's ablation (the paper's Table 2 steps at the main world)")
    .option('-o, --out <dir>', 'report folder (replaced atomically)', 'fcp-report');
  addOutputOptions(cmd, {
    json: "the results (the report folder's results.json)",
    csv: 'the summary table, one row per strategy',
  });
  cmd.action(async (opts: Record<string, unknown>) => {
    const o = outputOf('demo', opts);
    const t0 = performance.now();
    const options = resolveDemoOptions(demoOptionsFrom(opts));
    const out = String(opts.out);
    checkOutDir(out); // fail before the work, not after it
    const progress = o.progress(demoSteps(options) + 2);
    const results = await runDemo(options, provenanceOf(process.argv.slice(2)), progress);
    const written = await writeReport(results, out, { onStep: (label) => progress.step(label) });
    progress.done();
    if (o.json) o.printJson(results);
    else if (o.csv) o.printCsv(...demoCsv(results));
    else o.text(summaryText(results));
    o.wrote(`${written.dir}/index.html`, 'the report; results.json beside it');
    o.note(`done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const failures = demoFailures(results);
    if (failures.length > 0) {
      for (const f of failures) process.stderr.write(`fcp: error: demo.check: ${f}\n`);
      process.exitCode = 1;
    }
  });
}

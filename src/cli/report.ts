/**
 * `fcp report`: draws the HTML report again from saved results, without planning or simulating
 * anything: `fcp demo`'s results.json, `fcp compare`'s compare.json, or a folder holding either.
 */
import type { Command } from 'commander';
import { readReportInput } from '../report/input.ts';
import { checkOutDir, writeReport } from '../report/write.ts';
import { addOutputOptions, outputOf } from './output.ts';

/** Registers `fcp report`. */
export function register(program: Command): void {
  const cmd = program
    .command('report')
    .description(
      'write the HTML report of saved results (results.json of fcp demo, compare.json of fcp compare)',
    )
    .argument('<results>', 'results.json (fcp demo), compare.json (fcp compare), or a folder holding one')
    .option('-o, --out <dir>', 'report folder (replaced atomically)', 'fcp-report');
  // Nothing to print on stdout: the report is the result (its path on stderr).
  addOutputOptions(cmd, {});
  cmd.action(async (path: string, opts: { out: string; quiet?: boolean }) => {
    const out = outputOf('report', opts);
    const results = readReportInput(path);
    checkOutDir(opts.out);
    const written = await writeReport(results, opts.out);
    out.wrote(`${written.dir}/index.html`, 'the report; results.json beside it');
  });
}

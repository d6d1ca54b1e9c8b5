/**
 * `fcp report`: draws the HTML report again from saved results, without planning or simulating
 * anything: `fcp demo`'s results.json, `fcp compare`'s compare.json, or a folder holding either.
 */
import type { Command } from 'commander';
import { readReportInput } from '../report/input.ts';
import { checkOutDir, writeReport } from '../report/write.ts';

/** Registers `fcp report`. */
export function register(program: Command): void {
  program
    .command('report')
    .description(
      'write the HTML report of saved results (results.json of fcp demo, compare.json of fcp compare)',
    )
    .argument('<results>', 'results.json (fcp demo), compare.json (fcp compare), or a folder holding one')
    .option('--out <dir>', 'report folder (replaced atomically)', 'fcp-report')
    .action(async (path: string, opts: { out: string }) => {
      const results = readReportInput(path);
      checkOutDir(opts.out);
      const written = await writeReport(results, opts.out);
      process.stdout.write(`report: ${written.dir}/index.html\n`);
    });
}

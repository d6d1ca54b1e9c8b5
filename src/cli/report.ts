/**
 * `fcp report`: draws the HTML report again from a saved `results.json` (written by `fcp demo`),
 * without planning or simulating anything.
 */
import type { Command } from 'commander';
import { readResults } from '../report/results.ts';
import { checkOutDir, writeReport } from '../report/write.ts';

/** Registers `fcp report`. */
export function register(program: Command): void {
  program
    .command('report')
    .description('write the HTML report of saved demo results (results.json)')
    .argument('<results>', 'a results.json written by fcp demo')
    .option('--out <dir>', 'report folder (replaced atomically)', 'fcp-report')
    .action(async (path: string, opts: { out: string }) => {
      const results = readResults(path);
      checkOutDir(opts.out);
      const written = await writeReport(results, opts.out);
      process.stdout.write(`report: ${written.dir}/index.html\n`);
    });
}

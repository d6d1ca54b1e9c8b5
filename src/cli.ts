#!/usr/bin/env node
/** Entry point of the `fcp` binary (dist/cli.js). */
import { main } from './cli/main.ts';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`fcp: internal error: ${String(e)}\n`);
    process.exitCode = 1;
  },
);

/**
 * Writes python/fcp_torch/error_codes.json from src/core/codes.ts, so that the Python package uses
 * the same code families as the TypeScript side (test/core/codes.test.ts fails when it drifts).
 * Usage: npm run codes
 */
import { writeFileSync } from 'node:fs';
import { errorCodesJson } from '../src/core/codes.ts';

const path = new URL('../python/fcp_torch/error_codes.json', import.meta.url);
writeFileSync(path, errorCodesJson());
console.error(`wrote ${path.pathname}`);

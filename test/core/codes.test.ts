/**
 * Error codes are declared once: the Python package's copy of the families is the one
 * src/core/codes.ts writes, and codes outside a declared family are refused.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { CODE_FAMILIES, errorCodesJson, isErrorCode } from '../../src/core/codes.ts';

describe('error codes', () => {
  it('python/fcp_torch/error_codes.json is what `npm run codes` writes', () => {
    const file = readFileSync(new URL('../../python/fcp_torch/error_codes.json', import.meta.url), 'utf8');
    assert.equal(file, errorCodesJson(), 'run `npm run codes` after changing src/core/codes.ts');
  });

  it('isErrorCode accepts declared families only', () => {
    for (const f of Object.keys(CODE_FAMILIES)) assert.ok(isErrorCode(`${f}.x`));
    for (const c of ['plan', 'plan.', '.x', 'nofamily.x', 'toString.x', ''])
      assert.equal(isErrorCode(c), false, c);
  });
});

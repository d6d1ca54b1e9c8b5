/** Test helper: the code of the FcpError that `f` throws (fails the test when it throws none). */
import assert from 'node:assert/strict';
import { FcpError } from '../../src/core/issues.ts';

export const codeOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof FcpError, String(e));
    return e.code;
  }
  assert.fail('expected an FcpError');
};

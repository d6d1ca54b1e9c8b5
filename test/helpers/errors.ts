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

/** The code of the FcpError that `p` rejects with; `none` when it resolves; other errors rethrown. */
export const codeOfAsync = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof FcpError) return e.code;
    throw e;
  }
  return 'none';
};

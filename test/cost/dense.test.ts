import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { denseFlopsPerToken, denseLayerMs } from '../../src/cost/dense.ts';
import { LLAMA3_70B } from '../../src/model/attention.ts';

describe('rest of the layer', () => {
  it('Llama-3-70B: 1.71 GFLOP per token forward (by hand: 2 x (2*8192^2 + 2*8192*1024 + 3*8192*28672))', () => {
    const byHand = 2 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672);
    assert.equal(denseFlopsPerToken(LLAMA3_70B), byHand);
    assert.ok(Math.abs(byHand - 1.7113e9) / 1.7113e9 < 1e-3);
  });
  it('time is linear in tokens, backward twice forward', () => {
    const f = denseLayerMs(LLAMA3_70B, 32768, 989, 'forward');
    assert.ok(Math.abs(denseLayerMs(LLAMA3_70B, 65536, 989, 'forward') - 2 * f) < 1e-9);
    assert.ok(Math.abs(denseLayerMs(LLAMA3_70B, 32768, 989, 'backward') - 2 * f) < 1e-9);
    // 32K tokens: 56.1 TFLOP at 0.7 x 989 TFLOP/s = 81 ms.
    assert.ok(Math.abs(f - 81.0) < 0.5, `${f}`);
  });
});

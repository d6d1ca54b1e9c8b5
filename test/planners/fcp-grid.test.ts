/**
 * FCP tile geometry (grid.ts) and its kernel time model (kernel-time.ts): the tiles of a query run cover
 * every attended pair exactly once, are squares of the block grid wherever the start allows, and
 * their summed time is the run's modelled time.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { attendedPairs, LLAMA3_70B } from '../../src/model/attention.ts';
import {
  rangeMs,
  stripTiles,
  TileCost,
  type TileGeometry,
  type TileSink,
  walkTiles,
} from '../../src/planners/fcp/grid.ts';
import { rectStep } from '../../src/planners/fcp/grid-tasks.ts';
import { fcpPlanner } from '../../src/planners/fcp/index.ts';
import { KernelTime } from '../../src/planners/fcp/kernel-time.ts';
import { MAX_OP_MS } from '../../src/planners/fcp/op-cut.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

interface Tile {
  qa: number;
  qb: number;
  ka: number;
  kb: number;
  kind: 'square' | 'diagonal' | 'rect';
}

/** Collects the tiles of a walk. */
function collect(): { tiles: Tile[]; sink: TileSink } {
  const tiles: Tile[] = [];
  const sink: TileSink = {
    squares(qa, side, ka, count) {
      for (let i = 0; i < count; i++)
        tiles.push({ qa, qb: qa + side, ka: ka + i * side, kb: ka + (i + 1) * side, kind: 'square' });
    },
    diagonal(qa, side) {
      tiles.push({ qa, qb: qa + side, ka: qa, kb: qa + side, kind: 'diagonal' });
    },
    rect(qa, qb, ka, kb) {
      tiles.push({ qa, qb, ka, kb, kind: 'rect' });
    },
  };
  return { tiles, sink };
}

const GEOMETRY = fc.record({
  tmax: fc.constantFrom(64, 128, 256),
  minTile: fc.constantFrom(8, 32, 64),
  wholeMax: fc.constantFrom(0, 256, 1024),
});

test('tiles cover every attended pair of the run exactly once (causal and full)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 700 }),
      fc.constantFrom(16, 32, 64, 100),
      fc.boolean(),
      GEOMETRY,
      fc.integer({ min: 0, max: 699 }),
      fc.integer({ min: 1, max: 700 }),
      (len, b, causal, g, a0, l0) => {
        // A run of whole blocks, the last one possibly the short end of the sequence.
        const qa = Math.min(Math.floor(a0 / b) * b, Math.floor((len - 1) / b) * b);
        const qb = Math.min(len, qa + Math.ceil(l0 / b) * b);
        const { tiles, sink } = collect();
        walkTiles(qa, qb, len, b, causal, g as TileGeometry, sink);
        const seen = new Uint8Array(len * len);
        let pairs = 0;
        for (const t of tiles) {
          assert.ok(
            t.qa >= qa && t.qb <= qb && t.ka >= 0 && t.kb <= len,
            'tile inside the run and the sequence',
          );
          if (t.kind !== 'diagonal') {
            // Squares and rectangles are fully visible.
            if (causal) assert.ok(t.kb - 1 <= t.qa, `tile ${JSON.stringify(t)} not fully visible`);
          }
          if (t.kind !== 'rect') assert.equal(t.qb - t.qa, t.kb - t.ka, 'squares are square');
          for (let q = t.qa; q < t.qb; q++)
            for (let k = t.ka; k < t.kb; k++) {
              if (causal && k > q) continue;
              assert.equal(seen[q * len + k], 0, `pair (${q}, ${k}) twice`);
              seen[q * len + k] = 1;
              pairs++;
            }
        }
        let expected = 0;
        for (let q = qa; q < qb; q++) expected += attendedPairs(causal, q, 1, 0, len);
        assert.equal(pairs, expected);
      },
    ),
    { seed: 11, numRuns: 300 },
  );
});

test('runs of aligned blocks tile into squares of the grid, no strips', () => {
  // Blocks of 512 from position 2048: tiles of 512, 1024, 2048 that divide their start.
  const g: TileGeometry = { tmax: 4096, minTile: 1024, wholeMax: 0 };
  const { tiles, sink } = collect();
  walkTiles(2048, 2048 + 7 * 512, 100000, 512, true, g, sink);
  assert.ok(
    tiles.every((t) => t.kind !== 'rect'),
    'no strips',
  );
  const sides = new Set<number>();
  for (const t of tiles) {
    const side = t.qb - t.qa;
    sides.add(side);
    assert.equal(t.qa % side, 0, 'a tile divides its start');
    if (t.kind === 'square') assert.equal(t.ka % side, 0, 'key squares on the grid');
  }
  assert.deepEqual(
    [...sides].sort((a, b) => a - b),
    [512, 1024, 2048],
  );
  // A whole short sequence is one causal square.
  const whole = collect();
  walkTiles(0, 3000, 3000, 4096, true, { tmax: 4096, minTile: 1024, wholeMax: 32768 }, whole.sink);
  assert.deepEqual(whole.tiles, [{ qa: 0, qb: 3000, ka: 0, kb: 3000, kind: 'diagonal' }]);
});

test('strips halve down to the minimum side, then stay one rectangle', () => {
  const { tiles, sink } = collect();
  stripTiles(0, 4096, 0, 4096 + 1536 + 100, { tmax: 4096, minTile: 1024, wholeMax: 0 }, sink);
  const squares = tiles.filter((t) => t.kind === 'square').map((t) => t.qb - t.qa);
  assert.ok(squares.includes(4096) && squares.includes(1024));
  assert.ok(tiles.some((t) => t.kind === 'rect' && t.kb - t.ka < 1024));
});

test('a range costs the sum of its tiles; time weights follow the kernel model', () => {
  const tm = new KernelTime(LLAMA3_70B);
  const g: TileGeometry = { tmax: 4096, minTile: 1024, wholeMax: 32768 };
  const cost = new TileCost(tm, true);
  const ms = rangeMs(65536, 65536 + 8192, 200000, 4096, true, g, cost);
  const { tiles, sink } = collect();
  walkTiles(65536, 65536 + 8192, 200000, 4096, true, g, sink);
  let sum = 0;
  for (const t of tiles)
    sum += t.kind === 'diagonal' ? tm.squareMs(t.qb - t.qa, true) : tm.squareMs(t.qb - t.qa, false);
  assert.ok(Math.abs(ms - sum) < 1e-9 * sum);
  // Per attended pair, dense 4K squares beat small causal sequences by a wide margin.
  const big = tm.squareMs(4096, false) / (4096 * 4096);
  const small = tm.loneSquareMs(256, true) / ((256 * 257) / 2);
  assert.ok(small > 3 * big, `${small} vs ${big} ms per pair`);
  // taskMs agrees with squareMs for the pieces it is made of.
  const f =
    tm.taskMs('forward', true, 8192, 4096, 0, 4096) + tm.taskMs('backward', true, 8192, 4096, 0, 4096);
  assert.ok(Math.abs(f - tm.squareMs(4096, false)) < 1e-9 * f);
});

test('a long rectangle is cut along its keys into parts of the tile grid, each within an op', () => {
  const tm = new KernelTime(LLAMA3_70B);
  const g: TileGeometry = { tmax: 4096, minTile: 1024, wholeMax: 32768 };
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 4095 }), fc.integer({ min: 1, max: 600_000 }), (lq, width) => {
      const step = rectStep(lq, width, g, tm);
      const whole = tm.taskMs('backward', false, 0, lq, 0, width);
      if (width <= g.tmax || whole <= MAX_OP_MS) {
        assert.equal(step, width, 'short or cheap rectangles stay whole');
        return;
      }
      assert.equal(step % g.tmax, 0, 'parts are whole tiles wide');
      assert.ok(step < width, 'a long, slow rectangle is cut');
      // Each part fits an op (the model's time grows about linearly with the keys), unless it is
      // a single tile wide, the finest cut on the grid.
      const part = tm.taskMs('backward', false, 0, lq, 0, step);
      assert.ok(step === g.tmax || part <= MAX_OP_MS * 1.05, `${lq} x ${step}: ${part} ms`);
    }),
  );
});

test('mutation: the sliver of a long sequence is one task no more', () => {
  // Mode (a), 16 ranks, longtail seed 1: the user layout cuts a 193K-token sequence off the block
  // grid, leaving 869 queries against 192,512 keys (about 29 ms of backward as one task).
  const problem = resolveProblem({ batch: 'longtail', world: 16, tokensPerRank: 32768, seed: 1 });
  const plan = fcpPlanner.plan(problem, {});
  const tm = new KernelTime(LLAMA3_70B);
  const t = plan.tasks;
  let longest = 0;
  let wide = 0;
  for (let i = 0; i < t.rank.length; i++) {
    const lq = t.qLength[i]!;
    const lk = t.kvLength[i]!;
    // Rectangles only: not diagonals, not squares of the grid (merged in powers of two, grid-tasks.ts).
    if (lk <= 4096 || t.kvStart[i]! + lk > t.qStart[i]!) continue;
    if ((lq & (lq - 1)) === 0 && t.kvStart[i]! % lq === 0 && lk % lq === 0) continue;
    wide++;
    longest = Math.max(longest, tm.taskMs('backward', false, 0, lq, 0, lk));
  }
  assert.ok(wide > 0, 'the batch has rectangles wider than a tile');
  // Before the cut: one task of about 29 ms.
  assert.ok(longest <= MAX_OP_MS * 1.05, `longest rectangle task ${longest.toFixed(2)} ms`);
});

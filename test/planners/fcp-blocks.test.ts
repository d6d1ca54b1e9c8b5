/**
 * FCP block split on each sequence's grid, zig-zag pairing and per-sequence block size refinement
 * (blocks.ts), and the option defaults and validation (options.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { FcpError } from '../../src/core/issues.ts';
import { attendedPairs, sequencePairs } from '../../src/model/attention.ts';
import { FCP_DEFAULTS, resolveFcpOptions } from '../../src/planners/fcp/options.ts';
import { type Blocks, refinedBlockSize, splitBlocks } from '../../src/planners/fcp/placement/blocks.ts';

/** Checks that the blocks of every sequence tile it exactly, in position order. */
function checkTiling(b: Blocks, seqs: number[]): void {
  for (let s = 0; s < seqs.length; s++) {
    let pos = 0;
    for (let i = b.seqBlocks[s]!; i < b.seqBlocks[s + 1]!; i++) {
      assert.equal(b.seq[i], s);
      assert.equal(b.start[i], pos, `sequence ${s}: block ${i} starts at ${b.start[i]}, expected ${pos}`);
      assert.ok(b.length[i]! > 0);
      pos += b.length[i]!;
    }
    assert.equal(pos, seqs[s], `sequence ${s} covered up to ${pos} of ${seqs[s]}`);
  }
}

const lengths = fc.array(fc.integer({ min: 1, max: 20000 }), { minLength: 1, maxLength: 30 });

test('blocks cover every sequence exactly once (causal and full, fixed and refined)', () => {
  fc.assert(
    fc.property(
      lengths,
      fc.constantFrom('causal', 'full' as const),
      fc.integer({ min: 1, max: 5000 }),
      fc.boolean(),
      fc.integer({ min: 1, max: 64 }),
      (seqs, mask, blockSize, fixedBlocks, world) => {
        const o = resolveFcpOptions({ blockSize, fixedBlocks });
        const b = splitBlocks(Int32Array.from(seqs), mask as 'causal' | 'full', world, o);
        checkTiling(b, seqs);
        // Every block belongs to exactly one unit of its sequence; unit loads add up.
        const tokens = new Float64Array(b.unitSeq.length);
        for (let i = 0; i < b.seq.length; i++) {
          const u = b.unit[i]!;
          assert.equal(b.unitSeq[u], b.seq[i]);
          assert.ok(b.unitBlockA[u] === i || b.unitBlockB[u] === i);
          tokens[u]! += b.length[i]!;
        }
        let pairs = 0;
        for (let u = 0; u < b.unitSeq.length; u++) {
          assert.equal(tokens[u], b.unitTokens[u]);
          pairs += b.unitPairs[u]!;
        }
        const expected = seqs.reduce((x, l) => x + sequencePairs(mask === 'causal', l), 0);
        assert.equal(pairs, expected);
        assert.equal(b.totalPairs, expected);
      },
    ),
    { seed: 42, numRuns: 200 },
  );
});

test('blocks lie on their sequence grid; zig-zag pairs j and m-1-j carry equal work', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 100000 }), fc.integer({ min: 1, max: 4096 }), (len, blockSize) => {
      const o = resolveFcpOptions({ blockSize, fixedBlocks: true });
      const b = splitBlocks(Int32Array.from([len]), 'causal', 1, o);
      const bs = b.blockSizeOfSeq[0]!;
      const m = b.seq.length;
      assert.equal(m, Math.ceil(len / bs));
      for (let i = 0; i < m; i++) {
        // Aligned at 0: every block starts on the grid; only the last may be shorter.
        assert.equal(b.start[i], i * bs);
        if (i < m - 1) assert.equal(b.length[i], bs);
        assert.equal(b.unit[i], Math.min(i, m - 1 - i), 'block j shares a unit with block m-1-j');
      }
      const work = new Set<number>();
      for (let u = 0; u < b.unitSeq.length; u++) {
        const a = b.unitBlockA[u]!;
        const c = b.unitBlockB[u]!;
        const w =
          attendedPairs(true, b.start[a]!, b.length[a]!, 0, len) +
          (c >= 0 ? attendedPairs(true, b.start[c]!, b.length[c]!, 0, len) : 0);
        assert.equal(w, b.unitPairs[u]);
        // Units of two full blocks all carry b·(b(m-1) + b + 1) pairs.
        if (c >= 0 && b.length[c] === bs) work.add(w);
      }
      assert.ok(work.size <= 1, `full pairs carry ${[...work].join(', ')}`);
      // At most one unit of a single block (the middle of an odd count).
      const singles = [...Array(b.unitSeq.length).keys()].filter((u) => b.unitBlockB[u]! < 0);
      assert.ok(singles.length === m % 2);
    }),
    { seed: 7, numRuns: 300 },
  );
});

test('a sequence shorter than a block is one block; full mask cuts consecutive blocks, the last shorter', () => {
  const o = resolveFcpOptions({ blockSize: 4096, fixedBlocks: true });
  const short = splitBlocks(Int32Array.from([3000, 5000]), 'causal', 1, o);
  assert.equal(short.seqBlocks[1], 1);
  assert.equal(short.length[0], 3000);
  // 5000 tokens: blocks [0, 4096) and [4096, 5000), one zig-zag unit.
  assert.deepEqual([...short.length.subarray(1)], [4096, 904]);
  assert.equal(short.seqUnits[2]! - short.seqUnits[1]!, 1);
  const full = splitBlocks(Int32Array.from([10000]), 'full', 1, o);
  assert.deepEqual([...full.length], [4096, 4096, 1808]);
  assert.equal(full.unitSeq.length, 3);
  for (let u = 0; u < 3; u++) assert.equal(full.unitPairs[u], full.unitTokens[u]! * 10000);
});

test('refined block sizes: halvings of blockSize, not below the floor, units under the share unless at the floor', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 16, max: 524288 }), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 256 }),
      fc.constantFrom('causal', 'full' as const),
      fc.constantFrom(1, 0.25, 1 / 16),
      (seqs, world, mask, maxUnitShare) => {
        const o = resolveFcpOptions({ maxUnitShare });
        const b = splitBlocks(Int32Array.from(seqs), mask as 'causal' | 'full', world, o);
        const target = (o.maxUnitShare * b.totalPairs) / world;
        for (let s = 0; s < seqs.length; s++) {
          const bs = b.blockSizeOfSeq[s]!;
          assert.ok(bs >= o.minBlockSize && bs <= o.blockSize);
          // A power-of-two fraction of blockSize: grids of different sequences nest.
          assert.equal(o.blockSize % bs, 0);
          assert.equal((o.blockSize / bs) & (o.blockSize / bs - 1), 0);
          if (bs > o.minBlockSize)
            for (let u = b.seqUnits[s]!; u < b.seqUnits[s + 1]!; u++)
              assert.ok(b.unitPairs[u]! <= target * (1 + 1e-9), `unit of sequence ${s} above the share`);
        }
      },
    ),
    { seed: 3, numRuns: 100 },
  );
  // Long sequences get smaller blocks than short ones.
  const o = resolveFcpOptions({});
  assert.equal(refinedBlockSize(524288, true, 1.1e9, o), 2048);
  assert.equal(refinedBlockSize(524288, true, 1.0e9, o), 1024);
  assert.equal(refinedBlockSize(524288, true, 1e6, o), o.minBlockSize); // the floor
  assert.equal(refinedBlockSize(1000, true, 1e9, o), 4096);
  assert.equal(refinedBlockSize(524288, true, 1e6, { ...o, fixedBlocks: true }), 4096);
  // Memory caps the block (a quarter of a rank's memory), whatever the share allows.
  const tight = splitBlocks(Int32Array.from([100000]), 'causal', 1, o, 6000);
  assert.ok(tight.blockSizeOfSeq[0]! <= 1500);
});

test('options: defaults in one place, every bad value reported with its code', () => {
  const d = resolveFcpOptions();
  assert.equal(d.blockSize, 4096);
  assert.equal(d.tolerance, 0.01);
  assert.equal(d.coalesce, 16);
  assert.equal(d.rounds, 'matching');
  assert.equal(d.minBlockSize, FCP_DEFAULTS.minBlockSize);
  assert.equal(
    resolveFcpOptions({ blockSize: 64 }).minBlockSize,
    64,
    'the floor never exceeds the block size',
  );
  const codes = (o: Parameters<typeof resolveFcpOptions>[0]): string[] => {
    try {
      resolveFcpOptions(o);
    } catch (e) {
      assert.ok(e instanceof FcpError);
      return e.issues.map((i) => i.code);
    }
    return [];
  };
  assert.deepEqual(codes({ blockSize: 0 }), ['option.blockSize']);
  assert.deepEqual(codes({ blockSize: 2.5 }), ['option.blockSize']);
  assert.deepEqual(codes({ tolerance: 1 }), ['option.tolerance']);
  assert.deepEqual(codes({ tolerance: -0.1 }), ['option.tolerance']);
  assert.deepEqual(codes({ coalesce: 0 }), ['option.coalesce']);
  assert.deepEqual(codes({ pushCoalesce: 0 }), ['option.pushCoalesce']);
  assert.deepEqual(codes({ pushCoalesce: 2.5 }), ['option.pushCoalesce']);
  assert.deepEqual(codes({ rounds: 'fast' as 'naive' }), ['option.rounds']);
  assert.deepEqual(codes({ maxUnitShare: 0 }), ['option.maxUnitShare']);
  assert.deepEqual(codes({ balance: 'flops' as 'time' }), ['option.balance']);
  assert.deepEqual(codes({ loaderSwaps: 'all' as 'any' }), ['option.loaderSwaps']);
  assert.deepEqual(codes({ loaderSwaps: 'node' }), []);
  assert.equal(d.balance, 'time');
  assert.deepEqual(codes({ blockSize: -1, coalesce: 1.5 }), ['option.blockSize', 'option.coalesce']);
});

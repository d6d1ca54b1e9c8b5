import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { busyProfile, compactTimeline, type RawEvent, sampleRanks } from '../../src/report/timeline.ts';

test('compactTimeline merges touching bars of one rank, lane and kind, and keeps the first ranks', () => {
  const ev: RawEvent[] = [
    { rank: 0, lane: 0, start: 0, end: 1, kind: 'compute' },
    { rank: 0, lane: 0, start: 1, end: 2, kind: 'compute' }, // touches: merged
    { rank: 0, lane: 0, start: 5, end: 6, kind: 'compute' }, // gap 3 > 0.002 x 10: kept apart
    { rank: 0, lane: 1, start: 0, end: 1, kind: 'kv' },
    { rank: 0, lane: 1, start: 1, end: 2, kind: 'in' }, // another kind: its own bar
    { rank: 1, lane: 0, start: 0, end: 10, kind: 'compute' },
    { rank: 2, lane: 0, start: 0, end: 3, kind: 'compute' }, // rank beyond maxRanks
    { rank: 1, lane: 1, start: 3, end: 3, kind: 'kv' }, // empty: dropped
  ];
  const t = compactTimeline('fcp', 'forward', 3, ev, 2);
  assert.equal(t.ranks, 2);
  assert.equal(t.makespanMs, 10);
  assert.deepEqual(t.events, [
    { rank: 0, lane: 0, start: 0, end: 2, kind: 'compute' },
    { rank: 0, lane: 0, start: 5, end: 6, kind: 'compute' },
    { rank: 0, lane: 1, start: 0, end: 1, kind: 'kv' },
    { rank: 0, lane: 1, start: 1, end: 2, kind: 'in' },
    { rank: 1, lane: 0, start: 0, end: 10, kind: 'compute' },
  ]);
});

test('compactTimeline keeps the busy time covered: merged bars cover every input bar', () => {
  const event = fc.record({
    rank: fc.integer({ min: 0, max: 3 }),
    lane: fc.constantFrom(0 as const, 1 as const),
    start: fc.integer({ min: 0, max: 100 }),
    len: fc.integer({ min: 1, max: 20 }),
    kind: fc.constantFrom('compute', 'kv', 'in'),
  });
  fc.assert(
    fc.property(fc.array(event, { maxLength: 40 }), (raw) => {
      const ev = raw.map((e) => ({
        rank: e.rank,
        lane: e.lane,
        start: e.start,
        end: e.start + e.len,
        kind: e.kind,
      }));
      const t = compactTimeline('x', 'forward', 4, ev, 4);
      assert.ok(t.events.length <= ev.length);
      for (const e of ev)
        assert.ok(
          t.events.some(
            (b) =>
              b.rank === e.rank &&
              b.lane === e.lane &&
              b.kind === e.kind &&
              b.start <= e.start &&
              b.end >= e.end,
          ),
          JSON.stringify(e),
        );
    }),
    { seed: 42, numRuns: 100 },
  );
});

test('sampleRanks: every rank up to max; beyond, evenly spaced ranks plus the last to finish', () => {
  const ev = (rank: number, end: number): RawEvent => ({ rank, lane: 0, start: 0, end, kind: 'compute' });
  assert.deepEqual(sampleRanks(8, [ev(3, 1)], 8), { ranks: [0, 1, 2, 3, 4, 5, 6, 7], description: '' });
  const s = sampleRanks(256, [ev(0, 1), ev(203, 9), ev(17, 5)], 17);
  assert.equal(s.ranks.length, 17);
  assert.deepEqual(s.ranks.slice(0, 3), [0, 16, 32]);
  assert.ok(s.ranks.includes(203));
  assert.equal(
    s.description,
    '17 of 256 ranks: every 16th rank (0, 16, ..., 240) and rank 203, the last to finish',
  );
  // The critical rank already in the sample is not added twice.
  const t = sampleRanks(64, [ev(32, 9)], 9);
  assert.equal(t.ranks.length, 8);
  assert.match(t.description, /every 8th rank .*; rank 32 finishes last$/);
  const c = compactTimeline('x', 'forward', 256, [ev(0, 1), ev(5, 2), ev(203, 9)], 24, {
    ranks: s.ranks,
    sample: s.description,
  });
  assert.deepEqual(
    c.events.map((e) => e.rank),
    [0, 203],
  );
  assert.equal(c.ranks, 17);
  assert.deepEqual(c.rankList, s.ranks);
  assert.equal(c.sample, s.description);
});

test('busyProfile: share of all ranks busy per bin, partial bars in proportion', () => {
  const p = busyProfile(
    'x',
    'backward',
    2,
    [
      { rank: 0, lane: 0, start: 0, end: 4, kind: 'compute' },
      { rank: 1, lane: 0, start: 1, end: 2, kind: 'compute' },
      { rank: 1, lane: 1, start: 0, end: 0.5, kind: 'kv' },
    ],
    4,
  );
  assert.equal(p.binMs, 1);
  assert.deepEqual(p.compute, [0.5, 1, 0.5, 0.5]);
  assert.deepEqual(p.comm, [0.25, 0, 0, 0]);
  assert.deepEqual(busyProfile('y', 'forward', 4, [], 3).compute, [0, 0, 0]);
  // Overlapping bars of one stream (touching ops, rounding) count once.
  const o = busyProfile(
    'z',
    'forward',
    1,
    [
      { rank: 0, lane: 0, start: 0, end: 2, kind: 'compute' },
      { rank: 0, lane: 0, start: 1.5, end: 2, kind: 'compute' },
    ],
    2,
  );
  assert.deepEqual(o.compute, [1, 1]);
});

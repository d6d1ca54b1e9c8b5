import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { compactTimeline, type RawEvent } from '../../src/report/timeline.ts';

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

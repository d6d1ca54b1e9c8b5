import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { AssertionError } from '../../src/core/assert.ts';
import { Rng } from '../../src/core/rng.ts';
import { colorBipartiteEdges, maxDegree } from '../../src/planners/fcp/transfers/edge-coloring.ts';

interface Graph {
  n: number;
  src: Int32Array;
  dst: Int32Array;
}

/** Δ computed the obvious way, independently of the module. */
function naiveMaxDegree(g: Graph): number {
  const out = new Array<number>(g.n).fill(0);
  const inc = new Array<number>(g.n).fill(0);
  g.src.forEach((s) => {
    out[s]!++;
  });
  g.dst.forEach((d) => {
    inc[d]!++;
  });
  return Math.max(0, ...out, ...inc);
}

/** Colours the graph and checks every promise of the API; returns the colouring. */
function checkColouring(g: Graph): { color: Int32Array; colors: number } {
  const srcCopy = g.src.slice();
  const dstCopy = g.dst.slice();
  const result = colorBipartiteEdges(g.src, g.dst, g.n);
  const delta = naiveMaxDegree(g);
  assert.equal(maxDegree(g.src, g.dst, g.n), delta);
  assert.equal(result.colors, delta, 'uses exactly Δ colours');
  assert.equal(result.color.length, g.src.length);
  const sendSeen = new Set<number>();
  const recvSeen = new Set<number>();
  const used = new Set<number>();
  for (let e = 0; e < g.src.length; e++) {
    const c = result.color[e]!;
    assert.ok(Number.isInteger(c) && c >= 0 && c < result.colors, `edge ${e}: colour ${c} out of range`);
    const sk = g.src[e]! * delta + c;
    const rk = g.dst[e]! * delta + c;
    assert.ok(!sendSeen.has(sk), `sender ${g.src[e]} has two edges of colour ${c}`);
    assert.ok(!recvSeen.has(rk), `receiver ${g.dst[e]} has two edges of colour ${c}`);
    sendSeen.add(sk);
    recvSeen.add(rk);
    used.add(c);
  }
  // A max-degree rank has Δ edges of distinct colours below Δ, so every colour is used.
  assert.equal(used.size, delta);
  const again = colorBipartiteEdges(g.src, g.dst, g.n);
  assert.deepEqual(again.color, result.color, 'deterministic');
  assert.deepEqual(g.src, srcCopy, 'input not modified');
  assert.deepEqual(g.dst, dstCopy, 'input not modified');
  return result;
}

/** Edge (s, d) with s != d from s and an offset k in 0..n-2. */
function edge(n: number, s: number, k: number): [number, number] {
  return [s, (s + 1 + k) % n];
}

function graphOf(n: number, pairs: readonly (readonly [number, number])[]): Graph {
  return { n, src: Int32Array.from(pairs, (p) => p[0]), dst: Int32Array.from(pairs, (p) => p[1]) };
}

const randomGraph = fc.integer({ min: 2, max: 300 }).chain((n) =>
  fc
    .array(fc.tuple(fc.integer({ min: 0, max: n - 1 }), fc.integer({ min: 0, max: n - 2 })), {
      maxLength: 1500,
    })
    .map((raw) =>
      graphOf(
        n,
        raw.map(([s, k]) => edge(n, s, k)),
      ),
    ),
);

/** Few ranks, many edges: heavy parallel edges. */
const parallelGraph = fc.integer({ min: 2, max: 6 }).chain((n) =>
  fc
    .array(fc.tuple(fc.integer({ min: 0, max: n - 1 }), fc.integer({ min: 0, max: n - 2 })), {
      minLength: 1,
      maxLength: 400,
    })
    .map((raw) =>
      graphOf(
        n,
        raw.map(([s, k]) => edge(n, s, k)),
      ),
    ),
);

/** Incast: one receiver gets many edges; the rest is sparse and random, with isolated ranks. */
const incastGraph = fc
  .record({
    n: fc.integer({ min: 2, max: 300 }),
    hot: fc.nat(),
    fanIn: fc.integer({ min: 1, max: 800 }),
    background: fc.integer({ min: 0, max: 600 }),
    seed: fc.integer({ min: 0, max: 1_000_000 }),
  })
  .map(({ n, hot, fanIn, background, seed }) => {
    const rng = new Rng(seed);
    const h = hot % n;
    const pairs: [number, number][] = [];
    for (let i = 0; i < fanIn; i++) pairs.push([(h + 1 + rng.int(0, n - 2)) % n, h]);
    // Background traffic only among the lower half of the ranks: the upper half (but h) is idle.
    const active = Math.max(2, n >>> 1);
    for (let i = 0; i < background; i++) {
      const s = rng.int(0, active - 1);
      pairs.push([s, (s + 1 + rng.int(0, active - 2)) % active]);
    }
    return graphOf(n, pairs);
  });

test('random multigraphs: every colour class is a matching, Δ colours, deterministic', () => {
  fc.assert(
    fc.property(randomGraph, (g) => {
      checkColouring(g);
    }),
    { seed: 42, numRuns: 200 },
  );
});

test('parallel edges between few ranks', () => {
  fc.assert(
    fc.property(parallelGraph, (g) => {
      checkColouring(g);
    }),
    { seed: 7, numRuns: 200 },
  );
});

test('skewed degrees: incast onto one receiver', () => {
  fc.assert(
    fc.property(incastGraph, (g) => {
      const { colors } = checkColouring(g);
      assert.ok(colors >= 1);
    }),
    { seed: 1234, numRuns: 150 },
  );
});

test('zero edges give zero colours', () => {
  for (const n of [0, 1, 5]) {
    const r = colorBipartiteEdges(new Int32Array(0), new Int32Array(0), n);
    assert.equal(r.colors, 0);
    assert.equal(r.color.length, 0);
    assert.equal(maxDegree(new Int32Array(0), new Int32Array(0), n), 0);
  }
});

test('a single edge gets colour 0', () => {
  const r = checkColouring(graphOf(2, [[1, 0]]));
  assert.deepEqual([...r.color], [0]);
  assert.equal(r.colors, 1);
});

test('all-to-all among n ranks is (n-1)-regular and needs n-1 rounds', () => {
  for (const n of [2, 3, 8, 17, 64]) {
    const pairs: [number, number][] = [];
    for (let s = 0; s < n; s++) for (let d = 0; d < n; d++) if (s !== d) pairs.push([s, d]);
    assert.equal(checkColouring(graphOf(n, pairs)).colors, n - 1);
  }
});

test('complete bipartite graph between disjoint sender and receiver sets', () => {
  for (const [a, b] of [
    [1, 1],
    [3, 5],
    [7, 2],
    [16, 16],
    [33, 20],
  ] as const) {
    const pairs: [number, number][] = [];
    for (let s = 0; s < a; s++) for (let d = 0; d < b; d++) pairs.push([s, a + d]);
    assert.equal(checkColouring(graphOf(a + b, pairs)).colors, Math.max(a, b));
  }
});

test('Δ-regular multigraphs (unions of derangements), odd and even Δ', () => {
  const rng = new Rng(99);
  for (const [n, delta] of [
    [2, 1],
    [5, 3],
    [40, 8],
    [97, 13],
    [256, 64],
    [300, 101],
  ] as const) {
    const pairs: [number, number][] = [];
    for (let k = 0; k < delta; k++) {
      // Random permutation shifted by a non-zero cyclic offset: no fixed points.
      const perm = Array.from({ length: n }, (_, i) => i);
      for (let i = n - 1; i > 0; i--) {
        const j = rng.int(0, i);
        [perm[i], perm[j]] = [perm[j]!, perm[i]!];
      }
      const shift = rng.int(1, n - 1);
      for (let i = 0; i < n; i++) pairs.push([perm[i]!, perm[(i + shift) % n]!]);
    }
    assert.equal(checkColouring(graphOf(n, pairs)).colors, delta);
  }
});

test('huge multiplicity: one pair with Δ far above n', () => {
  const pairs: [number, number][] = [];
  for (let i = 0; i < 1000; i++) pairs.push([0, 1]);
  for (let i = 0; i < 377; i++) pairs.push([1, 0]);
  pairs.push([2, 1]);
  assert.equal(checkColouring(graphOf(3, pairs)).colors, 1001);
});

test('planner scale: n = 4096 with 60K random edges', () => {
  const rng = new Rng(5);
  const n = 4096;
  const pairs: [number, number][] = [];
  for (let i = 0; i < 60_000; i++) pairs.push(edge(n, rng.int(0, n - 1), rng.int(0, n - 2)));
  checkColouring(graphOf(n, pairs));
});

test('self-loops, out-of-range ranks and mismatched columns are caller bugs', () => {
  const loop = () => colorBipartiteEdges(Int32Array.of(0, 2), Int32Array.of(1, 2), 3);
  assert.throws(loop, AssertionError);
  assert.throws(() => colorBipartiteEdges(Int32Array.of(0), Int32Array.of(3), 3), AssertionError);
  assert.throws(() => colorBipartiteEdges(Int32Array.of(-1), Int32Array.of(0), 3), AssertionError);
  assert.throws(() => colorBipartiteEdges(Int32Array.of(0, 1), Int32Array.of(1), 3), AssertionError);
  assert.throws(() => maxDegree(Int32Array.of(1), Int32Array.of(1), 3), AssertionError);
});

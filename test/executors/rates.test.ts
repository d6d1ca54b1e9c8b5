/**
 * The rate solver (src/executors/sim/rates.ts): in `exact` mode its rates are the max-min fair
 * allocation (every flow has a bottleneck: a saturated resource on which no flow is faster), equal
 * to a plain progressive filling written here; in `local` mode every allocation it leaves after
 * flows start and end is feasible. The fairness checker is shown to reject allocations that break
 * it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RateSolver } from '../../src/executors/sim/rates.ts';

interface Instance {
  capacity: number[];
  /** Resources of each flow (distinct). */
  flows: number[][];
}

const instance = fc.integer({ min: 1, max: 12 }).chain((nRes) =>
  fc.record({
    capacity: fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: nRes, maxLength: nRes }),
    flows: fc.array(fc.uniqueArray(fc.integer({ min: 0, max: nRes - 1 }), { minLength: 1, maxLength: 3 }), {
      minLength: 1,
      maxLength: 40,
    }),
  }),
);

function solverFor(inst: Instance, mode: 'exact' | 'local', budget = 1024) {
  const off = new Int32Array(inst.flows.length + 1);
  inst.flows.forEach((rs, f) => {
    off[f + 1] = off[f]! + rs.length;
  });
  const rate = new Float64Array(inst.flows.length);
  const solver = new RateSolver(
    Float64Array.from(inst.capacity),
    off,
    Int32Array.from(inst.flows.flat()),
    rate,
    { mode, hops: 1, budget },
  );
  return { solver, rate };
}

/** Adds `flows` as active, solves once and applies the new rates; returns the rates. */
function step(s: ReturnType<typeof solverFor>, add: number[], remove: number[]): Float64Array {
  const dirty: number[] = [];
  for (const f of remove) s.solver.remove(f, dirty);
  for (const f of add) s.solver.add(f, dirty);
  if (dirty.length > 0) {
    s.solver.solve(dirty);
    // As the engine applies them (engine.ts): through the solve's local ids.
    const touched = s.solver.touched;
    for (let k = 0; k < touched.length; k++) s.solver.setTouchedRate(k, s.solver.newRate[touched[k]!]!);
  }
  return s.rate;
}

/** Capacity each resource's `active` flows use at `rate`. */
function usage(inst: Instance, active: readonly number[], rate: ArrayLike<number>): Float64Array {
  const used = new Float64Array(inst.capacity.length);
  for (const f of active) for (const r of inst.flows[f]!) used[r]! += rate[f]!;
  return used;
}

/** Why `rate` over the `active` flows is not max-min fair (null: it is). */
function unfairness(inst: Instance, active: readonly number[], rate: ArrayLike<number>): string | null {
  const tol = 1e-9;
  const used = usage(inst, active, rate);
  for (let r = 0; r < used.length; r++)
    if (used[r]! > inst.capacity[r]! * (1 + tol)) return `resource ${r} over capacity`;
  for (const f of active) {
    const bottleneck = inst.flows[f]!.some(
      (r) =>
        used[r]! >= inst.capacity[r]! * (1 - tol) &&
        active.every((g) => !inst.flows[g]!.includes(r) || rate[g]! <= rate[f]! * (1 + tol)),
    );
    if (!bottleneck) return `flow ${f} has no bottleneck`;
  }
  return null;
}

/** Progressive filling, the textbook way: raise every unfrozen flow until a resource fills. */
function reference(inst: Instance, active: readonly number[]): Float64Array {
  const rate = new Float64Array(inst.flows.length);
  const left = Float64Array.from(inst.capacity);
  let open = [...active];
  while (open.length > 0) {
    let inc = Number.POSITIVE_INFINITY;
    for (let r = 0; r < left.length; r++) {
      const n = open.filter((f) => inst.flows[f]!.includes(r)).length;
      if (n > 0) inc = Math.min(inc, left[r]! / n);
    }
    for (const f of open) {
      rate[f]! += inc;
      for (const r of inst.flows[f]!) left[r]! -= inc;
    }
    open = open.filter((f) => inst.flows[f]!.every((r) => left[r]! > 1e-9 * inst.capacity[r]!));
  }
  return rate;
}

describe('rate solver', () => {
  it('exact mode gives the max-min fair rates of progressive filling', () => {
    fc.assert(
      fc.property(instance, (inst) => {
        const all = inst.flows.map((_, f) => f);
        const rate = step(solverFor(inst, 'exact'), all, []);
        assert.equal(unfairness(inst, all, rate), null);
        const ref = reference(inst, all);
        for (const f of all) assert.ok(Math.abs(rate[f]! - ref[f]!) <= 1e-9 * Math.max(1, ref[f]!));
      }),
      { numRuns: 300, seed: 41 },
    );
  });

  it('exact mode stays max-min fair as flows start and end; local mode stays feasible', () => {
    fc.assert(
      fc.property(instance, fc.array(fc.nat(), { minLength: 1, maxLength: 30 }), (inst, moves) => {
        const exact = solverFor(inst, 'exact');
        const local = solverFor(inst, 'local', 2);
        const active = new Set<number>();
        for (const m of moves) {
          const f = m % inst.flows.length;
          const add = active.has(f) ? [] : [f];
          const remove = active.has(f) ? [f] : [];
          if (add.length > 0) active.add(f);
          else active.delete(f);
          const now = [...active];
          assert.equal(unfairness(inst, now, step(exact, add, remove)), null);
          const lr = step(local, add, remove);
          const used = usage(inst, now, lr);
          for (let r = 0; r < used.length; r++) assert.ok(used[r]! <= inst.capacity[r]! * (1 + 1e-9));
          for (const g of now) assert.ok(lr[g]! > 0, 'an active flow moves');
        }
      }),
      { numRuns: 200, seed: 41 },
    );
  });

  it('the fairness check rejects an allocation over capacity or below max-min', () => {
    // Two flows on resource 0 (capacity 10), the second also on resource 1 (capacity 2).
    const inst: Instance = { capacity: [10, 2], flows: [[0], [0, 1]] };
    assert.equal(unfairness(inst, [0, 1], [8, 2]), null);
    assert.match(unfairness(inst, [0, 1], [9, 2]) ?? '', /over capacity/);
    assert.match(unfairness(inst, [0, 1], [7, 2]) ?? '', /no bottleneck/);
    assert.match(unfairness(inst, [0, 1], [5, 1]) ?? '', /no bottleneck/);
  });
});

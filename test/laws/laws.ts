/**
 * The laws every executor obeys, written once. Each law takes what an executor returned for a plan
 * and throws (node:assert) when the result breaks it:
 * - numeric executors (cpu, torch): O, dQ, dK, dV within {@link MAX_ERROR} of the float64 reference;
 * - the simulator: finite positive makespans, no lost or invented bytes (per kind, equal to the
 *   plan's own report), and every rank busy exactly as long as the cost model says its ops take;
 * - planners: a valid plan; congestion 1 in every round for the planners that claim it;
 *   for those, as many `kv` rounds as the largest number of K/V blocks a rank sends or receives (Δ).
 */
import assert from 'node:assert/strict';
import { ChunkCoster } from '../../src/cost/chunks.ts';
import { KernelModel } from '../../src/cost/kernel.ts';
import { OpCost } from '../../src/cost/op-cost.ts';
import { compareOutputs, type OutputErrors, referenceAttention } from '../../src/executors/reference.ts';
import type { SimResult } from '../../src/executors/sim/index.ts';
import type { SequenceInputs, SequenceOutputs } from '../../src/executors/types.ts';
import { planReport, reshuffleBytes } from '../../src/plan/report.ts';
import type { Phase, Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { type ClusterSpec, computeSlowdown } from '../../src/problem/cluster.ts';

/** Largest relative error a numeric executor may have against the float64 reference (float32). */
export const MAX_ERROR = 1e-5;

/** The numeric law; returns the errors for the suite's summary. */
export function numericLaw(
  plan: Plan,
  inputs: SequenceInputs,
  outputs: SequenceOutputs | undefined,
): OutputErrors {
  assert.ok(outputs, 'a numeric executor returns outputs');
  const e = compareOutputs(outputs, referenceAttention(plan.model, plan.mask, inputs));
  for (const k of ['o', 'dq', 'dk', 'dv'] as const)
    assert.ok(e[k] <= MAX_ERROR, `${k}: relative error ${e[k]} > ${MAX_ERROR}`);
  return e;
}

/** Modelled compute time of every rank in one phase, summed op by op with the cost model. */
export function modelledBusyMs(
  plan: Plan,
  phase: Phase,
  dir: 'forward' | 'backward',
  cluster: ClusterSpec,
): Float64Array {
  const kernel = new KernelModel(plan.model, {
    peakTflops: cluster.peakTflops,
    slowdown: computeSlowdown(cluster),
  });
  const op = new OpCost(kernel, plan.mask);
  const chunks = new ChunkCoster(plan, kernel, false);
  const busy = new Float64Array(plan.world);
  const c = phase.compute;
  const t = plan.tasks;
  const ct = plan.chunkTasks;
  for (let i = 0; i < c.rank.length; i++) {
    op.reset(dir);
    for (let k = c.taskOffsets[i]!; k < c.taskOffsets[i + 1]!; k++) {
      const id = c.taskIds[k]!;
      op.addTask(t.qStart[id]!, t.qLength[id]!, t.kvStart[id]!, t.kvLength[id]!);
    }
    if (ct && c.chunkTaskOffsets && c.chunkTaskIds)
      for (let k = c.chunkTaskOffsets[i]!; k < c.chunkTaskOffsets[i + 1]!; k++) {
        const id = c.chunkTaskIds[k]!;
        chunks.addTask(op, dir, ct.set[id]!, ct.parts[id]!, ct.qPart[id]!, ct.kvPart[id]!);
      }
    busy[c.rank[i]!]! += op.finish();
  }
  return busy;
}

/** The simulator's law, for a result of `simulatePlan(plan, { padding: false, cluster })`. */
export function simLaw(plan: Plan, r: SimResult): void {
  const report = planReport(plan);
  for (const dir of ['forward', 'backward'] as const) {
    const s = r[dir];
    assert.ok(Number.isFinite(s.makespanMs) && s.makespanMs > 0, `${dir}: makespan ${s.makespanMs} ms`);
    for (const k of ['in', 'kv', 'out', 'dkv'] as const)
      assert.ok(
        Math.abs(s.bytes[k] - report[dir].bytes[k]) <= 1e-9 * Math.max(1, report[dir].bytes[k]),
        `${dir}: ${k} bytes moved ${s.bytes[k]} != the plan's ${report[dir].bytes[k]}`,
      );
    const busy = modelledBusyMs(plan, plan[dir], dir, r.cluster);
    for (let rank = 0; rank < plan.world; rank++) {
      const got = s.computeMs[rank]!;
      assert.ok(
        Math.abs(got - busy[rank]!) <= 1e-9 * Math.max(1, busy[rank]!),
        `${dir}: rank ${rank} busy ${got} ms, the cost model's ops sum to ${busy[rank]} ms`,
      );
      assert.ok(got <= s.makespanMs * (1 + 1e-12), `${dir}: rank ${rank} busy longer than the makespan`);
    }
  }
}

/**
 * Planners that claim congestion 1 (every rank sends and receives at most one message per round).
 * The others do not: magi's stages are all-to-all-v collectives, and a bytescale (so also wlb)
 * rank that holds parts of two long sequences runs both groups' rings at once.
 */
export const CONGESTION_FREE_PLANNERS: ReadonlySet<string> = new Set(['fcp', 'ring']);

/** The planner laws for one plan of planner `name`. */
export function plannerLaw(name: string, plan: Plan): void {
  const { issues, report } = validatePlan(plan);
  assert.deepEqual(
    issues.map((x) => x.code),
    [],
    `invalid plan: ${issues
      .slice(0, 3)
      .map((x) => x.message)
      .join('; ')}`,
  );
  assert.ok(report);
  // The reshuffle's bytes by the short walk (`fcp plan`'s locality comparison) as the report counts them.
  const moved =
    report.forward.bytes.in + report.forward.bytes.out + report.backward.bytes.in + report.backward.bytes.out;
  assert.ok(
    Math.abs(reshuffleBytes(plan) - moved) <= 1e-9 * Math.max(1, moved),
    `reshuffle ${reshuffleBytes(plan)} vs ${moved}`,
  );
  for (const dir of ['forward', 'backward'] as const) {
    const p = report[dir];
    if (CONGESTION_FREE_PLANNERS.has(name)) {
      assert.ok(p.congestion <= 1, `${dir}: congestion ${p.congestion}`);
      // ... on the NICs too, under the routing the plan was made for (report-nic.ts).
      assert.ok(p.nicCongestion <= 1, `${dir}: NIC congestion ${p.nicCongestion}`);
      assert.ok(p.nvlinkCongestion <= 1, `${dir}: NVLink port congestion ${p.nvlinkCongestion}`);
    }
    // Matching rounds: exactly Δ of the direct fetch graph they were placed for (its senders are
    // `kvOrigin`; transfers handed over within their rounds can only lower the final graph's Δ).
    // A rank serving two rings at once (bytescale) folds several rings' steps into one round, so
    // the claim is made only by the congestion-free planners. A plan for PXN routing splits rounds
    // that would share a NIC (FCP's rail-rounds.ts): at least Δ then.
    if (CONGESTION_FREE_PLANNERS.has(name)) {
      if (report.nicRoute.routing === 'pxn')
        assert.ok(
          p.kvRounds >= p.kvDirectDelta,
          `${dir}: ${p.kvRounds} kv rounds below Δ ${p.kvDirectDelta}`,
        );
      else
        assert.equal(
          p.kvRounds,
          p.kvDirectDelta,
          `${dir}: ${p.kvRounds} kv rounds for direct Δ = ${p.kvDirectDelta}`,
        );
      assert.ok(p.kvDelta <= p.kvRounds, `${dir}: Δ ${p.kvDelta} above ${p.kvRounds} kv rounds`);
    }
  }
}

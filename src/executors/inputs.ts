/**
 * Inputs of numeric executors: seeded random Q, K, V, dO per sequence, and the checks every
 * executor applies to inputs before running (shape, lengths, head counts).
 */

import { FcpError, type FcpIssue, issue } from '../core/issues.ts';
import { Rng } from '../core/rng.ts';
import type { ModelShape, Plan } from '../plan/types.ts';
import type { SequenceInputs } from './types.ts';

/**
 * Seeded random inputs for sequences of the given lengths: every element uniform in [-1, 1),
 * drawn sequence by sequence in the order q, k, v, dO from one {@link Rng}. Same lengths, shape and
 * seed give the same bytes.
 */
export function randomInputs(sequences: ArrayLike<number>, model: ModelShape, seed: number): SequenceInputs {
  const rng = new Rng(seed);
  const qw = model.qHeads * model.headDim;
  const kw = model.kvHeads * model.headDim;
  const out: SequenceInputs = { q: [], k: [], v: [], dO: [] };
  for (let s = 0; s < sequences.length; s++) {
    const len = sequences[s]!;
    out.q.push(rng.fillUniform(new Float32Array(len * qw)));
    out.k.push(rng.fillUniform(new Float32Array(len * kw)));
    out.v.push(rng.fillUniform(new Float32Array(len * kw)));
    out.dO.push(rng.fillUniform(new Float32Array(len * qw)));
  }
  return out;
}

/** Seeded random inputs for a plan's sequences and model shape. */
export function randomInputsForPlan(plan: Plan, seed: number): SequenceInputs {
  return randomInputs(plan.sequences, plan.model, seed);
}

/** Checks a model shape for attention: positive sizes, query heads a multiple of KV heads. */
export function modelIssues(model: ModelShape): FcpIssue[] {
  const issues: FcpIssue[] = [];
  for (const k of ['qHeads', 'kvHeads', 'headDim'] as const)
    if (!Number.isInteger(model[k]) || model[k] < 1)
      issues.push(
        issue('exec.input.shape', `model.${k} must be a positive integer (got ${model[k]})`, `model.${k}`),
      );
  if (issues.length === 0 && model.qHeads % model.kvHeads !== 0)
    issues.push(
      issue(
        'exec.input.heads',
        `query heads (${model.qHeads}) must be a multiple of KV heads (${model.kvHeads}) for grouped-query attention`,
        'model.qHeads',
      ),
    );
  return issues;
}

/**
 * Checks that `inputs` fit `plan`: a model shape attention can run, one array per sequence of the
 * plan for each of q, k, v, dO, each of length tokens x heads x headDim. Throws FcpError
 * (`exec.input.missing`, `exec.input.heads`, `exec.input.shape`, `exec.input.sequences`,
 * `exec.input.length`) listing every problem.
 */
export function checkInputs(
  plan: Plan,
  inputs: SequenceInputs | undefined,
): asserts inputs is SequenceInputs {
  const issues = modelIssues(plan.model);
  if (issues.length > 0) throw new FcpError(issues);
  if (!inputs)
    throw new FcpError(
      issue('exec.input.missing', 'this executor computes real attention and needs inputs (q, k, v, dO)'),
    );
  const n = plan.sequences.length;
  const qw = plan.model.qHeads * plan.model.headDim;
  const kw = plan.model.kvHeads * plan.model.headDim;
  for (const [name, width] of [
    ['q', qw],
    ['k', kw],
    ['v', kw],
    ['dO', qw],
  ] as const) {
    const arrs = inputs[name];
    if (!Array.isArray(arrs) || arrs.length !== n) {
      issues.push(
        issue(
          'exec.input.sequences',
          `inputs.${name} holds ${Array.isArray(arrs) ? arrs.length : 'no'} sequences but the plan has ${n}`,
          `inputs.${name}`,
        ),
      );
      continue;
    }
    for (let s = 0; s < n; s++) {
      const a = arrs[s];
      const want = plan.sequences[s]! * width;
      if (!(a instanceof Float32Array) || a.length !== want)
        issues.push(
          issue(
            'exec.input.length',
            `inputs.${name}[${s}] must be a Float32Array of ${want} values (${plan.sequences[s]} tokens x ${width}), got ${a instanceof Float32Array ? a.length : typeof a}`,
            `inputs.${name}`,
            s,
          ),
        );
    }
  }
  if (issues.length > 0) throw new FcpError(issues);
}

/**
 * CPU runtime benchmark: attention kernel throughput on one thread (what each rank's worker
 * thread runs), the float64 reference's throughput, and the end-to-end time of `fcp verify` at
 * world 8 with 1024 tokens per rank (plan, worker boot, forward, backward, reference).
 *
 *   npx tsx bench/cpu-runtime.ts [--strategy fcp] [--world 8] [--tokens-per-rank 1024] [--seconds 1]
 *
 * FLOPs follow docs/plan-format.md: forward 4·pairs·qHeads·headDim, backward 2.5x forward (pairs attended).
 */
import { parseArgs } from 'node:util';
import { verifyPlan } from '../src/cli/verify.ts';
import { Rng } from '../src/core/rng.ts';
import { attentionBackward } from '../src/executors/cpu/kernels/backward.ts';
import { attentionForward } from '../src/executors/cpu/kernels/forward.ts';
import { createScratch } from '../src/executors/cpu/kernels/shape.ts';
import { referenceSequence } from '../src/executors/reference.ts';
import { getPlanner } from '../src/experiments/strategies.ts';
import { attendedPairs, backwardFlops, forwardFlops, SMALL_MODEL } from '../src/model/attention.ts';
import type { ModelShape } from '../src/plan/types.ts';
import { resolveProblem } from '../src/problem/problem.ts';

const { values: args } = parseArgs({
  options: {
    strategy: { type: 'string', default: 'fcp' },
    world: { type: 'string', default: '8' },
    'tokens-per-rank': { type: 'string', default: '1024' },
    seconds: { type: 'string', default: '1' },
  },
});
const seconds = Number(args.seconds);

/** Runs `fn` repeatedly for about `seconds`; returns the median and best time per call (ms). */
function time(fn: () => void): { median: number; best: number; runs: number } {
  fn(); // warm up (JIT)
  const samples: number[] = [];
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end || samples.length < 3) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  return { median: samples[Math.floor(samples.length / 2)]!, best: samples[0]!, runs: samples.length };
}

interface Row {
  what: string;
  shape: string;
  mask: string;
  median: number;
  best: number;
  gflops: number;
  gflopsBest: number;
}

function kernelRows(model: ModelShape, nq: number, nk: number, causal: boolean): Row[] {
  const rng = new Rng(1);
  const qw = model.qHeads * model.headDim;
  const kw = model.kvHeads * model.headDim;
  // Causal tiles sit on the diagonal's bottom-right: queries are the last nq of the nk keys.
  const len = nk;
  const qs = len - nq;
  const q = rng.fillUniform(new Float32Array(len * qw));
  const k = rng.fillUniform(new Float32Array(len * kw));
  const v = rng.fillUniform(new Float32Array(len * kw));
  const dO = rng.fillUniform(new Float32Array(len * qw));
  const o = new Float64Array(len * qw);
  const lse = new Float64Array(len * model.qHeads);
  const taskO = new Float64Array(nq * qw);
  const taskLse = new Float64Array(nq * model.qHeads);
  const dq = new Float64Array(len * qw);
  const dk = new Float64Array(len * kw);
  const dv = new Float64Array(len * kw);
  const scratch = createScratch(nk, model.headDim);
  const pairs = attendedPairs(causal, qs, nq, 0, nk);
  const fwd = time(() => attentionForward(model, causal, q, k, v, qs, nq, 0, nk, taskO, taskLse, scratch));
  // Backward needs the forward's O and LSE at the query rows.
  o.set(taskO, qs * qw);
  lse.set(taskLse, qs * model.qHeads);
  const bwd = time(() =>
    attentionBackward(model, causal, q, k, v, o, lse, dO, qs, nq, 0, nk, dq, dk, dv, scratch),
  );
  const shape = `${nq}x${nk} ${model.qHeads}/${model.kvHeads}x${model.headDim}`;
  const mask = causal ? 'causal' : 'full';
  const ff = forwardFlops(model, pairs);
  const bf = backwardFlops(model, pairs);
  return [
    {
      what: 'forward kernel',
      shape,
      mask,
      median: fwd.median,
      best: fwd.best,
      gflops: ff / fwd.median / 1e6,
      gflopsBest: ff / fwd.best / 1e6,
    },
    {
      what: 'backward kernel',
      shape,
      mask,
      median: bwd.median,
      best: bwd.best,
      gflops: bf / bwd.median / 1e6,
      gflopsBest: bf / bwd.best / 1e6,
    },
  ];
}

function referenceRow(model: ModelShape, len: number): Row {
  const rng = new Rng(2);
  const q = rng.fillUniform(new Float32Array(len * model.qHeads * model.headDim));
  const k = rng.fillUniform(new Float32Array(len * model.kvHeads * model.headDim));
  const v = rng.fillUniform(new Float32Array(len * model.kvHeads * model.headDim));
  const dO = rng.fillUniform(new Float32Array(len * model.qHeads * model.headDim));
  const t = time(() => referenceSequence(model, 'causal', q, k, v, dO));
  const pairs = attendedPairs(true, 0, len, 0, len);
  const flops = forwardFlops(model, pairs) + backwardFlops(model, pairs);
  return {
    what: 'reference fwd+bwd (float64)',
    shape: `${len} tokens ${model.qHeads}/${model.kvHeads}x${model.headDim}`,
    mask: 'causal',
    median: t.median,
    best: t.best,
    gflops: flops / t.median / 1e6,
    gflopsBest: flops / t.best / 1e6,
  };
}

function table(head: string[], rows: string[][]): string {
  const all = [head, ...rows];
  const w = head.map((_, c) => Math.max(...all.map((r) => r[c]!.length)));
  return all
    .map((r) => r.map((cell, c) => (c < 3 ? cell.padEnd(w[c]!) : cell.padStart(w[c]!))).join('  '))
    .join('\n');
}

const LLAMA_HEADS: ModelShape = { qHeads: 8, kvHeads: 1, headDim: 128, bytesPerElement: 4 };
const rows: Row[] = [
  ...kernelRows(SMALL_MODEL, 256, 1024, false),
  ...kernelRows(SMALL_MODEL, 256, 1024, true),
  ...kernelRows(LLAMA_HEADS, 256, 1024, false),
  referenceRow(SMALL_MODEL, 512),
];
console.log(`CPU attention kernels, one thread (median and best of ~${seconds}s of runs)`);
console.log(
  table(
    ['kernel', 'tile (q x kv, heads)', 'mask', 'ms', 'GFLOP/s', 'best ms', 'best GFLOP/s'],
    rows.map((r) => [
      r.what,
      r.shape,
      r.mask,
      r.median.toFixed(2),
      r.gflops.toFixed(2),
      r.best.toFixed(2),
      r.gflopsBest.toFixed(2),
    ]),
  ),
);

// End to end: fcp verify at world 8, 1024 tokens per rank, small model, longtail batch.
const world = Number(args.world);
const tpr = Number(args['tokens-per-rank']);
const problem = resolveProblem({
  batch: 'longtail',
  world,
  tokensPerRank: tpr,
  seed: 1,
  mask: 'causal',
  model: SMALL_MODEL,
});
const planner = getPlanner(args.strategy);
const t0 = performance.now();
const plan = planner.plan(problem, {});
const planMs = performance.now() - t0;
const r = await verifyPlan(plan, { seed: 1 });
const total = performance.now() - t0;
let pairs = 0;
for (const len of plan.sequences) pairs += attendedPairs(true, 0, len, 0, len);
const d = (r.execution.details ?? {}) as { bootMs?: number; validateMs?: number };
const fw = r.execution.perRank.forward;
const bw = r.execution.perRank.backward;
const maxCompute = (ts: typeof fw) => Math.max(...ts.map((x) => x.computeMs));
console.log('');
console.log(
  `fcp verify end to end: strategy ${plan.strategy}, world ${world}, ${tpr} tokens per rank, ${plan.sequences.length} sequences (longest ${Math.max(...plan.sequences)}), ` +
    `causal, ${SMALL_MODEL.qHeads}/${SMALL_MODEL.kvHeads}x${SMALL_MODEL.headDim}, ${(forwardFlops(SMALL_MODEL, pairs) / 1e9).toFixed(2)} GFLOP forward`,
);
console.log(
  table(
    ['step', '', '', 'ms'],
    [
      ['plan', '', '', planMs.toFixed(1)],
      ['validate', '', '', (d.validateMs ?? 0).toFixed(1)],
      ['boot workers', '', '', (d.bootMs ?? 0).toFixed(1)],
      ['forward', '', '', r.execution.forwardMs.toFixed(1)],
      ['backward', '', '', r.execution.backwardMs.toFixed(1)],
      ['reference', '', '', r.referenceMs.toFixed(1)],
      ['total', '', '', total.toFixed(1)],
      ['max rank compute fwd/bwd', '', '', `${maxCompute(fw).toFixed(1)}/${maxCompute(bw).toFixed(1)}`],
    ],
  ),
);
console.log(
  `max relative error: o ${r.errors.o.toExponential(2)}, dq ${r.errors.dq.toExponential(2)}, dk ${r.errors.dk.toExponential(2)}, dv ${r.errors.dv.toExponential(2)} (${r.ok ? 'ok' : 'MISMATCH'})`,
);

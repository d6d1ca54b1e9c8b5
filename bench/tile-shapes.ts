/**
 * Where an FCP plan's kernel time goes, by tile shape (modelled, the default calibration): every
 * task cut into the kernel model's pieces (src/cost/pieces.ts), each piece costed alone on the
 * path the runtime's `auto` policy gives it (dense cuDNN or varlen flash; no launch overheads, no
 * batching, no SMs reserved for communication), summed per class of shape: mask, query side,
 * key side. Beside it, the same sequences each run as one causal launch (what a strategy that
 * never cuts a sequence would pay per piece), on the same FLOPs.
 *
 * What it shows (docs/results.md, "Session 36"; the forward's share was first seen by hand, "No
 * block below 4096 tokens in mode (b)"): on `magi` at 128 ranks, mode (b), seed 1 (blocks
 * of 2048-4096, `fcp plan` prints them), 55% of the backward's modelled kernel time is in full
 * 2048 squares (class `q 2k-4k k 2k-4k`) at 0.529 of peak, against 0.559 for 4096 squares: the
 * granularity refinement (placement/blocks.ts) halves the blocks of long sequences for balance,
 * and the calibration runs neither those squares nor their merged rectangles (kernel-time.ts,
 * mergeSquares) as fast as 4096 squares.
 *
 * Run: npx tsx bench/tile-shapes.ts [--batch magi] [--world 128] [--seed 1] [--loader-layout] [--top 8]
 */
import { KernelModel } from '../src/cost/kernel.ts';
import { decompose, piecePairs } from '../src/cost/pieces.ts';
import { fcpPlanner } from '../src/planners/fcp/index.ts';
import { KernelTime } from '../src/planners/fcp/kernel-time.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const args = process.argv.slice(2);
const num = (k: string, d: string): number => {
  const v = Number(argValue(args, k, d));
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`tile-shapes: ${k} must be a positive integer\n`);
    process.exit(2);
  }
  return v;
};
const batch = argValue(args, '--batch', 'magi');
const world = num('--world', '128');
const seed = num('--seed', '1');
const top = num('--top', '8');
const loader = args.includes('--loader-layout');
const problem = resolveProblem({ batch, world, tokensPerRank: 32768, seed });
const plan = fcpPlanner.plan(problem, loader ? { loaderLayout: true } : {});
const km = new KernelModel(plan.model, {});
const causal = plan.mask === 'causal';

/** Side classes of a piece, by tokens. */
const side = (x: number): string =>
  x >= 4096 ? '4096+' : x >= 2048 ? '2k-4k' : x >= 1024 ? '1k-2k' : x >= 512 ? '512-1k' : '<512';
// The planner's own piece times (dense or varlen as the `auto` policy runs them, no launch).
const tm = new KernelTime(plan.model);
const pieceMs = tm.pieceMs.bind(tm);
const mfu = (dir: 'forward' | 'backward', ms: number, pairs: number): string =>
  (km.flops(dir, pairs) / (ms * 1e-3) / (km.peakTflops * 1e12)).toFixed(3);

console.log(
  `FCP (${loader ? 'b' : 'a'}), ${batch}, ${world} ranks, seed ${seed}: kernel time by tile shape (modelled, pieces alone, no launches)`,
);
const t = plan.tasks;
for (const dir of ['forward', 'backward'] as const) {
  const cls = new Map<string, { ms: number; pairs: number; n: number }>();
  let total = 0;
  let pairs = 0;
  for (let i = 0; i < t.rank.length; i++)
    decompose(
      causal,
      km.pieceMode,
      t.qStart[i]!,
      t.qLength[i]!,
      t.kvStart[i]!,
      t.kvLength[i]!,
      (lq, lk, c) => {
        const ms = pieceMs(dir, lq, lk, c);
        const p = piecePairs(lq, lk, c);
        const key = `${c ? 'causal' : 'full'} q ${side(lq)} k ${side(lk)}`;
        const e = cls.get(key) ?? { ms: 0, pairs: 0, n: 0 };
        e.ms += ms;
        e.pairs += p;
        e.n++;
        cls.set(key, e);
        total += ms;
        pairs += p;
      },
    );
  let whole = 0;
  for (const L of plan.sequences) whole += pieceMs(dir, L, L, causal);
  console.log(
    `${dir}: ${total.toFixed(0)} ms at ${mfu(dir, total, pairs)} of peak; the sequences whole: ${whole.toFixed(0)} ms at ${mfu(dir, whole, pairs)}`,
  );
  console.log('  shape                      pieces       ms   share  of peak');
  for (const [k, e] of [...cls].sort((a, b) => b[1].ms - a[1].ms).slice(0, top))
    console.log(
      `  ${k.padEnd(24)} ${String(e.n).padStart(8)} ${e.ms.toFixed(0).padStart(8)} ${((100 * e.ms) / total).toFixed(1).padStart(6)}%  ${mfu(dir, e.ms, e.pairs)}`,
    );
}

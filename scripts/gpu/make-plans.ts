/**
 * Writes the plans the GPU script needs into scripts/gpu/plans/ (gzip JSON): the replay plans
 * (fcp, ring, magi on `longtail` at 64, 128 and 256 ranks, 32K tokens per rank, Llama-3-70B
 * attention), small numerics plans (1 rank; 4 ranks of each strategy) and the multi-GPU plans of
 * issue 7 (2/4/8 ranks, longtail and magi batches). Run here, before the GPU
 * call (the GPU machine has no Node): `npx tsx scripts/gpu/make-plans.ts`.
 */
import { mkdirSync, statSync } from 'node:fs';
import { resolveProblem } from '../../src/problem/problem.ts';
import { writePlan } from '../../src/plan/io.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';

const dir = new URL('./plans/', import.meta.url).pathname;
mkdirSync(dir, { recursive: true });
const only = process.argv[2];

function emit(
  name: string,
  strategy: string,
  opts: Parameters<typeof resolveProblem>[0],
  validate: boolean,
  plannerOptions: Record<string, unknown> = {},
): void {
  if (only && !name.startsWith(only)) return;
  const t0 = performance.now();
  const problem = resolveProblem(opts);
  const plan = getPlanner(strategy).plan(problem, plannerOptions);
  const ms = performance.now() - t0;
  const issues = validate ? validatePlan(plan).issues : [];
  if (issues.length) throw new Error(`${name}: invalid plan: ${issues[0]!.code} ${issues[0]!.message}`);
  const path = `${dir}${name}.json.gz`;
  writePlan(path, plan);
  console.log(`${name}: ${plan.sequences.length} sequences, planned in ${ms.toFixed(0)} ms, ${(statSync(path).size / 1e6).toFixed(2)} MB${validate ? ', valid' : ''}`);
}

// Numerics: Llama-3-70B shape, a few sequences (bf16 against torch SDPA on the GPU).
const small = [3000, 1000, 517, 4096, 64, 1900];
emit('num-fcp-1', 'fcp', { batch: small, world: 1, mask: 'causal' }, true);
for (const s of ['fcp', 'ring', 'magi']) emit(`num-${s}-4`, s, { batch: small, world: 4, mask: 'causal' }, true);
// Multi-GPU runs (issue 7): every strategy on 2, 4 and 8 GPUs of one host, longtail and magi batches.
for (const world of [2, 4, 8])
  for (const batch of ['longtail', 'magi'])
    for (const s of ['fcp', 'ring', 'magi'])
      emit(`multi-${s}-${batch}-${world}`, s, { batch, world, tokensPerRank: 32768, seed: 1 }, true);
// Replay: longtail, 32K tokens per rank.
for (const world of [64, 128, 256])
  for (const s of ['fcp', 'ring', 'magi'])
    emit(`replay-${s}-${world}`, s, { batch: 'longtail', world, tokensPerRank: 32768, seed: 1 }, world <= 64);
// Replay of FCP's mode (b) (the loader layout), the deployment the headline compares.
for (const world of [64, 256])
  emit(`replay-fcpb-${world}`, 'fcp', { batch: 'longtail', world, tokensPerRank: 32768, seed: 1 }, world <= 64, {
    loaderLayout: true,
  });

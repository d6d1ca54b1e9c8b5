/**
 * What MagiAttention's dynamic solver (`MAGI_ATTENTION_QO_COMM=1`, not modelled by our `magi`
 * planner: docs/baselines.md) would do on our batches: for each batch kind, world and chunk size,
 * our `magi` dispatch (the chunk owners of its MinHeapDispatchAlg) is written to a JSON file and
 * MagiAttention's own solver is run on it by scripts/peers/magi_dynamic_solver.py, which prints
 * the mask-area imbalance and forward bytes of the static and the dynamic assignment. Needs a
 * checkout of the `magi_attention` package (`fetch` SandAI-org/MagiAttention, then `git archive
 * HEAD magi_attention | tar -x -C DIR`) and /usr/bin/python3.
 *
 * Run: npx tsx bench/magi-dynamic.ts --magi DIR [--batches longtail,magi,bimodal] [--worlds 256]
 *        [--chunks 2048,4096] [--seed 1]
 * (256 ranks: 10-25 s per case; 1024 ranks: minutes.)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { magiDispatch } from '../src/planners/magi/dispatch.ts';
import { resolveProblem } from '../src/problem/problem.ts';
import { argValue } from './fcp-replay.ts';

const argv = process.argv.slice(2);
const magi = argValue(argv, '--magi', '');
if (magi === '') {
  console.error('magi-dynamic: --magi DIR (the folder holding the magi_attention package) is required');
  process.exit(2);
}
const list = (k: string, d: string): string[] => argValue(argv, k, d).split(',');
const batches = list('--batches', 'longtail,magi,bimodal');
const worlds = list('--worlds', '256').map(Number);
const chunks = list('--chunks', '2048,4096').map(Number);
const seed = Number(argValue(argv, '--seed', '1'));

const dir = mkdtempSync(join(tmpdir(), 'magi-dynamic-'));
const inputs: string[] = [];
for (const batch of batches)
  for (const world of worlds)
    for (const chunk of chunks) {
      const p = resolveProblem({ batch, world, tokensPerRank: 32768, seed });
      const d = magiDispatch(p.sequences, world, p.mask, chunk);
      const file = join(dir, `${batch}-${world}-${chunk}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          sequences: Array.from(p.sequences),
          owner: Array.from(d.owner),
          chunkSize: d.chunkSize,
          model: p.model,
        }),
      );
      inputs.push(file);
    }
console.log(
  `MagiAttention's dynamic solver on our dispatch, seed ${seed}, 32K tokens a rank (its own code, scripts/peers/magi_dynamic_solver.py)`,
);
console.log(
  'case                   area imbalance static -> dynamic   forward GB static -> dynamic   solve s',
);
for (const file of inputs) {
  // One process per case, so that each line prints as its case ends.
  const r = spawnSync('/usr/bin/python3', ['scripts/peers/magi_dynamic_solver.py', '--magi', magi, file], {
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) {
    console.error(`magi-dynamic: the solver failed on ${file}: ${r.stderr.trim().split('\n').pop()}`);
    process.exit(1);
  }
  const o = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, number>;
  const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;
  const name = file.split(/[\\/]/).pop()!.replace('.json', '');
  console.log(
    `${name.padEnd(22)} ${`${pct(o.static_imbalance!)} -> ${pct(o.dynamic_imbalance!)}`.padEnd(35)}${`${o.static_fwd_GB} -> ${o.dynamic_fwd_GB}`.padEnd(31)}${o.solve_s}`,
  );
}
rmSync(dir, { recursive: true, force: true });

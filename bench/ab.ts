/**
 * A/B timing of the planner against an older commit on a noisy machine: this shared 2-core host's
 * speed drifts by up to 25% within an hour, so before/after numbers from separate runs are not
 * comparable. This checks `--base` out into a temporary worktree (node_modules linked), then runs
 * the same bench command in both trees alternately (A B, B A, A B, ...), so that a drift hits both
 * alike, and prints each run's wall and CPU time per plan (as bench/prof-run.ts prints them), the
 * means and the ratio of the means.
 *
 * Run: npx tsx bench/ab.ts --base <rev> [--rounds 3] [--keep] [-- bench/prof-run.ts 256 3 longtail --loader-layout]
 *
 * The command after `--` is a script of this repository run with `npx tsx` in each tree (default:
 * mode (b) at 256 ranks, as above); it must print `wall X ms/plan` and `cpu Y ms/plan`. Give each
 * run several seconds of planning and several rounds: two rounds of `bench/prof-run.ts 64 3` (1.5 s
 * a run) gave head/base 1.48 and then 0.90 for two trees whose plans and code paths are the same.
 */
import { execFileSync } from 'node:child_process';
import { argValue } from './fcp-replay.ts';
import { repoRoot, withWorktree } from './worktree.ts';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const own = dash >= 0 ? argv.slice(0, dash) : argv;
const command =
  dash >= 0 ? argv.slice(dash + 1) : ['bench/prof-run.ts', '256', '3', 'longtail', '--loader-layout'];
const base = argValue(own, '--base', '');
if (base === '' || command.length === 0) {
  console.error('bench/ab.ts: usage: --base <rev> [--rounds 3] [--keep] [-- <script> <args>]');
  process.exit(2);
}
const rounds = Math.max(1, Number(argValue(own, '--rounds', '3')));
const root = repoRoot();

/** One run of the command in `cwd`: its wall and CPU ms per plan. */
function once(cwd: string): { wall: number; cpu: number } {
  const out = execFileSync('npx', ['tsx', ...command], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const wall = /wall ([\d.]+) ms\/plan/.exec(out);
  const cpu = /cpu ([\d.]+) ms\/plan/.exec(out);
  if (!wall || !cpu) throw new Error(`bench/ab.ts: no "wall X ms/plan" and "cpu Y ms/plan" in:\n${out}`);
  return { wall: Number(wall[1]), cpu: Number(cpu[1]) };
}

const runs: { round: number; tree: 'base' | 'head'; wall: number; cpu: number }[] = [];
const rev = withWorktree(base, own.includes('--keep'), (tree, rev) => {
  for (let r = 0; r < rounds; r++) {
    // Alternate which tree goes first, so that neither always runs on a warmer or cooler machine.
    const order: ('base' | 'head')[] = r % 2 === 0 ? ['base', 'head'] : ['head', 'base'];
    for (const t of order) {
      const m = once(t === 'base' ? tree : root);
      runs.push({ round: r + 1, tree: t, ...m });
      process.stderr.write(`round ${r + 1} ${t}: wall ${m.wall} cpu ${m.cpu} ms/plan\n`);
    }
  }
  return rev;
});

const mean = (t: 'base' | 'head', k: 'wall' | 'cpu'): number => {
  const xs = runs.filter((x) => x.tree === t).map((x) => x[k]);
  return xs.reduce((a, b) => a + b, 0) / xs.length;
};
console.log(`A/B: npx tsx ${command.join(' ')}; base ${rev}, head = this working tree, ${rounds} rounds`);
console.log('round  tree   wall ms/plan  cpu ms/plan');
for (const x of runs)
  console.log(
    `${String(x.round).padStart(5)}  ${x.tree.padEnd(4)}  ${x.wall.toFixed(1).padStart(12)}  ${x.cpu.toFixed(1).padStart(11)}`,
  );
for (const k of ['wall', 'cpu'] as const)
  console.log(
    `mean ${k}: base ${mean('base', k).toFixed(1)}, head ${mean('head', k).toFixed(1)}, head/base ${(mean('head', k) / mean('base', k)).toFixed(3)}`,
  );

/**
 * How much of mode (a)'s reshuffle is churn: tokens a rank sends away while it receives others'
 * in their place. Per FCP plan (mode (a), the even user layout reshuffled to the home layout at
 * every attention layer): the share of tokens whose home is not their user rank (`moved`), the
 * part of it that is churn (the sum over ranks of min(tokens exported, tokens imported): what a
 * rank could have kept of its own had it imported that much less), the ranks that both export and
 * import, the same two shares for moves across nodes only (over the NIC; `--cluster`'s node size), and the ranks that keep none of their own tokens (they have no local work until their
 * first `in` group completes, with their own exports in it), and the placement's modelled compute
 * imbalance (`meta.stats.computeImbalance`). `--refine-steps 0`: the home-first greedy alone,
 * without its refinement (placement/refine.ts), to see which of the two moves the tokens.
 *
 * `--by-length` also prints, per class of sequence length, the class's share of the batch's
 * tokens and of its attended pairs, and the share of its tokens that leave their user rank: the
 * few longest sequences carry a large part of the work on few user ranks, so most of their tokens
 * must move whatever the placement (`longtail` at 256 ranks, seed 1: the 512K sequence holds 6% of
 * the tokens and 39% of the pairs on 16 of 256 user ranks; 95% of its tokens move).
 *
 * Run: npx tsx bench/reshuffle-churn.ts [--batches longtail,magi,bimodal] [--worlds 32,256]
 *                                       [--seeds 1,2,3] [--cluster hopper-ib] [--refine-steps N]
 *                                       [--by-length]
 */
import { attendedPairs } from '../src/model/attention.ts';
import type { Layout } from '../src/plan/types.ts';
import { argValue, batchGrid, planForReplay } from './fcp-replay.ts';

const args = process.argv.slice(2);
const { batches, worlds, seeds, network } = batchGrid(args, '32,256', '1,2,3');
const clusterName = argValue(args, '--cluster', 'hopper-ib');
const refineSteps = argValue(args, '--refine-steps', '');
const byLength = args.includes('--by-length');
/** Length classes of `--by-length`: upper bounds (exclusive) and labels. */
const CLASSES: readonly [number, string][] = [
  [32768, '< 32K'],
  [131072, '32K-128K'],
  [524288, '128K-512K'],
  [Number.POSITIVE_INFINITY, '>= 512K'],
];
const classOf = (len: number): number => CLASSES.findIndex(([hi]) => len < hi);

/** Per rank, tokens exported (user rank here, home elsewhere) and imported (home here, user elsewhere). */
function flows(
  user: Layout,
  home: Layout,
  world: number,
  nodeSize: number,
): {
  exp: Float64Array;
  imp: Float64Array;
  expX: Float64Array;
  impX: Float64Array;
  total: number;
  movedOfSeq: Map<number, number>;
} {
  // User rows by sequence, to intersect each home row with them.
  const bySeq = new Map<number, number[]>();
  for (let i = 0; i < user.rank.length; i++) {
    const l = bySeq.get(user.seq[i]!);
    if (l === undefined) bySeq.set(user.seq[i]!, [i]);
    else l.push(i);
  }
  const exp = new Float64Array(world);
  const imp = new Float64Array(world);
  // The same across nodes only (over the NIC).
  const expX = new Float64Array(world);
  const impX = new Float64Array(world);
  let total = 0;
  const movedOfSeq = new Map<number, number>();
  for (let h = 0; h < home.rank.length; h++) {
    const a = home.start[h]!;
    const e = a + home.length[h]!;
    total += home.length[h]!;
    for (const u of bySeq.get(home.seq[h]!) ?? []) {
      const o = Math.min(e, user.start[u]! + user.length[u]!) - Math.max(a, user.start[u]!);
      if (o <= 0 || user.rank[u] === home.rank[h]) continue;
      exp[user.rank[u]!]! += o;
      imp[home.rank[h]!]! += o;
      movedOfSeq.set(home.seq[h]!, (movedOfSeq.get(home.seq[h]!) ?? 0) + o);
      if (Math.floor(user.rank[u]! / nodeSize) === Math.floor(home.rank[h]! / nodeSize)) continue;
      expX[user.rank[u]!]! += o;
      impX[home.rank[h]!]! += o;
    }
  }
  return { exp, imp, expX, impX, total, movedOfSeq };
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
console.log(
  `FCP mode (a): reshuffle churn (${clusterName}, ${network}${refineSteps !== '' ? `, --refine-steps ${refineSteps}` : ''}; tokens as a share of the batch)`,
);
console.log(
  'batch     world  seed   moved   churn  across nodes: moved   churn  export+import  keep none  imbalance',
);
for (const batch of batches)
  for (const world of worlds)
    for (const seed of seeds) {
      const { plan, cluster } = planForReplay({
        batch,
        world,
        seed,
        clusterName,
        network,
        loaderLayout: false,
        ...(refineSteps !== '' ? { options: { refineSteps: Number(refineSteps) } } : {}),
      });
      const stats = plan.meta?.stats as { computeImbalance?: number } | undefined;
      const { exp, imp, expX, impX, total, movedOfSeq } = flows(
        plan.userLayout,
        plan.homeLayout,
        world,
        cluster.gpusPerNode,
      );
      let moved = 0;
      let churn = 0;
      let movedX = 0;
      let churnX = 0;
      let both = 0;
      let none = 0;
      // A rank keeps none of its own tokens when it exports all it holds in the user layout.
      const own = new Float64Array(world);
      for (let i = 0; i < plan.userLayout.rank.length; i++)
        own[plan.userLayout.rank[i]!]! += plan.userLayout.length[i]!;
      for (let r = 0; r < world; r++) {
        moved += exp[r]!;
        churn += Math.min(exp[r]!, imp[r]!);
        movedX += expX[r]!;
        churnX += Math.min(expX[r]!, impX[r]!);
        if (exp[r]! > 0 && imp[r]! > 0) both++;
        if (own[r]! > 0 && exp[r]! >= own[r]!) none++;
      }
      console.log(
        `${batch.padEnd(9)} ${String(world).padStart(5)}  ${String(seed).padStart(4)}  ${pct(moved / total).padStart(6)}  ${pct(churn / total).padStart(6)}  ${pct(movedX / total).padStart(19)}  ${pct(churnX / total).padStart(6)}  ${String(both).padStart(13)}  ${String(none).padStart(9)}  ${pct(stats?.computeImbalance ?? Number.NaN).padStart(9)}`,
      );
      if (byLength) {
        // Per class: tokens, attended pairs (under the batch's mask), tokens moved.
        const tok = new Float64Array(CLASSES.length);
        const pairs = new Float64Array(CLASSES.length);
        const moved = new Float64Array(CLASSES.length);
        const causal = plan.mask === 'causal';
        plan.sequences.forEach((len, s) => {
          const c = classOf(len);
          tok[c]! += len;
          pairs[c]! += attendedPairs(causal, 0, len, 0, len);
          moved[c]! += movedOfSeq.get(s) ?? 0;
        });
        const allPairs = pairs.reduce((a, b) => a + b, 0);
        CLASSES.forEach(([, label], c) => {
          if (tok[c] === 0) return;
          console.log(
            `    ${label.padEnd(10)} tokens ${pct(tok[c]! / total).padStart(6)}  pairs ${pct(pairs[c]! / allPairs).padStart(6)}  moved ${pct(moved[c]! / tok[c]!).padStart(6)} of its tokens`,
          );
        });
      }
    }

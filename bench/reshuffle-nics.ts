/**
 * How unevenly mode (a)'s reshuffle loads the NICs: for FCP plans (direct routing, so every `in`
 * goes straight from the user rank to the home), the cross-node `in` tokens each rank sends and
 * receives, as the busiest rank over the mean. The measurement behind the two-hop reshuffle
 * (src/planners/fcp/transfers/relays.ts).
 *
 * Run: npx tsx bench/reshuffle-nics.ts [--worlds 16,32] [--batches longtail,bimodal,magi] [--seeds 1,2,3]
 */
import { Kind } from '../src/plan/types.ts';
import { argValue, planForReplay } from './fcp-replay.ts';

const args = process.argv.slice(2);
const list = (k: string, d: string): string[] => argValue(args, k, d).split(',');
const ratio = (a: Float64Array): number => {
  const mean = a.reduce((x, y) => x + y, 0) / a.length;
  return mean > 0 ? Math.max(...a) / mean : 0;
};
console.log('batch     GPUs  seed  cross-node in tokens, busiest / mean: sent  received');
for (const batch of list('--batches', 'longtail,bimodal,magi'))
  for (const world of list('--worlds', '16,32').map(Number))
    for (const seed of list('--seeds', '1,2,3').map(Number)) {
      const { plan } = planForReplay({
        batch,
        world,
        seed,
        clusterName: 'hopper-ib',
        network: 'fluid',
        loaderLayout: false,
      });
      const nodeSize = 8;
      const t = plan.forward.transfers;
      const sent = new Float64Array(world);
      const recv = new Float64Array(world);
      for (let i = 0; i < t.src.length; i++) {
        const s = t.src[i]!;
        const d = t.dst[i]!;
        if (t.kind[i] !== Kind.in || Math.floor(s / nodeSize) === Math.floor(d / nodeSize)) continue;
        sent[s]! += t.length[i]!;
        recv[d]! += t.length[i]!;
      }
      console.log(
        `${batch.padEnd(9)} ${String(world).padStart(4)}  ${String(seed).padStart(4)}  ${ratio(sent).toFixed(2).padStart(44)}  ${ratio(recv).toFixed(2).padStart(8)}`,
      );
    }

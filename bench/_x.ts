import { planForReplay } from './fcp-replay.ts';

const world = Number(process.argv[2] ?? 16);
const batch = process.argv[3] ?? 'longtail';
for (const seed of [1, 2, 3]) {
  const r = planForReplay({
    batch,
    world,
    seed,
    clusterName: 'hopper-ib',
    network: 'fluid',
    loaderLayout: false,
  });
  const t = r.plan.forward.transfers;
  const sent = new Float64Array(world),
    recv = new Float64Array(world);
  for (let i = 0; i < t.src.length; i++) {
    if (t.kind[i] !== 0) continue;
    const s = t.src[i]!,
      d = t.dst[i]!;
    if (s >> 3 === d >> 3) continue;
    sent[s]! += t.length[i]!;
    recv[d]! += t.length[i]!;
  }
  const f = (a: Float64Array) => {
    const m = a.reduce((x, y) => x + y, 0) / world;
    return `max ${Math.max(...a)} mean ${m.toFixed(0)} (max/mean ${(Math.max(...a) / m).toFixed(2)})`;
  };
  console.log(`${batch} ${world} seed ${seed}: cross-node in tokens sent ${f(sent)} | recv ${f(recv)}`);
}

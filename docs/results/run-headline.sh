#!/bin/bash
# The headline comparison (docs/results.md "Headline", README "Key results"), all simulated:
# every baseline at its best (`--baselines best`: each baseline's own documented sweep) and FCP in
# mode (a) (reshuffle from the even user layout) and mode (b) (loader layout, equal tokens per
# rank), on longtail / magi / bimodal batches, hopper-ib under the fluid and the contention
# network model, and longtail on ratio-5920. Tables: npx tsx scripts/headline-tables.ts
# Usage: bash docs/results/run-headline.sh   (about 15 min on an idle 2-core machine)
set -u
cd "$(dirname "$0")/../.."
R=docs/results
run() { local name=$1; shift; echo "=== $name: fcp compare $*"; /usr/bin/time -f "$name wall %e s" npx tsx src/cli.ts compare "$@" --out $R/$name 2>>${PROGRESS:-/dev/null}; }
B=ring,bytescale,wlb,magi
W=16,64,256
for batch in longtail magi bimodal; do
  for net in fluid contention; do
    run best-$batch-$net --strategies $B --baselines best --network $net --world $W --batch $batch --batches 3
    run fcp-$batch-$net-a --strategies fcp --network $net --world $W --batch $batch --batches 3
    run fcp-$batch-$net-b --strategies fcp --loader-layout --network $net --world $W --batch $batch --batches 3
  done
done
run best-longtail-ratio5920 --strategies $B --baselines best --cluster ratio-5920 --world $W --batch longtail --batches 3
run fcp-longtail-ratio5920-a --strategies fcp --cluster ratio-5920 --world $W --batch longtail --batches 3
run fcp-longtail-ratio5920-b --strategies fcp --loader-layout --cluster ratio-5920 --world $W --batch longtail --batches 3
echo ALL DONE

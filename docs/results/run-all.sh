#!/bin/bash
# Regenerates every folder under docs/results/ (see docs/results.md). Usage: bash docs/results/run-all.sh
# Each `run NAME ARGS` is `fcp compare ARGS --out docs/results/NAME` (fcp = npx tsx src/cli.ts).
set -u
cd "$(dirname "$0")/../.."
R=docs/results
run() { local name=$1; shift; echo "=== $name: fcp compare $*" ; /usr/bin/time -f "$name wall %e s cpu %U s" npx tsx src/cli.ts compare "$@" --out $R/$name 2>>${PROGRESS:-/dev/null}; }
ALL=fcp,ring,bytescale,wlb,magi
run weak-longtail --strategies $ALL --world 16,32,64,128,256 --batch longtail --batches 5
run weak-longtail-fcp-loader --strategies fcp --loader-layout --world 16,32,64,128,256 --batch longtail --batches 5
run weak-longtail-varlen --strategies $ALL --world 16,32,64,128,256 --batch longtail --batches 5 --kernel varlen
run weak-magi --strategies $ALL --world 16,32,64,128,256 --batch magi --batches 5
run weak-longtail-ratio5920 --strategies $ALL --world 16,32,64,128,256 --batch longtail --batches 5 --cluster ratio-5920
for c in hopper-ib ratio-5920; do
run ablation-$c-1-base --strategies fcp --world 128 --batches 3 --cluster $c --no-pipeline --rounds naive --coalesce 1 --push-coalesce 1 --no-reshuffle-overlap
run ablation-$c-2-pipeline --strategies fcp --world 128 --batches 3 --cluster $c --rounds naive --coalesce 1 --push-coalesce 1 --no-reshuffle-overlap
run ablation-$c-3-rounds --strategies fcp --world 128 --batches 3 --cluster $c --coalesce 1 --push-coalesce 1 --no-reshuffle-overlap
run ablation-$c-4-coalesce --strategies fcp --world 128 --batches 3 --cluster $c --no-reshuffle-overlap
run ablation-$c-5-reshuffle --strategies fcp --world 128 --batches 3 --cluster $c
done
for b in 1024 2048 4096 6144 8192; do
run blocks-$b --strategies fcp --world 128 --batches 3 --block-size $b
run blocks-fixed-$b --strategies fcp --world 128 --batches 3 --block-size $b --fixed-blocks
done
run workload-bimodal --strategies $ALL --world 16,64,256 --batch bimodal --batches 3
run workload-weak-longtail --strategies $ALL --world 16,64,256 --batch weak-longtail --batches 3
run torus --strategies $ALL --world 16,64,256 --batch longtail --batches 3 --cluster torus
run large-longtail --strategies fcp,bytescale,magi --world 512,1024,2048,4096 --batch longtail --batches 1
run large-longtail-ring --strategies ring,wlb --world 512,1024 --batch longtail --batches 1
run large-magi --strategies fcp,bytescale,magi --world 512,1024,2048,4096 --batch magi --batches 1
echo ALL DONE

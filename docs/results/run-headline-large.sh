#!/bin/bash
# The headline comparison at 1024 and 4096 ranks (issue 15's acceptance grid beyond
# docs/results/run-headline.sh), all simulated. Folders large-best-<batch>-<setting>,
# large-fcp-<batch>-<setting>-a|b; scripts/headline-tables.ts merges them with the 16-256 folders.
# Usage: PART=baselines|fcp|all W=1024[,4096] ONLY="longtail-fluid ..." bash docs/results/run-headline-large.sh
# Cost (measured 2026-12-01 on the shared 2-core machine under load, before the sweep's screening
# skipped the validator): one ring sweep at 1024 ranks, 1 batch, did not finish in 600 s (ring's
# p2p/a2a+p2p plans at 1024 cut every sequence into 2048 parts; a trial is ~1-2 min, half of it
# validation, now skipped while screening). The four baselines' sweep at 1024 is therefore tens of
# minutes per batch-setting pair, and 4096 (16x the ring plan rows) hours: run it on a bigger
# machine, one pair at a time (ONLY=), or at 1024 only (the default W).
# The sweep itself screens on the first batch and reruns only the winner and the default on all
# batches (src/experiments/tune.ts), so --batches 3 costs trials + 4 simulations.
set -u
cd "$(dirname "$0")/../.."
R=docs/results
PART=${PART:-all}
W=${W:-1024}
run() { local name=$1; shift; echo "=== $name: fcp compare $*"; /usr/bin/time -f "$name wall %e s" npx tsx src/cli.ts compare "$@" --out $R/$name 2>>${PROGRESS:-/dev/null}; }
B=ring,bytescale,wlb,magi
for batch in longtail magi bimodal; do
  for setting in fluid contention ratio5920 ratio5920-contention; do
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $batch-$setting "* ]]; then continue; fi
    case $setting in
      fluid) opts=(--network fluid) ;;
      contention) opts=(--network contention) ;;
      ratio5920) opts=(--cluster ratio-5920 --network fluid) ;;
      ratio5920-contention) opts=(--cluster ratio-5920 --network contention) ;;
    esac
    if [ "$PART" != fcp ]; then
      run large-best-$batch-$setting --strategies $B --baselines best "${opts[@]}" --world $W --batch $batch --batches 3
    fi
    if [ "$PART" != baselines ]; then
      run large-fcp-$batch-$setting-a --strategies fcp "${opts[@]}" --world $W --batch $batch --batches 3
      run large-fcp-$batch-$setting-b --strategies fcp --loader-layout "${opts[@]}" --world $W --batch $batch --batches 3
    fi
  done
done
echo ALL DONE

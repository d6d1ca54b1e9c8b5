#!/bin/bash
# The headline comparison (docs/results.md "Headline", README "Key results"), all simulated:
# every baseline at its best (`--baselines best`: each baseline's own documented sweep) and FCP in
# mode (a) (reshuffle from the even user layout) and mode (b) (loader layout, equal tokens per
# rank), on longtail / magi / bimodal batches, under the fluid and the contention network model,
# on hopper-ib and on ratio-5920: the acceptance grid of issue 15 at 16-256 ranks (1024 and 4096:
# docs/results/run-headline-large.sh). Tables: npx tsx scripts/headline-tables.ts
# Usage: PART=baselines|fcp|all bash docs/results/run-headline.sh   (default all)
#   The baseline part does not depend on the FCP planner: rerun only PART=fcp after planner changes.
#   ONLY="longtail-fluid ..." restricts it to those batch-setting pairs (setting: fluid, contention,
#   ratio5920 = ratio-5920 fluid, ratio5920-contention). MODES="b" reruns only FCP's mode (b) folders
#   (default "a b").
#   ROUTING=pxn simulates every message across nodes by NCCL's default point-to-point routing
#   (`--routing pxn`: the NIC on the receiver's rail, docs/network.md) and suffixes every folder
#   with -pxn; scripts/headline-tables.ts takes, per strategy and world, the routing with the
#   shorter forward + backward time (each strategy runs with the NCCL setting that suits it).
# Folders: best-<batch>-<setting>, fcp-<batch>-<setting>-a, fcp-<batch>-<setting>-b, each name
#   prefixed by PREFIX (docs/results/run-headline-large.sh: PREFIX=large- W=1024, large4096- W=4096).
set -u
cd "$(dirname "$0")/../.."
R=docs/results
PART=${PART:-all}
P=${PREFIX:-}
# The wall time goes to stdout (the log), the progress lines to $PROGRESS.
SUFFIX=
ROUTE=()
if [ "${ROUTING:-direct}" = pxn ]; then SUFFIX=-pxn; ROUTE=(--routing pxn); fi
run() {
  local name=$1$SUFFIX t0=$SECONDS; shift; echo "=== $name: fcp compare $* ${ROUTE[*]}"
  npx tsx src/cli.ts compare "$@" "${ROUTE[@]}" --out $R/$name 2>>${PROGRESS:-/dev/null}
  echo "=== $name wall $((SECONDS - t0)) s"
}
# Baselines: all four; run-headline-large.sh leaves out ring at >= 1024 ranks (docs/baselines.md
# "At 1024 ranks and more").
B=${B:-ring,bytescale,wlb,magi}
W=${W:-16,32,64,128,256}
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
      # SWEEP_FROM=large- (run-headline-large.sh at 4096 ranks): each baseline's sweep screens only
      # its default and its own winner in large-best-<batch>-<setting> (1024 ranks, same batch and
      # setting; docs/baselines.md "At 1024 ranks and more").
      # The folder's own earlier winners join them (`--sweep-from A,B`), so that a narrowed sweep
      # never drops a configuration that won there before: with a new direct-routing winner, the PXN
      # run would otherwise no longer screen the configuration its last run kept (session 41).
      sweep=()
      if [ -n "${SWEEP_FROM:-}" ]; then
        from=$R/${SWEEP_FROM}best-$batch-$setting/compare.json
        prev=$R/${P}best-$batch-$setting$SUFFIX/compare.json
        if [ -f "$prev" ] && [ "$prev" != "$from" ]; then from=$from,$prev; fi
        sweep=(--sweep-from "$from")
      fi
      run ${P}best-$batch-$setting --strategies $B --baselines best "${sweep[@]}" "${opts[@]}" --world $W --batch $batch --batches 3
    fi
    if [ "$PART" != baselines ]; then
      if [[ " ${MODES:-a b} " == *" a "* ]]; then
        run ${P}fcp-$batch-$setting-a --strategies fcp "${opts[@]}" --world $W --batch $batch --batches 3
      fi
      if [[ " ${MODES:-a b} " == *" b "* ]]; then
        run ${P}fcp-$batch-$setting-b --strategies fcp --loader-layout "${opts[@]}" --world $W --batch $batch --batches 3
      fi
    fi
  done
done
echo ALL DONE

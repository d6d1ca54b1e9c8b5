#!/bin/bash
# The headline comparison at 1024 and 4096 ranks (issue 15's acceptance grid beyond
# docs/results/run-headline.sh), all simulated. Folders large-best-<batch>-<setting>,
# large-fcp-<batch>-<setting>-a|b; scripts/headline-tables.ts merges them with the 16-256 folders.
# Usage: PART=baselines|fcp|all W=1024[,4096] ONLY="longtail-fluid ..." bash docs/results/run-headline-large.sh
# Cost (measured 2026-12-02 on the shared 2-core machine, load average 8-15): bytescale + magi
# at 1024 ranks, 3 batches, one batch-setting pair: 284 s (longtail fluid; the log prints each
# folder's wall time). With wlb (B=bytescale,wlb,magi) the same pair spent more than 18 min in
# wlb alone before it was stopped; one ring p2p plan at 1024 took 17-104 s to plan and 100-150 s
# to validate and simulate. 4096 ranks: see below.
# Since session 40 the sweep runs every trial on every batch and passes over its stages until
# nothing changes (src/experiments/tune.ts), about 2.5x the cost measured above, which screened on
# the first batch. Session 41 (2026-12-07, two folders at once): longtail fluid 2514 s and
# contention 2806 s (with session 41's faster rate solver), ratio-5920 3652 s (with the one
# before) for the pair under direct routing; 315, 539 and 329 s under PXN narrowed by
# SWEEP_FROM=large-. Session 42 (2026-12-07, two or three runs at once): the `magi` and `bimodal`
# pairs at 1024 took 78-501 s a folder, `longtail` ratio-5920 contention 4827 s direct and 985 s
# PXN; only `longtail` ratio-5920 PXN keeps the older sweep. At 4096 (PART=all, the baselines'
# full sweep then FCP's folders, 27-82 s each): `magi` fluid 755 + 136 s and contention 780 + 153 s
# for the baselines (direct + PXN narrowed), `bimodal` fluid 1123 + 201 s (docs/results.md,
# "Session 42"). Session 43 (two or three runs at once): `bimodal` contention 1549 + 286 s,
# `magi` ratio-5920 contention 3635 + 1032 s, ratio-5920 fluid 3544 + 621 s,
# `bimodal` ratio-5920 fluid 2477 + 197 s; FCP's folders 27-175 s.
# Ring and wlb are left out of the baselines here (B): at 256 ranks ring's tuned MFU is 26-124x
# (forward) and 42-187x (backward) below the strongest other baseline's on all 12 batch-settings,
# and falls with every doubling from 16 ranks; wlb (the faster of a TE p2p ring and bytescale per
# batch) gave exactly bytescale's MFU in all 36 cells at 64-256 ranks, and its ring candidate is
# the plan that does not fit this machine at 1024 (2048-part ring plans). docs/baselines.md
# "At 1024 ranks and more" states the rule. B=bytescale,wlb,magi runs wlb anyway.
set -u
# The same grid as run-headline.sh (one loop), at other worlds and into large-* folders.
# 4096 ranks go to their own folders (large4096-*) so that a 4096 run does not overwrite the
# 1024 results in large-*: PREFIX defaults to large- for W=1024 and large4096- for W=4096.
# Cost at 4096 (measured 2026-12-02, shared 2-core machine, load 7-12): longtail fluid, bytescale +
# magi, full sweep, 3 batches: 4397 s (bytescale about 100 s; one magi simulation 60-150 s at chunk
# 4096, 490-1460 s at chunk 2048, the chunk magi's sweep chose there); FCP mode (a) 121 s,
# mode (b) 535 s. SWEEP_FROM=large- restricts each baseline's sweep to its default and its own
# 1024-rank winner (`fcp compare --sweep-from`; the tables mark such rows 4096*), but it is not the
# default: on longtail fluid the full sweep at 4096 chose magi chunk 2048 / overlap 4, not the 1024
# winner (chunk 4096 / overlap 3), so the restriction would understate magi (docs/baselines.md).
# Under PXN (ROUTING=pxn SWEEP_FROM=large4096-: each baseline's default and its direct-routing
# winner at 4096, a sweep that keeps magi's chunk 2048), bytescale + magi took 5666 s (2026-12-05).
W=${W:-1024}
if [ "$W" = 4096 ]; then P0=large4096-; else P0=large-; fi
SWEEP_FROM=${SWEEP_FROM:-} PREFIX=${PREFIX:-$P0} W=$W B=${B:-bytescale,magi} exec bash "$(dirname "$0")/run-headline.sh"

#!/usr/bin/env bash
# Plans of examples/train.py's GPU runs (h200.py section `train`), written here: the GPU machine has
# no Node. One folder per CP world size, plan-STEP-REPLICA.json each; h200.py runs
#   python3 examples/train.py $TRAIN_ARGS --world W --plans scripts/gpu/plans/train-wW \
#       --device cuda --dtype bfloat16 --check
# TRAIN_ARGS must match the arguments below that shape the plans (batch, tokens per rank, heads,
# head dim, block size, steps, seed); h200.py reads them from scripts/gpu/plans/train-args.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
ARGS="--steps 3 --layers 3 --batch longtail --tokens-per-rank 2048 --block-size 256 --vocab 512 --dim 512 --heads 8 --kv-heads 2 --head-dim 64 --ffn 1024 --seed 1"
echo "$ARGS" > scripts/gpu/plans/train-args.txt
for W in 1 2 4; do
  rm -rf "scripts/gpu/plans/train-w$W"
  /usr/bin/python3 examples/train.py $ARGS --world "$W" --write-plans "scripts/gpu/plans/train-w$W"
done

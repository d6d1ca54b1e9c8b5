#!/bin/bash
# Run 12 (issue 17): side-stream sums. Check first, then the replay shares (interleaved rounds),
# then (WORLD1=1) the world-1 comparison of run 11.
set -o pipefail
export PYTHONUNBUFFERED=1
mkdir -p $OUT
nvidia-smi --query-gpu=name,memory.used,clocks.sm,clocks.max.sm --format=csv | tee $OUT/run12-gpu.txt
python3 scripts/gpu/side-check.py --plans ${CHECK_PLANS:-replay-fcp-64,replay-fcp-128} --modes fused,pool --out $OUT/h200-run12-sidecheck.json 2>&1 | tee $OUT/run12-log.txt
python3 scripts/gpu/h200.py --out $OUT/h200 --budget ${BUDGET:-330} --sections ${SECTIONS:-env,multirank,replay} --multirank-backends '' --profile \
  --replay-plans replay-fcp-128,replay-fcp-64,replay-fcp-256 --replay-modes ${MODES:-fused,noside} --replay-reps ${REPS:-15} \
  --host-profile replay-fcp-128 --host-profile-mode ${HPMODE:-fused} 2>&1 | tee -a $OUT/run12-log.txt
if [ "${WORLD1:-0}" = 1 ]; then
  python3 scripts/gpu/world1.py --out $OUT/w1 --rounds 7 --reps 5 2>&1 | tail -40 | tee -a $OUT/run12-log.txt
fi
ls -la $OUT $OUT/h200 $OUT/w1 2>/dev/null

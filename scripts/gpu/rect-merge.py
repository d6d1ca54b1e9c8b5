#!/usr/bin/env python3
"""Does one long rectangle beat the same work as several 4096-key squares on cuDNN? (one GPU)

FCP cuts a query block's keys into tiles of `--tile` (4096) tokens and the runtime launches each
tile as its own dense piece (python/fcp_torch/kernels.py, plan_launches: identical pieces batched,
never merged across tasks); MagiAttention's pieces are whole segments. This times equal work both
ways with fcp_torch's own cuDNN launch: n query blocks of lq rows, each against lk keys, as
n*(lk/t) pieces of lq x t or n pieces of lq x lk, forward and backward, median of `--reps` after a
warm-up, rounds interleaved. MFU as docs/design.md counts it (peak 989 TFLOP/s, bwd 2.5x fwd FLOPs).

Run on the GPU machine from the repository root: python3 scripts/gpu/rect-merge.py --out "$OUT"
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from fcp_torch.kernels import Kernels, Launch  # noqa: E402
from fcp_torch.timing import time_ms  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/rect-merge")
ap.add_argument("--reps", type=int, default=10)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--calib", action="store_true",
                help="also re-time the calibration's dense rows (data/calibration/h200-measured.json: cuDNN "
                     "squares 512-32K causal and full, its full rectangles) in the same interleaved rounds, "
                     "and squares of 1536 and 3072, which it interpolates")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
PEAK = 989.0
H, HK, D = 64, 8, 128
DEV = torch.device("cuda")
DT = torch.bfloat16
K = Kernels(DEV, DT, 1.0 / math.sqrt(D))


def launch(lq: int, lk: int, n: int, causal: bool = False) -> Launch:
    return Launch("cudnn", causal, torch.arange(1), torch.arange(1), np.full(n, lq), np.full(n, lk), batch=n)


def timed(lq: int, lk: int, n: int, causal: bool = False) -> dict:
    L = launch(lq, lk, n, causal)
    q = torch.randn(n * lq, H, D, device=DEV, dtype=DT)
    k = torch.randn(n * lk, HK, D, device=DEV, dtype=DT)
    v = torch.randn(n * lk, HK, D, device=DEV, dtype=DT)
    fwd = float(np.median(time_ms(lambda: K.forward(L, q, k, v), DEV, reps=args.reps, warmup=2)))
    o, lse = K.forward(L, q, k, v)
    o = o.to(DT).contiguous()
    do = torch.randn_like(o)
    bwd = float(np.median(time_ms(lambda: K.backward(L, q, k, v, o, do, lse), DEV, reps=args.reps, warmup=2)))
    # Attended pairs as the calibration counts them (a causal square: L(L+1)/2).
    pairs = n * (lq * (lk - lq) + lq * (lq + 1) // 2 if causal else lq * lk)
    return {
        "fwd_ms": fwd,
        "bwd_ms": bwd,
        "fwd_mfu": 4.0 * pairs * H * D / (PEAK * 1e9 * fwd),
        "bwd_mfu": 2.5 * 4.0 * pairs * H * D / (PEAK * 1e9 * bwd),
    }


# (name, query rows per piece, keys per piece, pieces): each group of rows is equal work.
CASES = [
    ("4 q-blocks x 16K keys: 16 squares 4096", 4096, 4096, 16),
    ("4 q-blocks x 16K keys: 8 rects 4096x8192", 4096, 8192, 8),
    ("4 q-blocks x 16K keys: 4 rects 4096x16384", 4096, 16384, 4),
    ("8 q-blocks x 16K keys: 32 squares 4096", 4096, 4096, 32),
    ("8 q-blocks x 16K keys: 8 rects 4096x16384", 4096, 16384, 8),
    ("1 q-block x 16K keys: 4 squares 4096", 4096, 4096, 4),
    ("1 q-block x 16K keys: 1 rect 4096x16384", 4096, 16384, 1),
    ("2 q-blocks x 8K keys: 4 squares 4096", 4096, 4096, 4),
    ("2 q-blocks x 8K keys: 2 rects 4096x8192", 4096, 8192, 2),
    ("8 q-blocks x 8K keys (2048 tiles): 32 squares 2048", 2048, 2048, 32),
    ("8 q-blocks x 8K keys (2048 tiles): 8 rects 2048x8192", 2048, 8192, 8),
    ("8 q-blocks x 8K keys (2048 tiles): 16 rects 2048x4096", 2048, 4096, 16),
    ("16 q-blocks x 16K keys (2048 tiles): 128 squares 2048", 2048, 2048, 128),
    ("16 q-blocks x 16K keys (2048 tiles): 16 rects 2048x16384", 2048, 16384, 16),
]
# The calibration's dense rows (scripts/gpu/h200.py, calibrate: n = 32768 / lq pieces per launch).
CALIB = []
if args.calib:
    for causal in (True, False):
        # 1536 and 3072: sides the calibration interpolates (blocks of three quarters of a power of two).
        for L in (512, 1024, 1536, 2048, 3072, 4096, 8192, 16384, 32768):
            CALIB.append((f"calib {'causal' if causal else 'full'} square {L} x{32768 // L}", L, L, 32768 // L, causal))
    for lq in (512, 1024, 2048, 4096, 8192):
        for mult in (2, 4):
            CALIB.append((f"calib full rect {lq}x{lq * mult} x{32768 // lq}", lq, lq * mult, 32768 // lq, False))
CASES = [c + (False,) for c in CASES] + CALIB
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "rows": []}
acc = {c[0]: [] for c in CASES}
for r in range(args.rounds):
    order = CASES if r % 2 == 0 else CASES[::-1]
    for name, lq, lk, n, causal in order:
        acc[name].append(timed(lq, lk, n, causal))
for name, lq, lk, n, causal in CASES:
    runs = acc[name]
    row = {"case": name, "lq": lq, "lk": lk, "pieces": n, "causal": causal}
    for key in ("fwd_ms", "bwd_ms", "fwd_mfu", "bwd_mfu"):
        row[key] = float(np.median([x[key] for x in runs]))
        row[key + "_spread"] = float(max(x[key] for x in runs) - min(x[key] for x in runs))
    res["rows"].append(row)
    print(f"{name:55s} fwd {row['fwd_ms']:.3f} ms MFU {row['fwd_mfu']:.3f} | bwd {row['bwd_ms']:.3f} ms MFU {row['bwd_mfu']:.3f}", flush=True)
with open(os.path.join(args.out, "rect-merge.json"), "w") as f:
    json.dump(res, f, indent=1)

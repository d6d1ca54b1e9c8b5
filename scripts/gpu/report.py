#!/usr/bin/env python3
"""Markdown tables of the GPU results (docs/results-gpu/*.json) for docs/results.md:
    python3 scripts/gpu/report.py > /tmp/gpu-tables.md
A later run supersedes an earlier one per (plan, rank choice, kernel) in the replay table (run 3:
FCP planner with time-balanced placement and block-grid tasks; ring and magi plans are unchanged)."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.path.join(ROOT, "docs", "results-gpu")
r1 = json.load(open(os.path.join(D, "h200-run1.json")))
r2 = json.load(open(os.path.join(D, "h200-run2.json")))
r3 = json.load(open(os.path.join(D, "h200-run3.json")))
f3 = lambda x: f"{x:.3f}"  # noqa: E731

print("### Kernels (run 1): dense cuDNN, batches of equal squares, 32K query tokens per launch\n")
print("| L | causal fwd ms | fwd MFU | bwd ms | bwd MFU | full fwd ms | fwd MFU | bwd ms | bwd MFU |")
print("|---|---|---|---|---|---|---|---|---|")
dense = [x for x in r1["calibration_dense"] if x["kind"] == "batch"]
for L in sorted({x["lq"] for x in dense}):
    c = next(x for x in dense if x["lq"] == L and x["causal"])
    f = next(x for x in dense if x["lq"] == L and not x["causal"])
    print(f"| {L} | {c['fwd_ms']:.3f} | {f3(c['fwd_mfu'])} | {c['bwd_ms']:.3f} | {f3(c['bwd_mfu'])} | {f['fwd_ms']:.3f} | {f3(f['fwd_mfu'])} | {f['bwd_ms']:.3f} | {f3(f['bwd_mfu'])} |")
print(f"\nVarlen FlashAttention-2 (excerpt of the {len(r1['calibration_grid'])}-row grid in data/calibration/h200-measured.json; the 64x64 row is the launch floor):\n")
print("| lq | lk | causal | segments | fwd ms | fwd MFU | bwd ms | bwd MFU |")
print("|---|---|---|---|---|---|---|---|")
for x in r1["calibration_grid"]:
    if (x["lq"], x["lk"]) in {(128, 128), (256, 256), (512, 512), (1024, 1024), (4096, 4096), (512, 8192), (4096, 65536), (8192, 8192), (64, 64)}:
        print(f"| {x['lq']} | {x['lk']} | {x['causal']} | {x['segments']} | {x['fwd_ms']:.3f} | {f3(x['fwd_mfu'])} | {x['bwd_ms']:.3f} | {f3(x['bwd_mfu'])} |")
print("\nDense cuDNN full rectangles and varlen mixes (causal, one launch of ~32K tokens):\n")
print("| shape | fwd MFU | bwd MFU |")
print("|---|---|---|")
for x in r1["calibration_dense"]:
    if x["kind"] == "rect":
        print(f"| cuDNN {x['pairs']} x {x['lq']}x{x['lk']} | {f3(x['fwd_mfu'])} | {f3(x['bwd_mfu'])} |")
for x in r1["calibration_mixes"]:
    print(f"| varlen mix {x['mix']}: {x['segments']} sequences | {f3(x['fwd_mfu'])} | {f3(x['bwd_mfu'])} |")

print("\n### Numerics (bf16, against torch SDPA on the unsharded sequences; run 2)\n")
print("| run | path | o | dq | dk | dv | pass (< 1e-2) |")
print("|---|---|---|---|---|---|---|")
for k, v in r2["numerics_1rank"]["runs"].items():
    e = v["vs_sdpa_bf16"]
    print(f"| 1 rank, one process | kernel {k} | {e['o']:.1e} | {e['dq']:.1e} | {e['dk']:.1e} | {e['dv']:.1e} | {v['pass']} |")
for s, v in r2["numerics_4rank_one_gpu"].items():
    b = v.get("backend")
    if b:
        e = v["attempts"][b]["vs_sdpa_bf16"]
        print(f"| 4 ranks {s}, 4 processes | {b}, kernel auto | {e['o']:.1e} | {e['dq']:.1e} | {e['dk']:.1e} | {e['dv']:.1e} | {v['pass']} |")
    t = v.get("threads_streams", {})
    if "vs_sdpa_bf16" in t:
        e = t["vs_sdpa_bf16"]
        print(f"| 4 ranks {s}, 4 threads | CUDA comm streams, kernel auto | {e['o']:.1e} | {e['dq']:.1e} | {e['dk']:.1e} | {e['dv']:.1e} | {t['pass']} |")
e = r2["numerics_1rank"]["sdpa_bf16_vs_fp32"]
print(f"| (SDPA bf16 itself vs float32) | | {e['o']:.1e} | {e['dq']:.1e} | {e['dk']:.1e} | {e['dv']:.1e} | |")

print("\n### Rank replay (longtail, 32K tokens per rank; heaviest and median rank by attended pairs)\n")
print("| plan | rank | kernel | fwd ms | fwd MFU | bwd ms | bwd MFU | kernel-only fwd/bwd MFU | run |")
print("|---|---|---|---|---|---|---|---|---|")
names = [f"replay-{s}-{w}" for w in (64, 128, 256) for s in ("fcp", "magi", "ring")]
for n in names:
    merged = {}
    for src, r in (("1", r1), ("2", r2), ("3", r3)):
        res = r.get("replay", {}).get(n)
        for x in res.get("runs", []) if isinstance(res, dict) else []:
            if "forward_ms" in x:
                merged[(x["which"], x["kernel"])] = (src, x)
    for src, x in merged.values():
        ko = x.get("kernel_only_ms") or {}
        kf = sum(v for k, v in ko.items() if k.startswith("forward"))
        kb = sum(v for k, v in ko.items() if k.startswith("backward"))
        kmf = x["forward_mfu"] * x["forward_ms"] / kf if kf else None
        kmb = x["backward_mfu"] * x["backward_ms"] / kb if kb else None
        kk = f"{kmf:.3f} / {kmb:.3f}" if kmf else "-"
        print(f"| {n[7:]} | {x['which']} r{x['rank']} | {x['kernel']} | {x['forward_ms']:.1f} | {f3(x['forward_mfu'])} | {x['backward_ms']:.1f} | {f3(x['backward_mfu'])} | {kk} | {src} |")

sc = json.load(open(os.path.join(D, "sim-check.json")))
print("\n### Simulator check (predicted compute of the same rank, measured calibration, no SMs reserved for communication, no padding)\n")
print("| plan | rank | policy | fwd measured ms (kernels only) | fwd predicted ms | error vs op (vs kernels) | bwd measured ms (kernels only) | bwd predicted ms | error vs op (vs kernels) | run |")
print("|---|---|---|---|---|---|---|---|---|---|")
kpct = lambda e: f" ({100 * e:+.0f}%)" if e is not None else ""  # noqa: E731
kms = lambda m: f" ({m:.1f})" if m else ""  # noqa: E731
for x in sc["rows"]:
    if x["calibration"] != "measured":
        continue
    print(f"| {x['plan'][7:]} | {x['which']} | {x['policy']} | {x['forwardMeasuredMs']:.1f}{kms(x.get('forwardKernelMs'))} | {x['forwardSimMs']:.1f} | {100 * x['forwardError']:+.0f}%{kpct(x.get('forwardKernelError'))} | {x['backwardMeasuredMs']:.1f}{kms(x.get('backwardKernelMs'))} | {x['backwardSimMs']:.1f} | {100 * x['backwardError']:+.0f}%{kpct(x.get('backwardKernelError'))} | {x.get('run', '')} |")

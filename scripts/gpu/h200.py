#!/usr/bin/env python3
"""Everything FCP measures on one GPU, in one call (see docs/gpu.md):

  1. env        torch/CUDA/cuDNN versions, GPU, bf16 matmul ceiling, copy bandwidth, kernel probe
  2. numerics   bf16 outputs and gradients against torch SDPA on the unsharded sequences:
                a 1-rank plan in this process (kernels auto, flash, cudnn; through autograd), and
                4-rank plans of fcp, ring, magi as 4 processes on the one GPU (NCCL if it accepts
                several ranks on one device, else gloo over host copies; the result says which)
  3. calibrate  dense cuDNN squares (causal, full) 128..32K and rectangles, varlen FlashAttention
                grid lq 128..8K x lk lq..16lq (causal bottom-right, full), launch floor, varlen mixes;
                forward and backward; written in the formats of data/calibration/*.json
  4. replay     64/128/256-rank plans of fcp, ring, magi on longtail: the heaviest and a median
                rank's compute ops with all data local, per kernel policy, time and MFU
  5. multigpu   (issue 7; only where several GPUs are visible) fcp, ring, magi on longtail and magi
                batches at 32K tokens per GPU, one process per GPU with NCCL: outputs and gradients
                against torch SDPA, MFU (slowest rank, median iteration), NVLink copy bandwidth

Run on the GPU machine from the repository root:
    python3 scripts/gpu/h200.py --out "$OUT" --budget 540
Plans come from scripts/gpu/plans/ (written here by `npx tsx scripts/gpu/make-plans.ts`;
`python3 scripts/gpu/h200.py --manifest` then picks the replay ranks on the CPU).
`--smoke` runs every section on the CPU with tiny sizes (a check of the script itself).
Results: OUT/results.json (everything), OUT/h200-measured.json (calibration), OUT/summary.txt.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
PLANS = os.path.join(ROOT, "scripts", "gpu", "plans")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from fcp_torch.kernels import Kernels, Launch, rel_err  # noqa: E402
from fcp_torch.plan import read_plan, rank_program  # noqa: E402

PEAK = 989.0  # TFLOP/s, H100/H200 SXM dense bf16 (datasheet), the MFU denominator of docs/design.md
H, HK, D = 64, 8, 128

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "tmp", "gpu-out"))
ap.add_argument("--budget", type=float, default=540.0, help="seconds; sections stop starting work past it")
ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes: check the script itself")
ap.add_argument("--manifest", action="store_true", help="pick replay ranks (CPU) into plans/manifest.json and exit")
ap.add_argument("--calib-reps", type=int, default=3,
                help="calibrate: timed calls per row (median; 3 made data/calibration/h200-measured.json; two such "
                     "runs back to back on one H100 differed by up to 7%% on single rows, runs 17a/17b)")
ap.add_argument("--sections", default="env,fused,numerics,multirank,world1,hf,hftest,train,memory,calibrate,replay,multigpu")
ap.add_argument("--fuzz-dir", default=os.path.join(ROOT, "scripts", "gpu", "plans", "fuzz"),
                help="fuzz: folder of random small plans; each runs in one process per rank on this GPU (gloo-staged) "
                     "against SDPA. The shipped 26: npx tsx bench/fuzz-plans.ts --numerics --first 200 --write DIR "
                     "--strategy S --cases N, N = 14 for fcp, 4 for ring, magi and bytescale")
ap.add_argument("--train-worlds", default="1,2,4", help="train: CP world sizes of examples/train.py (plans from scripts/gpu/train-plans.sh)")
ap.add_argument("--memory-plans", default="num-fcp-1,w1-fcp-longtail-64k,num-fcp-4", help="memory: plans whose ranks are measured against fcp_torch.memory")
ap.add_argument("--replay-plans", default="", help="comma-separated replay plan names (default: all nine)")
ap.add_argument("--multirank-backends", default="nccl,gloo-staged", help="process backends to try, in order ('' for none)")
ap.add_argument("--profile", action="store_true", help="replay: also time each kernel call alone")
ap.add_argument("--replay-modes", default="legacy,fused,pool", help="replay: legacy = the original torch merges; fused = fused.py merges and gathers; pool = fused + K/V rows reused by liveness; cap = pool + launches of at most half the query space's rows (replay.launch_rows='q'); capN: at most 1/N of them")
ap.add_argument("--replay-modes-by", default="", help="replay: per strategy modes, e.g. 'ring=fused,cap8;magi=fused,cap' (others: --replay-modes)")
ap.add_argument("--replay-reps-by", default="", help="replay: per strategy rounds, e.g. 'ring=3' (others: --replay-reps)")
ap.add_argument("--world1-variants", default="", help="world1: FCP variants to run (fused-auto,pool-auto,fused-flash,fused-cudnn; default all)")
ap.add_argument("--replay-reps", type=int, default=5, help="replay: rounds; each runs every mode once (end to end, then kernel-only with --profile), order rotated each round")
ap.add_argument("--host-profile", default="", help="replay: plans whose heaviest rank gets a torch.profiler table (--host-profile-mode, one forward, one forward+backward)")
ap.add_argument("--host-profile-mode", default="pool", help="replay: the --replay-modes name that --host-profile profiles")
ap.add_argument("--replay-which", default="heaviest", help="replay: ranks (heaviest,median)")
ap.add_argument("--graph", action="store_true", help="(unused since run 9: replay_modes does not capture graphs; run 6 measured 0.97-1.02x)")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
T0 = time.time()
SMOKE = args.smoke
DEV = torch.device("cpu" if SMOKE else "cuda")
DT = torch.float32 if SMOKE else torch.bfloat16
LOG = open(os.path.join(args.out, "log.txt"), "a")


def log(*a) -> None:
    s = " ".join(str(x) for x in a)
    print(f"[{time.time() - T0:6.1f}s] {s}", flush=True)
    LOG.write(s + "\n")
    LOG.flush()


def left() -> float:
    return args.budget - (time.time() - T0)


R: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "smoke": SMOKE, "errors": {}}


def save() -> None:
    with open(os.path.join(args.out, "results.json.tmp"), "w") as f:
        json.dump(R, f, indent=1, default=str)
    os.replace(os.path.join(args.out, "results.json.tmp"), os.path.join(args.out, "results.json"))


def section(name):
    def deco(fn):
        def run():
            if name not in args.sections.split(","):
                return
            t = time.time()
            log(f"== {name}")
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - record and go on with the next section
                R["errors"][name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
                log(f"!! {name} failed: {type(e).__name__}: {e}")
            R.setdefault("section_s", {})[name] = time.time() - t
            save()

        return run

    return deco


def sync() -> None:
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def bench(fn, warmup: int = 1, reps: int = 3) -> float:
    """Median milliseconds of fn() (CUDA events on the GPU, wall clock on the CPU: fcp_torch.timing)."""
    from fcp_torch.timing import time_ms

    return float(np.median(time_ms(fn, DEV, reps=reps, warmup=warmup)))


KERNELS = Kernels(DEV, DT, 1.0 / math.sqrt(D))


def kname(k: str) -> str:
    return k if not SMOKE else "math"


# ------------------------------------------------------------------------------------------------
@section("env")
def env() -> None:
    e = {"torch": torch.__version__, "python": sys.version.split()[0], "device": str(DEV)}
    e["env"] = {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")}
    if DEV.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        e.update(
            gpu=torch.cuda.get_device_name(0),
            sms=p.multi_processor_count,
            memory_gb=p.total_memory / 2**30,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            device_count=torch.cuda.device_count(),
            nccl=".".join(str(x) for x in torch.cuda.nccl.version()) if hasattr(torch.cuda, "nccl") else None,
        )
        try:
            e["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu", "--format=csv"],
                capture_output=True, text=True, timeout=20,
            ).stdout
        except Exception as x:  # noqa: BLE001
            e["nvidia_smi"] = str(x)
        n = 8192
        a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
        ms = bench(lambda: a @ b, warmup=3, reps=10)
        e["matmul_bf16_8192_tflops"] = 2 * n**3 / ms / 1e9
        x = torch.empty(2 * 2**30, dtype=torch.uint8, device=DEV)
        y = torch.empty_like(x)
        ms = bench(lambda: y.copy_(x), warmup=2, reps=10)
        e["copy_gbps_read_plus_write"] = 2 * x.numel() / ms / 1e6
        del a, b, x, y
    e["kernels_available"] = KERNELS.available
    e["kernel_errors"] = KERNELS.errors
    e["flash_lse_layout"] = KERNELS.flash_lse_layout
    R["env"] = e
    log(json.dumps({k: v for k, v in e.items() if k != "nvidia_smi"}))


# ------------------------------------------------------------------------------------------------
def sdpa_ref(x, causal=True, fp32=True):
    """Per-sequence torch SDPA in bf16 (autograd) and (unless fp32=False) in float32; dicts of lists."""
    from fcp_torch.reference import reference_sequence, sdpa_sequence

    bf = {f: [] for f in ("o", "dq", "dk", "dv")}
    fp = {f: [] for f in ("o", "dq", "dk", "dv")}
    for s in range(len(x["q"])):
        q, k, v, do = (x[f][s] for f in ("q", "k", "v", "dO"))
        if SMOKE:
            r1 = reference_sequence(q, k, v, do, causal, torch.float32)
            r2 = reference_sequence(q, k, v, do, causal, torch.float64)
        else:
            r1 = sdpa_sequence(q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16), do.to(torch.bfloat16), causal)
            r2 = sdpa_sequence(q.float(), k.float(), v.float(), do.float(), causal) if fp32 else r1
        for f, a, b in zip(("o", "dq", "dk", "dv"), r1, r2):
            bf[f].append(a.float())
            fp[f].append(b.float())
    return bf, fp


def errs(got, ref):
    return {f: rel_err(torch.cat([t.reshape(-1) for t in got[f]]), torch.cat([t.reshape(-1) for t in ref[f]])) for f in ("o", "dq", "dk", "dv")}


def ratio(a, b):
    """Per field: our error against float32 over unsharded bf16 SDPA's error against float32."""
    return {f: a[f] / max(b[f], 1e-30) for f in a}


def errors_vs_sdpa(plan, out_dir, infos, seed=5):
    """The outputs ranks wrote to `out_dir` (seeded inputs) against unsharded SDPA: relative errors
    against bf16 SDPA and float32, SDPA's own bf16 error, and ours over it per field (error_ratio)."""
    from fcp_torch.launch import gather_outputs

    out = gather_outputs(out_dir, infos, plan.sequences, plan.q_heads, plan.kv_heads, plan.head_dim)
    got = {f: [torch.from_numpy(a).to(DEV) for a in out[f]] for f in out}
    bf, fp = sdpa_ref(whole_inputs(plan, seed), plan.causal)
    r = {"vs_sdpa_bf16": errs(got, bf), "vs_fp32": errs(got, fp), "sdpa_bf16_vs_fp32": errs(bf, fp)}
    r["error_ratio"] = ratio(r["vs_fp32"], r["sdpa_bf16_vs_fp32"])
    return r


def whole_inputs(plan, seed):
    from fcp_torch.io import generate_rows

    out = {f: [] for f in ("q", "k", "v", "dO")}
    for s, L in enumerate(plan.sequences.tolist()):
        r = generate_rows(seed, plan.q_heads, plan.kv_heads, plan.head_dim, [s], [0], [L], DEV, DT)
        for f in out:
            out[f].append(r[f])
    return out


def numerics_plan(name):
    if not SMOKE:
        return read_plan(os.path.join(PLANS, f"{name}.json.gz"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from fcp_torch.plan import plan_from_json
    from tests import synth

    world = int(name.rsplit("-", 1)[1])
    return plan_from_json(synth.owner_plan([40, 9, 70, 3], world, 2, "causal", H=4, Hk=2, D=16))


@section("numerics")
def numerics() -> None:
    from fcp_torch.autograd import FcpAttention

    plan = numerics_plan("num-fcp-1")
    x = whole_inputs(plan, 3)
    bf, fp = sdpa_ref(x, plan.causal)
    res = {"plan": "num-fcp-1", "sequences": plan.sequences.tolist(), "sdpa_bf16_vs_fp32": errs(bf, fp), "runs": {}}
    for kernel in ("auto", "flash", "cudnn") if not SMOKE else ("math",):
        try:
            att = FcpAttention.from_plan(plan, rank=0, device=str(DEV), dtype=DT, kernel=kernel)
            prog = att.runtime.prog
            rows = lambda f: torch.cat([x[f][s][a : a + n] for s, a, n in zip(prog.user_seq, prog.user_start, prog.user_length)])  # noqa: E731
            q, k, v = (rows(f).clone().requires_grad_(True) for f in ("q", "k", "v"))
            o = att(q, k, v)
            o.backward(rows("dO"))
            got = {f: [] for f in ("o", "dq", "dk", "dv")}
            pos = 0
            for s, a, n in zip(prog.user_seq.tolist(), prog.user_start.tolist(), prog.user_length.tolist()):
                for f, t in (("o", o.detach()), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
                    got[f].append(t[pos : pos + n].float())
                pos += n
            ordered = {f: [None] * len(plan.sequences) for f in got}
            for i, s in enumerate(prog.user_seq.tolist()):  # one user row per sequence on one rank
                for f in got:
                    ordered[f][s] = got[f][i]
            r = {"vs_sdpa_bf16": errs(ordered, bf), "vs_fp32": errs(ordered, fp), "launches": att.runtime.stats["forward"].launch_kinds}
            r["pass"] = max(r["vs_sdpa_bf16"].values()) < 1e-2
            res["runs"][kernel] = r
            log("numerics 1 rank", kernel, json.dumps(r))
        except Exception as e:  # noqa: BLE001
            res["runs"][kernel] = {"error": f"{type(e).__name__}: {e}"}
            log("numerics 1 rank", kernel, "failed", e)
    R["numerics_1rank"] = res


@section("multirank")
def multirank() -> None:
    from fcp_torch.launch import LaunchError, run_workers

    res = {}
    backend_used = None
    for strategy in ("fcp", "ring", "magi", "bytescale"):
        if left() < 120:
            res[strategy] = {"skipped": "time budget"}
            continue
        name = f"num-{strategy}-4"
        plan = numerics_plan(name)
        if SMOKE:
            path = os.path.join(args.out, f"{name}.json")
            from tests import synth

            synth.write(synth.owner_plan([40, 9, 70, 3], 4, 2, "causal", H=4, Hk=2, D=16), path)
        else:
            path = os.path.join(PLANS, f"{name}.json.gz")
        tried = [b for b in args.multirank_backends.split(",") if b]
        attempts = tried if backend_used is None else [backend_used]
        if SMOKE:
            attempts = ["gloo"]
        r = {"attempts": {}}
        for backend in attempts:
            d = tempfile.mkdtemp(prefix="fcp-mr-")  # not under OUT: only a few files may come back
            a = ["--device", DEV.type, "--backend", backend, "--kernel", "auto" if not SMOKE else "math", "--seed", "5", "--timeout", "40"]
            t = time.time()
            try:
                infos = run_workers(path, plan.world, d, a, timeout=60 if backend == "nccl" else 240)
            except LaunchError as e:
                r["attempts"][backend] = {"error": f"{e.code}: {e.message[-1500:]}", "s": time.time() - t}
                log("multirank", strategy, backend, "failed:", e.code, e.message[-300:])
                continue
            r["attempts"][backend] = {
                "s": time.time() - t,
                **errors_vs_sdpa(plan, d, infos),
                "kernel": infos[0]["kernel"],
                "launches": [i["iters"][0]["forward"]["launch_kinds"] for i in infos],
                "bytes_sent": sum(i["iters"][0]["forward"]["bytes_sent"] + i["iters"][0]["backward"]["bytes_sent"] for i in infos),
            }
            r["backend"] = backend
            r["pass"] = max(r["attempts"][backend]["vs_sdpa_bf16"].values()) < 1e-2
            r["pass_1p2"] = max(r["attempts"][backend]["error_ratio"].values()) <= 1.2
            backend_used = backend
            log("multirank", strategy, backend, json.dumps(r["attempts"][backend]))
            break
        # The NCCL code path (groups posted from a communication stream, compute waiting on events),
        # with ranks as threads of this process and messages through queues instead of NCCL.
        if not SMOKE and left() > 90:
            try:
                from fcp_torch.local import run_local

                t = time.time()
                x = whole_inputs(plan, 5)
                got = run_local(plan, x, device=str(DEV), dtype=DT, kernel="auto", streams=True, timeout=60)
                got = {f: [t_.to(DEV) for t_ in v] for f, v in got.items()}
                bf, fp = sdpa_ref(x, plan.causal)
                r["threads_streams"] = {"s": time.time() - t, "vs_sdpa_bf16": errs(got, bf), "vs_fp32": errs(got, fp), "sdpa_bf16_vs_fp32": errs(bf, fp)}
                r["threads_streams"]["error_ratio"] = ratio(r["threads_streams"]["vs_fp32"], r["threads_streams"]["sdpa_bf16_vs_fp32"])
                r["threads_streams"]["pass_1p2"] = max(r["threads_streams"]["error_ratio"].values()) <= 1.2
                r["threads_streams"]["pass"] = max(r["threads_streams"]["vs_sdpa_bf16"].values()) < 1e-2
                log("multirank", strategy, "threads+streams", json.dumps(r["threads_streams"]))
            except Exception as e:  # noqa: BLE001
                r["threads_streams"] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
                log("multirank", strategy, "threads+streams failed", e)
        res[strategy] = r
    R["numerics_4rank_one_gpu"] = res


# ------------------------------------------------------------------------------------------------
def launch(kernel, causal, lq, lk, n):
    lqa, lka = np.full(n, lq), np.full(n, lk)
    L = Launch(kname(kernel), causal, torch.arange(1), torch.arange(1), lqa, lka, batch=n)
    if kernel == "flash" and not SMOKE:
        L.cu_q = torch.tensor(np.concatenate(([0], np.cumsum(lqa))), dtype=torch.int32, device=DEV)
        L.cu_k = torch.tensor(np.concatenate(([0], np.cumsum(lka))), dtype=torch.int32, device=DEV)
    return L


def time_launch(L, lq_total, lk_total, bwd=True, reps=3):
    q = torch.randn(lq_total, H, D, device=DEV, dtype=DT)
    k = torch.randn(lk_total, HK, D, device=DEV, dtype=DT)
    v = torch.randn(lk_total, HK, D, device=DEV, dtype=DT)
    fwd = bench(lambda: KERNELS.forward(L, q, k, v), warmup=1, reps=reps)
    out = {"fwd_ms": fwd}
    if bwd:
        o, lse = KERNELS.forward(L, q, k, v)
        o = o.to(DT).contiguous()
        do = torch.randn_like(o)
        out["bwd_ms"] = bench(lambda: KERNELS.backward(L, q, k, v, o, do, lse), warmup=1, reps=reps)
    return out


def pairs_of(causal, lq, lk):
    return lq * (lk - lq) + lq * (lq + 1) // 2 if causal else lq * lk


def mfu(pairs, ms, factor=1.0):
    return factor * 4.0 * pairs * H * D / (PEAK * 1e12 * ms / 1e3)


@section("calibrate")
def calibrate() -> None:
    scale_tokens = 32768 if not SMOKE else 256
    sizes = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768] if not SMOKE else [16, 32]
    dense, rects, grid, mixes = [], [], [], []
    if KERNELS.available.get("cudnn") or SMOKE:
        for causal in (True, False):
            for L in sizes:
                if left() < 60:
                    break
                n = max(1, scale_tokens // L)
                t = time_launch(launch("cudnn", causal, L, L, n), n * L, n * L, reps=args.calib_reps)
                p = n * pairs_of(causal, L, L)
                row = {"name": "sdpa-cudnn", "kind": "batch", "causal": causal, "pairs": n, "lq": L, "lk": L, **t}
                row.update(fwd_tflops=4 * p * H * D / t["fwd_ms"] / 1e9, fwd_mfu=mfu(p, t["fwd_ms"]))
                row.update(bwd_tflops=2.5 * 4 * p * H * D / t["bwd_ms"] / 1e9, bwd_mfu=mfu(p, t["bwd_ms"], 2.5))
                dense.append(row)
                log("dense", json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))
        for lq in sizes[2:-2] if not SMOKE else sizes:
            for mult in (2, 4):
                if left() < 60:
                    break
                lk = lq * mult
                n = max(1, scale_tokens // lq)
                t = time_launch(launch("cudnn", False, lq, lk, n), n * lq, n * lk, reps=args.calib_reps)
                p = n * lq * lk
                rects.append({"name": "cudnn-rect", "kind": "rect", "causal": False, "pairs": n, "lq": lq, "lk": lk, **t,
                              "fwd_mfu": mfu(p, t["fwd_ms"]), "bwd_mfu": mfu(p, t["bwd_ms"], 2.5)})
    R["calibration_dense"] = dense + rects
    save()
    if KERNELS.available.get("flash") or SMOKE:
        lqs = [128, 256, 512, 1024, 2048, 4096, 8192] if not SMOKE else [16, 32]
        for lq in lqs:
            for mult in (1, 2, 4, 8, 16):
                lk = lq * mult
                if lk > (65536 if not SMOKE else 256):
                    continue
                for causal in (True, False):
                    if left() < 45:
                        break
                    n = max(1, min(scale_tokens // lq, (8 * scale_tokens) // lk))
                    t = time_launch(launch("flash", causal, lq, lk, n), n * lq, n * lk, reps=args.calib_reps)
                    p = n * pairs_of(causal, lq, lk)
                    row = {"kernel": "flash", "lq": lq, "lk": lk, "causal": causal, "segments": n, **t,
                           "fwd_mfu": mfu(p, t["fwd_ms"]), "bwd_mfu": mfu(p, t["bwd_ms"], 2.5)}
                    grid.append(row)
            log("grid lq", lq, "rows", len(grid))
        t = time_launch(launch("flash", True, 64, 64, 1), 64, 64, reps=20) if not SMOKE else {"fwd_ms": 0.0, "bwd_ms": 0.0}
        grid.append({"kernel": "flash", "lq": 64, "lk": 64, "causal": True, "segments": 1, **t,
                     "fwd_mfu": mfu(pairs_of(True, 64, 64), max(t["fwd_ms"], 1e-9)), "bwd_mfu": mfu(pairs_of(True, 64, 64), max(t["bwd_ms"], 1e-9), 2.5)})
        # Varlen mixes: packed sequences of mixed lengths in one causal launch (about 32K tokens).
        rng = np.random.default_rng(0)
        mix_defs = {
            "longtail-like (lognormal, median ~1K, <=32K)": np.clip(rng.lognormal(7.0, 1.3, 400).astype(int), 16, 32768),
            "short (64..512)": rng.integers(64, 513, 400),
            "blocks 4K": np.full(8, 4096),
        }
        for name, lens in mix_defs.items():
            if left() < 40:
                break
            if SMOKE:
                lens = np.clip(lens // 64, 1, 32)
            cum = np.cumsum(lens)
            lens = lens[: max(1, int(np.searchsorted(cum, scale_tokens)))]
            L = Launch(kname("flash"), True, torch.arange(1), torch.arange(1), lens, lens, batch=len(lens))
            if not SMOKE:
                L.cu_q = torch.tensor(np.concatenate(([0], np.cumsum(lens))), dtype=torch.int32, device=DEV)
                L.cu_k = L.cu_q
            t = time_launch(L, int(lens.sum()), int(lens.sum()), reps=args.calib_reps)
            p = int(sum(pairs_of(True, int(a), int(a)) for a in lens))
            mixes.append({"mix": name, "segments": len(lens), "tokens": int(lens.sum()), **t,
                          "fwd_mfu": mfu(p, t["fwd_ms"]), "bwd_mfu": mfu(p, t["bwd_ms"], 2.5)})
            log("mix", json.dumps(mixes[-1]))
    R["calibration_grid"] = grid
    R["calibration_mixes"] = mixes
    doc = {
        "device": R.get("env", {}).get("gpu", str(DEV)),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if DEV.type == "cuda" else None,
        "shape": {"qHeads": H, "kvHeads": HK, "headDim": D, "dtype": "bf16"},
        "peak_tflops": PEAK,
        "note": (
            "Measured by scripts/gpu/h200.py through fcp_torch's own kernel calls. Rows with `segments` "
            "(kernel flash): torch.ops.aten._flash_attention_forward/_backward over `segments` equal varlen "
            "segments, causal bottom-right aligned. Rows with kind batch (name sdpa-cudnn): "
            "torch.ops.aten._scaled_dot_product_cudnn_attention(_backward) over a dense batch of `pairs` equal "
            "squares, GQA native. kind rect (cudnn-rect): dense full rectangles. MFU counts attended pairs "
            "(causal square L(L+1)/2); bwd MFU uses 2.5x forward FLOPs."
        ),
        "rows": grid + dense + rects,
    }
    with open(os.path.join(args.out, "h200-measured.json"), "w") as f:
        json.dump(doc, f, indent=1)


# ------------------------------------------------------------------------------------------------
def manifest_entry(path):
    from fcp_torch.replay import pick_ranks, rank_pairs

    plan = read_plan(path)
    pr = rank_pairs(plan)
    ranks = pick_ranks(pr)
    return {
        "strategy": plan.strategy,
        "world": plan.world,
        "sequences": len(plan.sequences),
        "tokens": int(plan.sequences.sum()),
        "ranks": ranks,
        "pairs": {k: float(pr[v]) for k, v in ranks.items()},
        "mean_pairs": float(pr.mean()),
        "imbalance": float(pr.max() / pr.mean() - 1),
    }


def make_manifest() -> None:
    man = {}
    for world in (64, 128, 256):
        for s in ("fcp", "ring", "magi"):
            name = f"replay-{s}-{world}"
            t = time.time()
            man[name] = manifest_entry(os.path.join(PLANS, f"{name}.json.gz"))
            print(name, man[name], f"{time.time() - t:.1f}s", flush=True)
    with open(os.path.join(PLANS, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1)


@section("fused")
def fused_check() -> None:
    """The fused path's start-up choice, its agreement with the torch merge on a replay-sized case, and
    a micro-benchmark of one launch's merge (32K rows, 64 heads x 128) per implementation."""
    from fcp_torch.fused import Fused, merge_csr_torch, merge_plans
    from fcp_torch.kernels import merge_into, merge_slice

    f = Fused(DEV)
    out = {"backend": f.backend, "errors": f.errors}
    n = 32768 if not SMOKE else 256
    Hh, Dd = (H, D) if not SMOKE else (4, 16)
    rng = np.random.default_rng(1)
    idx_a, idx_b = np.arange(n), rng.permutation(n)[: n // 2]
    plans = merge_plans([idx_a, idx_b], n, DEV)
    g = torch.Generator(device="cpu").manual_seed(2)
    parts = [(torch.randn(len(i), Hh, Dd, generator=g).to(DEV, DT), (torch.randn(len(i), Hh, generator=g) * 2).to(DEV)) for i in (idx_a, idx_b)]

    def fresh():
        return torch.zeros(n, Hh, Dd, device=DEV), torch.full((n, Hh), float("-inf"), device=DEV)

    ref, got = fresh(), fresh()
    for i, (o, l) in zip((idx_a, idx_b), parts):
        merge_into(ref[0], ref[1], torch.from_numpy(i).to(DEV), o.float(), l)
    for mp, (o, l) in zip(plans, parts):
        f.merge(got[0], got[1], o, l, mp)
    out["rel_err_O"] = rel_err(got[0], ref[0])
    out["rel_err_LSE"] = rel_err(got[1], ref[1])
    acc = fresh()
    o, l = parts[0]
    out["ms_one_launch_32k_rows"] = {
        "legacy merge_slice": bench(lambda: merge_slice(acc[0], acc[1], 0, o, l)),
        "legacy merge_into": bench(lambda: merge_into(acc[0], acc[1], torch.from_numpy(idx_a).to(DEV), o.float(), l)),
        "torch csr (first touch)": bench(lambda: merge_csr_torch(acc[0], acc[1], o, l, plans[0])),
        f"{f.backend} csr (first touch)": bench(lambda: f.merge(acc[0], acc[1], o, l, plans[0])),
        f"{f.backend} csr (half the rows, merged)": bench(lambda: f.merge(acc[0], acc[1], parts[1][0], parts[1][1], plans[1])),
    }
    R["fused"] = out
    log("fused", json.dumps(out))


@section("fuzz")
def fuzz_section() -> None:
    """Random small plans (bench/fuzz-plans.ts --numerics --write) on the CUDA runtime, one process per
    rank on this GPU through host copies (gloo-staged), each checked against unsharded SDPA as the
    multirank section does: bf16 error over SDPA's own bf16 error against float32 (<= 1.2 passes)."""
    from fcp_torch.launch import LaunchError, run_workers

    files = sorted(f for f in os.listdir(args.fuzz_dir) if f.endswith(".json.gz")) if os.path.isdir(args.fuzz_dir) else []
    res = {"plans": len(files), "runs": {}}
    R["fuzz"] = res
    for name in files:
        # A plan of 3-10 ranks took 5-16 s on an H100 (run 19): start another while 25 s are left.
        if left() < 25:
            res["runs"][name] = {"skipped": "time budget"}
            continue
        path = os.path.join(args.fuzz_dir, name)
        plan = read_plan(path)
        d = tempfile.mkdtemp(prefix="fcp-fz-")
        backend, kernel = ("gloo", "math") if SMOKE else ("gloo-staged", "auto")
        a = ["--device", DEV.type, "--backend", backend, "--kernel", kernel, "--seed", "5", "--timeout", "40"]
        t = time.time()
        try:
            infos = run_workers(path, plan.world, d, a, timeout=min(240.0, max(30.0, left() - 15)))
        except LaunchError as e:
            res["runs"][name] = {"error": f"{e.code}: {e.message[-1500:]}", "s": time.time() - t, "world": plan.world}
            log("fuzz", name, "failed:", e.code, e.message[-300:])
            save()
            continue
        r = {"s": time.time() - t, "world": plan.world, "sequences": len(plan.sequences), "kernel": infos[0]["kernel"],
             **errors_vs_sdpa(plan, d, infos)}
        r["pass"] = max(r["error_ratio"].values()) <= 1.2 or max(r["vs_sdpa_bf16"].values()) < 1e-2
        res["runs"][name] = r
        log("fuzz", name, json.dumps(r))
        save()
    runs = [r for r in res["runs"].values() if "pass" in r]
    res["passed"] = sum(1 for r in runs if r["pass"])
    res["ran"] = len(runs)


@section("world1")
def world1() -> None:
    """The world-1 FCP plan of a long-tailed 64K-token batch against a per-sequence SDPA loop."""
    import torch.nn.functional as F

    from fcp_torch.kernels import math_forward
    from fcp_torch.runtime import RankRuntime

    if SMOKE:
        from fcp_torch.plan import plan_from_json
        from tests import synth

        plan = plan_from_json(synth.owner_plan([40, 9, 70, 3], 1, 2, "causal", H=4, Hk=2, D=16))
    else:
        plan = read_plan(os.path.join(PLANS, "w1-fcp-longtail-64k.json.gz"))
    prog = rank_program(plan, 0)
    lens = plan.sequences.tolist()
    T = int(sum(lens))
    g = torch.Generator(device="cpu").manual_seed(4)
    q = torch.randn(T, plan.q_heads, plan.head_dim, generator=g).to(DEV, DT)
    k = torch.randn(T, plan.kv_heads, plan.head_dim, generator=g).to(DEV, DT)
    v = torch.randn(T, plan.kv_heads, plan.head_dim, generator=g).to(DEV, DT)
    do = torch.randn(T, plan.q_heads, plan.head_dim, generator=g).to(DEV, DT)
    # user layout = rows sorted by (sequence, start): with one rank, the sequences in order
    assert prog.user_tokens == T
    offs = np.concatenate(([0], np.cumsum(lens))).tolist()

    def sdpa_fwd(q, k, v):
        outs = []
        for s in range(len(lens)):
            a, b = offs[s], offs[s + 1]
            if SMOKE:  # torch 1.13 has no SDPA: the math kernel stands in
                outs.append(math_forward(q[a:b], k[a:b], v[a:b], True, 1.0 / math.sqrt(plan.head_dim))[0].to(q.dtype))
                continue
            o = F.scaled_dot_product_attention(q[a:b].transpose(0, 1)[None], k[a:b].transpose(0, 1)[None], v[a:b].transpose(0, 1)[None],
                                               is_causal=True, enable_gqa=True)
            outs.append(o[0].transpose(0, 1))
        return torch.cat(outs)

    def sdpa_fb():
        qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
        sdpa_fwd(qq, kk, vv).backward(do)
        return qq.grad

    res = {"sequences": len(lens), "tokens": T, "max_len": max(lens), "runs": {}}
    res["sdpa_loop"] = {"forward_ms": bench(lambda: sdpa_fwd(q, k, v), warmup=2, reps=5), "fwd_bwd_ms": bench(sdpa_fb, warmup=2, reps=5)}
    pairs_all = float(sum(x_ * (x_ + 1) / 2 for x_ in lens)) if plan.causal else float(sum(x_ * x_ for x_ in lens))
    res["sdpa_loop"]["forward_mfu"] = 4 * pairs_all * plan.q_heads * plan.head_dim / (PEAK * 1e12 * res["sdpa_loop"]["forward_ms"] / 1e3)
    # the SDPA loop with each backend forced (which one the default picks, and the best a loop gets)
    if not SMOKE:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        for bname in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
            try:
                with sdpa_kernel([getattr(SDPBackend, bname)]):
                    res["sdpa_loop"][f"forward_ms_{bname.lower()}"] = bench(lambda: sdpa_fwd(q, k, v), warmup=2, reps=5)
            except Exception as e:  # noqa: BLE001 - a backend that does not run here is a result too
                res["sdpa_loop"][f"forward_ms_{bname.lower()}"] = f"{type(e).__name__}: {str(e)[:200]}"
    # FCP: the default kernel policy (cuDNN for pieces >= 512 tokens, one varlen flash launch for the
    # rest), all pieces in one varlen flash launch, and dense cuDNN only; each with the K/V pool on
    variants = [("fused", "auto", False), ("pool", "auto", True), ("fused", "flash", False), ("fused", "cudnn", False)]
    if args.world1_variants:
        variants = [v for v in variants if f"{v[0]}-{v[1]}" in args.world1_variants.split(",")]
    for mode, kern, kvp in variants:
        if SMOKE and kern != "auto":
            continue
        if kern != "auto" and not KERNELS.available.get(kern):
            res["runs"][f"{mode}-{kern}"] = {"skipped": f"{kern} unavailable"}
            continue
        rt = RankRuntime(prog, None, DEV, DT, kname(kern), kv_pool=kvp)
        rt.prepare()

        def fcp_fb():
            o, st = rt.forward_with_state(q, k, v)
            return rt.backward(do, st)

        r = {"forward_ms": bench(lambda: rt.forward(q, k, v), warmup=2, reps=5), "fwd_bwd_ms": bench(fcp_fb, warmup=2, reps=5),
             "launches": rt.stats["forward"].launch_kinds}
        # Kernel-only forward time (CUDA events around each kernel call of one more forward): what
        # the runtime spends around the kernels is forward_ms minus this.
        if DEV.type == "cuda":
            kf, evs = rt.kernels.forward, []

            def timed(L, *a_):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                out_ = kf(L, *a_)
                e1.record()
                evs.append((e0, e1))
                return out_

            rt.kernels.forward = timed
            try:
                rt.forward(q, k, v)
                sync()
            finally:
                rt.kernels.forward = kf
            r["kernel_only_forward_ms"] = sum(a_.elapsed_time(b_) for a_, b_ in evs)
        lay = getattr(rt, "_fwd_layout", None)
        if lay is not None:
            r["acc_rows"], r["direct_rows"] = int(lay.acc_slots.numel()), lay.direct_rows
        pairs = float(sum(x_ * (x_ + 1) / 2 for x_ in lens)) if plan.causal else float(sum(x_ * x_ for x_ in lens))
        r["forward_mfu"] = 4 * pairs * plan.q_heads * plan.head_dim / (PEAK * 1e12 * r["forward_ms"] / 1e3)
        o_f = rt.forward(q, k, v)
        r["o_rel_err_vs_sdpa"] = rel_err(o_f, sdpa_fwd(q, k, v))
        r["speedup_forward"] = res["sdpa_loop"]["forward_ms"] / r["forward_ms"]
        r["speedup_fwd_bwd"] = res["sdpa_loop"]["fwd_bwd_ms"] / r["fwd_bwd_ms"]
        res["runs"][f"{mode}-{kern}"] = r
        log("world1", mode, kern, f"fwd {r['forward_ms']:.2f} ms (kernels {r.get('kernel_only_forward_ms')}) fwd+bwd {r['fwd_bwd_ms']:.2f} ms",
            f"speedup fwd {r['speedup_forward']:.3f} fwd+bwd {r['speedup_fwd_bwd']:.3f} launches {r['launches']}")
        del rt
    R["world1"] = res
    log("world1", json.dumps(res))


@section("hf")
def hf_section() -> None:
    """transformers: a small random Llama with attn_implementation="fcp" against the same model with sdpa per sequence."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from fcp_torch import hf
    from fcp_torch.autograd import FcpAttention

    hf.register()
    plan = read_plan(os.path.join(PLANS, "hf-fcp-1.json.gz"))
    lens = plan.sequences.tolist()
    cfg = LlamaConfig(vocab_size=1000, hidden_size=plan.q_heads * plan.head_dim, intermediate_size=1024, num_hidden_layers=3,
                      num_attention_heads=plan.q_heads, num_key_value_heads=plan.kv_heads, head_dim=plan.head_dim,
                      max_position_embeddings=8192)
    import copy

    def build(impl):
        c = copy.deepcopy(cfg)  # each model its own config: the attention implementation lives there
        c._attn_implementation = impl
        return LlamaForCausalLM(c).to(DEV)

    torch.manual_seed(0)
    ref32 = build("sdpa").float()
    sd = ref32.state_dict()
    models = {}
    for name, impl, dt in (("sdpa_bf16", "sdpa", torch.bfloat16), ("fcp_bf16", "fcp", torch.bfloat16)):
        m = build(impl)
        m.load_state_dict(sd)
        models[name] = m.to(dt)
    res_impl = {n: m.config._attn_implementation for n, m in models.items()}
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = [torch.randint(0, cfg.vocab_size, (L,), generator=g).to(DEV) for L in lens]
    w = torch.randn(sum(lens), cfg.vocab_size, generator=g).to(DEV)

    def per_sequence(m):
        m.zero_grad()
        logits = torch.cat([m(x[None]).logits[0] for x in ids]).float()
        (logits * w).sum().backward()
        return logits.detach(), {n: p.grad.float() for n, p in m.named_parameters()}

    def packed_fcp(m):
        m.zero_grad()
        att = FcpAttention.from_plan(plan, rank=0, device=str(DEV), dtype=torch.bfloat16, kernel="auto")
        pos = torch.cat([torch.arange(L, device=DEV) for L in lens])[None]
        with hf.use_plan(att):
            logits = m(torch.cat(ids)[None], position_ids=pos).logits[0].float()
        (logits * w).sum().backward()
        return logits.detach(), {n: p.grad.float() for n, p in m.named_parameters()}

    lr, gr = per_sequence(ref32)
    ls, gs = per_sequence(models["sdpa_bf16"])
    lf, gf = packed_fcp(models["fcp_bf16"])
    def gerr(a):
        return max(rel_err(a[n], gr[n]) for n in gr)
    res = {"transformers": __import__("transformers").__version__, "impl": res_impl, "sequences": lens, "layers": cfg.num_hidden_layers,
           "logits_err": {"sdpa_bf16": rel_err(ls, lr), "fcp_bf16": rel_err(lf, lr)},
           "max_grad_err": {"sdpa_bf16": gerr(gs), "fcp_bf16": gerr(gf)}}
    res["pass_1p2"] = res["logits_err"]["fcp_bf16"] <= 1.2 * res["logits_err"]["sdpa_bf16"] and res["max_grad_err"]["fcp_bf16"] <= 1.2 * res["max_grad_err"]["sdpa_bf16"]
    R["hf"] = res
    log("hf", json.dumps(res))


def _subprocess(cmd, cwd, timeout):
    """Runs a helper process; (exit code, stdout, stderr tail); a timeout is exit code 124."""
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        return p.returncode, p.stdout, p.stderr[-3000:]
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"


@section("hftest")
def hftest() -> None:
    """python/tests/gpu_test_hf.py (attn_implementation="fcp" on a random Llama against sdpa, bf16)."""
    code, out, err = _subprocess([sys.executable, "-m", "unittest", "tests.gpu_test_hf", "-v"], os.path.join(ROOT, "python"), 300)
    R["hftest"] = {"exit": code, "stdout": out[-2000:], "stderr": err}
    log("hftest exit", code, out[-600:], err[-1200:])


@section("train")
def train() -> None:
    """examples/train.py on the GPU in bf16 with pre-made plans (scripts/gpu/train-plans.sh): W processes
    on the one GPU (gloo, attention messages through host copies), 3 layers, 3 steps, checked against
    float32 with unsharded bf16 SDPA beside."""
    targs = open(os.path.join(PLANS, "train-args.txt")).read().split()
    if SMOKE:  # one step of a narrow model on the same plans
        targs += ["--steps", "1", "--dim", "32", "--ffn", "64", "--vocab", "64", "--layers", "2"]
    res = {"args": " ".join(targs), "runs": {}}
    for W in [int(x) for x in args.train_worlds.split(",") if x]:
        if left() < 60:
            res["runs"][str(W)] = {"skipped": "time budget"}
            continue
        cmd = [sys.executable, os.path.join(ROOT, "examples", "train.py"), *targs, "--world", str(W),
               "--plans", os.path.join(PLANS, f"train-w{W}"), "--device", DEV.type, "--dtype", "bfloat16" if not SMOKE else "float32",
               "--check", "--timeout", "240"]
        t = time.time()
        code, out, err = _subprocess(cmd, ROOT, 280)
        r = {"exit": code, "s": time.time() - t, "losses": [ln for ln in out.splitlines() if ln.startswith("step ")], "stderr": err[-1500:] if code else ""}
        js = [ln for ln in out.splitlines() if ln.startswith("{")]
        if js:
            r["check"] = json.loads(js[-1])
        res["runs"][str(W)] = r
        log("train W", W, json.dumps(r)[:1500])
        save()
    R["train"] = res


@section("memory")
def memory_section() -> None:
    """fcp_torch.memory's estimate against torch.cuda.max_memory_allocated: python/tests/measure_memory.py
    --device cuda (one process per plan rank on the one GPU, 3 layers sharing one FcpAttention, bf16)."""
    res = {}
    for name in [n for n in args.memory_plans.split(",") if n]:
        if left() < 60:
            res[name] = {"skipped": "time budget"}
            continue
        path = os.path.join(PLANS, f"{name}.json.gz") if not SMOKE else os.path.join(PLANS, "train-w2", "plan-0-0.json")
        cmd = [sys.executable, "-m", "tests.measure_memory", "--plan", path, "--layers", "3", "--dtype", "bfloat16" if not SMOKE else "float32",
               "--device", DEV.type, "--kernel", "auto", "--timeout", "200"]
        t = time.time()
        code, out, err = _subprocess(cmd, os.path.join(ROOT, "python"), 240)
        r = {"exit": code, "s": time.time() - t, "stderr": err[-1500:] if code else ""}
        js = [ln for ln in out.splitlines() if ln.startswith("{")]
        if js:
            m = json.loads(js[-1])
            r["ranks"] = [{k: x[k] for k in ("rank", "measured", "estimated", "relErr")} | {"detail": x["detail"], "phases": x.get("phases")} for x in m["ranks"]]
            r["max_abs_rel_err"] = max(abs(x["relErr"]) for x in m["ranks"])
        res[name] = r
        log("memory", name, json.dumps({k: v for k, v in r.items() if k != "ranks"}), [(x["measured"], x["estimated"], round(x["relErr"], 3)) for x in r.get("ranks", [])])
        save()
    R["memory"] = res


@section("replay")
def replay() -> None:
    from fcp_torch.replay import replay_modes, replay_rank

    if SMOKE:
        from fcp_torch.plan import plan_from_json
        from tests import synth

        plan = plan_from_json(synth.chunk_plan([70, 9, 33], 4))
        R["replay"] = {"smoke": [replay_rank(plan, r, kernel="math", device="cpu", dtype=torch.float32, iters=1, warmup=1) for r in (0, 3)],
                       "modes": replay_modes(plan, 3, {m: replay_mode_args(m) for m in args.replay_modes.split(",")}, reps=2,
                                             kernel="math", device="cpu", dtype=torch.float32)}
        if args.host_profile:
            R["replay"]["host_profile"] = host_profile(plan, 3, "math", args.host_profile_mode)
        return
    man_path = os.path.join(PLANS, "manifest.json")
    man = json.load(open(man_path)) if os.path.exists(man_path) else {}
    out = R.setdefault("replay", {})
    order = [f"replay-{s}-{w}" for w in (64, 128, 256) for s in ("fcp", "magi", "ring")]
    if args.replay_plans:
        order = [n for n in args.replay_plans.split(",") if n]
    for name in order:
        if left() < 30:
            out[name] = {"skipped": "time budget"}
            continue
        try:
            entry = man.get(name) or manifest_entry(os.path.join(PLANS, f"{name}.json.gz"))
            plan = read_plan(os.path.join(PLANS, f"{name}.json.gz"))
            res = {"manifest": entry, "runs": []}
            kernels = ("auto",)
            # Never fall back to the math kernel on 32K-token ranks: skip policies whose kernels failed the probe.
            if not KERNELS.available.get("flash"):
                kernels = ("cudnn",) if KERNELS.available.get("cudnn") and entry["strategy"] == "fcp" else ()
            elif not KERNELS.available.get("cudnn"):
                kernels = ("flash",)
            big = entry["world"] >= 256 and entry["strategy"] == "ring"
            for which in args.replay_which.split(","):
                by = dict(x.split("=", 1) for x in args.replay_modes_by.split(";") if x)
                modes = by.get(entry["strategy"], args.replay_modes).split(",")
                if big:
                    modes = [m for m in modes if m == "fused" or m.startswith("cap")][-1:]  # 1 min per mode; the pool is not built for 8M-slot spaces
                for kernel in kernels:
                    if left() < 60:
                        res["runs"].append({"which": which, "kernel": kernel, "skipped": "time budget"})
                        continue
                    t_run = time.time()
                    reps_by = {k_: int(v) for k_, v in (x.split("=", 1) for x in args.replay_reps_by.split(";") if x)}
                    reps = 1 if big else reps_by.get(entry["strategy"], args.replay_reps)
                    rs = replay_modes(plan, entry["ranks"][which], {m: replay_mode_args(m) for m in modes}, reps=reps,
                                      profile=args.profile and not big, kernel=kernel)
                    run_s = time.time() - t_run
                    for mode, r in rs.items():
                        r["run_s"] = run_s
                        r["which"] = which
                        r["mode"] = mode
                        r["reps"] = reps
                        live = max(r["live_set_bytes"].values())
                        r["peak_over_live"] = r["peak_bytes"] / live if r.get("peak_bytes") else None
                        res["runs"].append(r)
                        sh = r["kernel_share"]
                        fmt = lambda x: f"{x:.3f}" if x is not None else "-"  # noqa: E731
                        log(name, which, kernel, mode, f"share fwd {fmt(sh['forward'])} bwd {fmt(sh['backward'])} peak/live {fmt(r['peak_over_live'])} pool {r['pool_rows']} peak {r['peak_bytes']} win {r.get('merge_window')} {r.get('deferred_backend')} {r.get('fused_errors')}",
                            f"fwd {r['forward_ms']:.1f} [{r['forward_spread']['min']:.1f}-{r['forward_spread']['max']:.1f}] ms mfu {r['forward_mfu']:.3f}",
                            f"| bwd {r['backward_ms']:.1f} [{r['backward_spread']['min']:.1f}-{r['backward_spread']['max']:.1f}] ms mfu {r['backward_mfu']:.3f}",
                            f"| kernel fwd {r['kernel_forward']} bwd {r['kernel_backward']} launches {r['launches']['forward']}")
                    del rs
                    torch.cuda.empty_cache()
                    if args.host_profile and name in args.host_profile.split(","):
                        res["host_profile"] = host_profile(plan, entry["ranks"][which], kernel, args.host_profile_mode)
            out[name] = res
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
            log(name, "failed", e)
        save()


def replay_mode_args(mode: str) -> dict:
    """replay_modes arguments of a --replay-modes name: parts joined by "+" (e.g. "pool+win4").
    legacy: the original merges; fused: the default runtime; base: run 9's runtime (no deferred
    sums, task fusion or solo launches); pool: + K/V pool; cap / capN: pool +
    launches of at most 1/2 or 1/N of the query space's rows; winN / winNrR: deferred sums over
    windows of N ops (deferred.py), at most R held rows; fuse: an op's tasks with touching K/V
    ranges as one task (fusion.py); nofuse: the plan's tasks as they are; solo: big cuDNN pieces one per launch; bhN: deferred-sum
    kernels' heads per program; planorder: launches of an op in kernels.plan_launches order (run 10)
    instead of most pairs first; noside: sums on the compute stream (runtime.side_stream off, run 11)."""
    out: dict = {}
    for part in mode.split("+"):
        if part == "legacy":
            out["merge"] = "legacy"
        elif part == "fused":  # the runtime's defaults
            pass
        elif part == "base":  # run 9's runtime: per-launch merges and adds, no task fusion, batched cuDNN
            out.update(merge_window=1, fuse_tasks=False, solo_pairs=-1, launch_order="plan")
        elif part == "planorder":  # run 10's launch order (by shape class, ascending), not largest first
            out["launch_order"] = "plan"
        elif part == "pool":
            out["pool"] = True
        elif part == "noside":  # sums on the compute stream (run 11's runtime), not the side stream
            out["side_stream"] = False
        elif part.startswith("cap"):
            out.update(pool=True, launch_rows="q" if part == "cap" else f"q/{part[3:]}")
        elif part == "fuse":
            out["fuse_tasks"] = True
        elif part == "nofuse":  # an op's tasks as the plan has them (no fusion of touching K/V ranges)
            out["fuse_tasks"] = False
        elif part == "solo":  # cuDNN pieces of >= 4096 x 2048 pairs launched alone (no gathers)
            out["solo_pairs"] = 1 << 23
        elif part.startswith("bh"):  # heads per program of the deferred-sum kernels
            out["window_bh"] = int(part[2:])
        elif part.startswith("win"):
            n, _, r = part[3:].partition("r")
            out["merge_window"] = int(n)
            if r:
                out["window_rows"] = r if r.endswith("q") or r == "inf" else int(r)
        else:
            raise SystemExit(f"unknown replay mode {mode}")
    return out


def host_profile(plan, rank: int, kernel: str, mode: str = "pool") -> dict:
    """torch.profiler over one forward and one backward of replay mode `mode`: the top host-side
    (CPU total) and device-side operators, to see where the time between kernels goes."""
    from torch.profiler import ProfilerActivity, profile

    from fcp_torch.replay import iteration, setup

    dev = "cuda" if DEV.type == "cuda" else "cpu"
    s = setup(plan, rank, kernel=kernel, device=dev, dtype=DT if dev == "cuda" else torch.float32, **replay_mode_args(mode))
    iteration(s)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    out = {}
    for phase in ("forward", "backward"):
        with profile(activities=acts) as prof:
            if phase == "forward":
                bf = __import__("fcp_torch.replay", fromlist=["_forward_bufs"])._forward_bufs(s.rt, s.base, s.nq)
                s.rt._run_phase("forward", bf)
            else:
                iteration(s)
            sync()
        ka = prof.key_averages()
        out[phase] = {
            "cpu": ka.table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=60),
            "device": ka.table(sort_by="cuda_time_total" if dev == "cuda" else "cpu_time_total", row_limit=20, max_name_column_width=60),
        }
    return out


@section("multigpu")
def multigpu() -> None:
    from fcp_torch.launch import LaunchError, gather_outputs, run_workers

    n = 2 if SMOKE else torch.cuda.device_count()
    if n < 2:
        R["multigpu"] = {"skipped": f"{n} GPU visible; needs a multi-GPU machine"}
        log("multigpu skipped:", R["multigpu"]["skipped"])
        return
    world = max(w for w in (2, 4, 8) if w <= n)
    out = {"world": world, "bandwidth": {}, "runs": {}}
    refs = {}  # SDPA reference per batch (the three strategies share inputs)
    if not SMOKE:
        # Device-to-device copies between GPU 0 and each other GPU (NVLink peer access), 1 GiB.
        for j in range(1, world):
            a = torch.empty(2**30, dtype=torch.uint8, device="cuda:0")
            b = torch.empty(2**30, dtype=torch.uint8, device=f"cuda:{j}")
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(j)
            for _ in range(2):
                b.copy_(a)
            torch.cuda.synchronize(j)
            t = time.perf_counter()
            for _ in range(5):
                b.copy_(a)
            torch.cuda.synchronize(j)
            out["bandwidth"][f"0->{j}"] = 5 * a.numel() / (time.perf_counter() - t) / 1e9
            del a, b
        log("p2p copy GB/s", out["bandwidth"])
    for batch in ("longtail", "magi"):
        for strategy in ("fcp", "ring", "magi"):
            name = f"multi-{strategy}-{batch}-{world}"
            if left() < 60:
                out["runs"][name] = {"skipped": "time budget"}
                continue
            if SMOKE:
                from tests import synth

                path = os.path.join(tempfile.mkdtemp(prefix="fcp-mg-"), "p.json")
                synth.write(synth.chunk_plan([70, 9, 33], 2) if strategy == "ring" else synth.owner_plan([70, 9, 33], 2, 1), path)
            else:
                path = os.path.join(PLANS, f"{name}.json.gz")
            plan = read_plan(path)
            d = tempfile.mkdtemp(prefix="fcp-mg-")
            a = ["--device", DEV.type, "--backend", "gloo" if SMOKE else "nccl", "--kernel", "math" if SMOKE else "auto",
                 "--iters", "3", "--warmup", "1", "--seed", "7", "--timeout", "120"]
            try:
                infos = run_workers(path, world, d, a, timeout=400)
            except LaunchError as e:
                out["runs"][name] = {"error": f"{e.code}: {e.message[-1500:]}"}
                log(name, "failed", e.code)
                continue
            iters = len(infos[0]["iters"])
            span = lambda ph: float(np.median([max(i["iters"][k][ph]["wall_ms"] for i in infos) for k in range(iters)]))  # noqa: E731
            pairs = sum(i["pairsForward"] for i in infos)
            fwd, bwd = span("forward"), span("backward")
            res = {
                "forward_ms": fwd,
                "backward_ms": bwd,
                "forward_mfu": 4.0 * pairs * plan.q_heads * plan.head_dim / (world * PEAK * 1e12 * fwd / 1e3),
                "backward_mfu": 10.0 * pairs * plan.q_heads * plan.head_dim / (world * PEAK * 1e12 * bwd / 1e3),
                "per_rank": [{k: i["iters"][-1][ph][k] for ph in ("forward",) for k in ("wall_ms", "compute_ms", "comm_ms", "bytes_sent")} for i in infos],
            }
            outp = gather_outputs(d, infos, plan.sequences, plan.q_heads, plan.kv_heads, plan.head_dim)
            got = {f: [torch.from_numpy(x).to(DEV) for x in outp[f]] for f in outp}
            key = tuple(plan.sequences.tolist())
            if key not in refs:
                refs[key] = sdpa_ref(whole_inputs(plan, 7), plan.causal, fp32=False)[0]
            res["vs_sdpa_bf16"] = errs(got, refs[key])
            res["pass"] = max(res["vs_sdpa_bf16"].values()) < 1e-2
            out["runs"][name] = res
            log(name, json.dumps({k: v for k, v in res.items() if k != "per_rank"}))
            save()
    R["multigpu"] = out


def summary() -> str:
    lines = [f"FCP GPU script, {R['started']}, torch {torch.__version__}, {R.get('env', {}).get('gpu', DEV)}"]
    e = R.get("env", {})
    if "matmul_bf16_8192_tflops" in e:
        lines.append(f"bf16 matmul 8192^3: {e['matmul_bf16_8192_tflops']:.0f} TFLOP/s; copy {e['copy_gbps_read_plus_write']:.0f} GB/s; kernels {e['kernels_available']}")
    n1 = R.get("numerics_1rank", {})
    for k, r in n1.get("runs", {}).items():
        if "vs_sdpa_bf16" in r:
            lines.append(f"numerics 1 rank kernel {k}: max rel err vs SDPA bf16 {max(r['vs_sdpa_bf16'].values()):.2e}, vs fp32 {max(r['vs_fp32'].values()):.2e} -> {'PASS' if r['pass'] else 'FAIL'}")
    for s, r in R.get("numerics_4rank_one_gpu", {}).items():
        b = r.get("backend")
        if b:
            a = r["attempts"][b]
            lines.append(f"numerics 4 ranks {s} ({b}): max rel err vs SDPA bf16 {max(a['vs_sdpa_bf16'].values()):.2e} -> {'PASS' if r['pass'] else 'FAIL'}")
        else:
            lines.append(f"numerics 4 ranks {s}: {r}")
        ts = r.get("threads_streams", {})
        if "vs_sdpa_bf16" in ts:
            lines.append(f"numerics 4 ranks {s} (threads + CUDA streams, NCCL code path): max rel err vs SDPA bf16 {max(ts['vs_sdpa_bf16'].values()):.2e} -> {'PASS' if ts['pass'] else 'FAIL'}")
    for row in R.get("calibration_dense", []):
        if row["kind"] == "batch":
            lines.append(f"cudnn {'causal' if row['causal'] else 'full  '} {row['lq']:>6} x{row['pairs']:<4} fwd {row['fwd_ms']:8.3f} ms mfu {row['fwd_mfu']:.3f}  bwd {row['bwd_ms']:8.3f} ms mfu {row['bwd_mfu']:.3f}")
    for row in R.get("calibration_mixes", []):
        lines.append(f"varlen mix {row['mix']}: {row['segments']} seqs, fwd mfu {row['fwd_mfu']:.3f}, bwd mfu {row['bwd_mfu']:.3f}")
    w1 = R.get("world1", {})
    if "sdpa_loop" in w1:
        lines.append(f"world1: sdpa loop fwd {w1['sdpa_loop']['forward_ms']:.2f} ms fwd+bwd {w1['sdpa_loop']['fwd_bwd_ms']:.2f} ms; backends "
                     + str({k_: v for k_, v in w1["sdpa_loop"].items() if k_.startswith("forward_ms_")}))
        for k_, r in w1.get("runs", {}).items():
            if "forward_ms" in r:
                lines.append(f"  world1 {k_:14s} fwd {r['forward_ms']:.2f} ms (kernels {r.get('kernel_only_forward_ms') or 0:.2f}) fwd+bwd {r['fwd_bwd_ms']:.2f} ms speedup {r['speedup_forward']:.3f} / {r['speedup_fwd_bwd']:.3f}")
    f3 = lambda x: f"{x:.3f}" if isinstance(x, float) else "-"  # noqa: E731
    lines.append("replay: plan, rank, mode, fwd ms [min-max], fwd MFU, bwd ms [min-max], bwd MFU, kernel share fwd/bwd, peak/live")
    for name, res in R.get("replay", {}).items():
        for r in res.get("runs", []) if isinstance(res, dict) else []:
            if "forward_ms" in r:
                fs, bs, sh = r.get("forward_spread", {}), r.get("backward_spread", {}), r.get("kernel_share") or {}
                lines.append(f"  {name:16s} r{r['rank']:<4} {r.get('mode', ''):6s} {r['forward_ms']:7.1f} [{fs.get('min', 0):.1f}-{fs.get('max', 0):.1f}] {r['forward_mfu']:.3f}"
                             f" {r['backward_ms']:7.1f} [{bs.get('min', 0):.1f}-{bs.get('max', 0):.1f}] {r['backward_mfu']:.3f}"
                             f" {f3(sh.get('forward'))}/{f3(sh.get('backward'))} {f3(r.get('peak_over_live'))}")
    for W, r in R.get("train", {}).get("runs", {}).items():
        c = r.get("check")
        if c and "ratio" in c:
            lines.append(f"train.py W={W} bf16: grad err {c['maxGradRelErr']:.2e} (sdpa {c['sdpa']['maxGradRelErr']:.2e}, ratio {c['ratio']['maxGradRelErr']:.3f}), "
                         f"logits {c['logitRelErr']:.2e} (sdpa {c['sdpa']['logitRelErr']:.2e}, ratio {c['ratio']['logitRelErr']:.3f}), worst param ratio {c['ratio']['worstParam']:.3f}")
        else:
            lines.append(f"train.py W={W}: exit {r.get('exit')} {c or r.get('skipped') or r.get('stderr', '')[-300:]}")
    for name, r in R.get("memory", {}).items():
        if "ranks" in r:
            lines.append(f"memory {name}: measured/estimated MB " + ", ".join(f"r{x['rank']} {x['measured'] / 1e6:.1f}/{x['estimated'] / 1e6:.1f} ({x['relErr']:+.3f})" for x in r["ranks"]))
        else:
            lines.append(f"memory {name}: {r}")
    if "hftest" in R:
        lines.append(f"hf test (python/tests/gpu_test_hf.py): exit {R['hftest']['exit']}; {R['hftest']['stdout'][-300:].strip()} {R['hftest']['stderr'][-300:].strip()}")
    mg = R.get("multigpu", {})
    if "runs" in mg:
        lines.append(f"multi-GPU ({mg['world']} GPUs, NCCL), p2p copy GB/s {mg['bandwidth']}: plan, fwd ms, fwd MFU, bwd ms, bwd MFU, max rel err vs SDPA")
        for name, r in mg["runs"].items():
            if "forward_ms" in r:
                lines.append(f"  {name:24s} {r['forward_ms']:8.1f} {r['forward_mfu']:.3f} {r['backward_ms']:8.1f} {r['backward_mfu']:.3f} {max(r['vs_sdpa_bf16'].values()):.1e}")
            else:
                lines.append(f"  {name:24s} {r}")
    elif mg:
        lines.append(f"multi-GPU: {mg}")
    fz = R.get("fuzz")
    if fz:
        failed = [n for n, r in fz["runs"].items() if "pass" in r and not r["pass"]]
        errored = [n for n, r in fz["runs"].items() if "error" in r]
        lines.append(f"fuzz: {fz.get('ran', 0)} of {fz['plans']} random plans ran, {fz.get('passed', 0)} passed; failed {failed}; errors {errored}")
    if R["errors"]:
        lines.append(f"errors in sections: {list(R['errors'])}")
    return "\n".join(lines)


if __name__ == "__main__":
    if args.manifest:
        make_manifest()
        sys.exit(0)
    env()
    fused_check()
    numerics()
    multirank()
    fuzz_section()
    world1()
    hf_section()
    hftest()
    train()
    memory_section()
    calibrate()
    replay()
    multigpu()
    R["total_s"] = time.time() - T0
    save()
    s = summary()
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(s + "\n")
    print(s)

#!/usr/bin/env python3
"""World 1 on one GPU: FCP's world-1 plan against per-sequence attention loops, and what bounds it.

The batch: scripts/gpu/plans/w1-fcp-longtail-64k.json.gz (longtail, 65,536 tokens, 41 sequences,
longest 12,248; 64 query / 8 K/V heads of 128, bf16). Every variant is timed in interleaved
rounds (each round runs every variant once, order rotated; median over rounds of the median of
`--reps` CUDA-event timings):

  loop-sdpa        F.scaled_dot_product_attention per sequence, outputs concatenated (no grad):
                   what a user writes without CP (issue 17's baseline)
  loop-sdpa-train  the same with inputs that require grad (the forward of a training step: the
                   kernel also writes the LSE the backward needs)
  loop-cudnn-lse / loop-cudnn-nolse / loop-flash   the aten kernels directly, per sequence
  loop-best        per sequence the faster of cuDNN and flash (measured alone first): the best a
                   per-sequence loop of these kernels gets
  varlen-flash     one varlen flash launch over all sequences
  varlen-cudnn     one packed cuDNN launch over all sequences (aten._cudnn_attention_forward with
                   offsets; -expand: K/V heads repeated to the query heads first)
  fcp-copy         FCP's forward as in run 10 (zero-copy off: Q/K/V/O copied in and out)
  fcp              FCP's forward now (zerocopy.py; whole-sequence fusion; launches largest first)
  fcp-planorder    the same with run 10's launch order (kernels.plan_launches: by shape, ascending)
  fcp-cudnn        fcp with every sequence a dense cuDNN launch (kernel cudnn), as the loop
  fcp-nosync       fcp without the host synchronisations around a phase without groups (phase_sync auto)
  loop-sdpa-graph / fcp-graph   the loop / fcp-nosync captured as one CUDA graph and replayed: the GPU
                   time with the host out of the way (a ceiling, not a runtime mode)
and forward + backward of loop-sdpa, fcp-copy, fcp. Then torch.profiler tables (GPU kernels by
total time) of one loop-sdpa forward and one fcp forward. `--smoke`: CPU, a tiny plan.

    python3 scripts/gpu/world1.py --out $OUT [--rounds 7 --reps 5]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from fcp_torch.kernels import Kernels, Launch, rel_err  # noqa: E402
from fcp_torch.plan import plan_from_json, rank_program, read_plan  # noqa: E402
from fcp_torch.runtime import RankRuntime  # noqa: E402
from fcp_torch.timing import time_ms  # noqa: E402

PEAK = 989.0
ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/world1")
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--smoke", action="store_true")
ap.add_argument("--plan", default=os.path.join(ROOT, "scripts", "gpu", "plans", "w1-fcp-longtail-64k.json.gz"))
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
T0 = time.time()
DEV = torch.device("cpu" if args.smoke else "cuda")
DT = torch.float32 if args.smoke else torch.bfloat16
R: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "smoke": args.smoke, "errors": {}}


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def save():
    with open(os.path.join(args.out, "world1.json"), "w") as f:
        json.dump(R, f, indent=1, default=str)


if args.smoke:
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from tests import synth

    plan = plan_from_json(synth.owner_plan([40, 9, 70, 3], 1, 2, "causal", H=4, Hk=2, D=16))
else:
    plan = read_plan(args.plan)
prog = rank_program(plan, 0)
lens = plan.sequences.tolist()
T = int(sum(lens))
H, Hk, D = plan.q_heads, plan.kv_heads, plan.head_dim
scale = 1.0 / math.sqrt(D)
offs = np.concatenate(([0], np.cumsum(lens))).tolist()
g = torch.Generator(device="cpu").manual_seed(4)
q = torch.randn(T, H, D, generator=g).to(DEV, DT)
k = torch.randn(T, Hk, D, generator=g).to(DEV, DT)
v = torch.randn(T, Hk, D, generator=g).to(DEV, DT)
do = torch.randn(T, H, D, generator=g).to(DEV, DT)
pairs = float(sum(x * (x + 1) / 2 for x in lens))
KER = Kernels(DEV, DT, scale)
R["env"] = {"torch": torch.__version__, "kernels": KER.available, "cudnn_gqa": KER.cudnn_gqa, "kernel_errors": KER.errors}
if DEV.type == "cuda":
    R["env"].update(gpu=torch.cuda.get_device_name(0), cudnn=torch.backends.cudnn.version())
log(json.dumps(R["env"]))


def mfu(ms):
    return 4 * pairs * H * D / (PEAK * 1e12 * ms / 1e3)


def bhsd(x, a, b):
    return x[a:b].transpose(0, 1)[None]


def sdpa_seq(qq, kk, vv, a, b):
    import torch.nn.functional as F

    if args.smoke:
        from fcp_torch.kernels import math_forward

        return math_forward(qq[a:b], kk[a:b], vv[a:b], True, scale)[0].to(qq.dtype)
    return F.scaled_dot_product_attention(bhsd(qq, a, b), bhsd(kk, a, b), bhsd(vv, a, b), is_causal=True, enable_gqa=True)[0].transpose(0, 1)


def loop_sdpa(qq=q, kk=k, vv=v):
    return torch.cat([sdpa_seq(qq, kk, vv, offs[s], offs[s + 1]) for s in range(len(lens))])


qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))


def loop_sdpa_train():
    with torch.enable_grad():
        return loop_sdpa(qg, kg, vg)


def loop_sdpa_fb():
    qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
    loop_sdpa(qq, kk, vv).backward(do)
    return qq.grad


def solo(kernel, a, b):
    L = Launch(kernel, True, None, None, np.array([b - a]), np.array([b - a]), batch=1)
    if kernel == "flash":
        L.cu_q = L.cu_k = torch.tensor([0, b - a], dtype=torch.int32, device=DEV)
    return L


SOLO = {kn: [solo(kn, offs[s], offs[s + 1]) for s in range(len(lens))] for kn in ("cudnn", "flash")}


def cudnn_seq(a, b, lse):
    qd, kd, vd = (x[a:b].view(1, b - a, x.shape[1], D).transpose(1, 2) for x in (q, k, v))
    return torch.ops.aten._scaled_dot_product_cudnn_attention(qd, kd, vd, None, lse, 0.0, True, False, scale=scale)[0]


def loop_cudnn(lse):
    return torch.cat([cudnn_seq(offs[s], offs[s + 1], lse)[0].transpose(0, 1) for s in range(len(lens))])


gpu = DEV.type == "cuda"


def kernel_loop(choice):
    outs = []
    for s, kn in enumerate(choice):
        a, b = offs[s], offs[s + 1]
        outs.append(KER.forward(SOLO[kn][s], q[a:b], k[a:b], v[a:b])[0])
    return torch.cat(outs)


def varlen_flash():
    L = Launch("flash", True, None, None, np.array(lens), np.array(lens))
    L.cu_q = L.cu_k = torch.tensor(offs, dtype=torch.int32, device=DEV)
    return KER.forward(L, q, k, v)[0]


CU = torch.tensor(offs, dtype=torch.int32, device=DEV)


def varlen_cudnn(expand=False, raw=False):
    """One packed (THD) cuDNN launch over every sequence: aten._cudnn_attention_forward with cumulative
    offsets (the kernel torch.nn.attention.varlen uses); `expand`: K/V heads repeated to H first."""
    kk, vv = (x.repeat_interleave(H // Hk, dim=1) if expand else x for x in (k, v))
    res = torch.ops.aten._cudnn_attention_forward(q, kk, vv, None, CU, CU, max(lens), max(lens), True, 0.0, True, False, scale=scale)
    return res if raw else res[0]


variants = {"loop-sdpa": loop_sdpa, "loop-sdpa-train": loop_sdpa_train}
if gpu:
    for name, fn in (("varlen-cudnn", varlen_cudnn), ("varlen-cudnn-expand", lambda: varlen_cudnn(True))):
        try:
            res_ = varlen_cudnn(name.endswith("expand"), raw=True)
            torch.cuda.synchronize()
            R.setdefault("varlen_cudnn_shapes", {})[name] = [[list(t.shape), list(t.stride())] for t in res_[:2]]
            variants[name] = fn
        except Exception as e:  # noqa: BLE001 - this torch may not have it, or not with GQA
            R["errors"][name] = f"{type(e).__name__}: {e}"[:400]
            torch.cuda.synchronize()
fb = {"loop-sdpa": loop_sdpa_fb}
if gpu and KER.available.get("cudnn"):
    variants["loop-cudnn-lse"] = lambda: loop_cudnn(True)
    variants["loop-cudnn-nolse"] = lambda: loop_cudnn(False)
if gpu and KER.available.get("flash"):
    variants["loop-flash"] = lambda: kernel_loop(["flash"] * len(lens))
    variants["varlen-flash"] = varlen_flash
# per sequence alone: cuDNN vs flash (the loop-best choice and the per-sequence ceiling)
per_seq = []
if gpu and KER.available.get("cudnn") and KER.available.get("flash"):
    for s in range(len(lens)):
        a, b = offs[s], offs[s + 1]
        row = {"len": lens[s]}
        for kn in ("cudnn", "flash"):
            row[kn] = float(np.median(time_ms(lambda: KER.forward(SOLO[kn][s], q[a:b], k[a:b], v[a:b]), DEV, reps=7, warmup=2)))
        per_seq.append(row)
    choice = ["cudnn" if r["cudnn"] <= r["flash"] else "flash" for r in per_seq]
    variants["loop-best"] = lambda: kernel_loop(choice)
    R["per_sequence"] = per_seq
    R["per_sequence_sum_ms"] = {kn: sum(r[kn] for r in per_seq) for kn in ("cudnn", "flash")}
    R["per_sequence_sum_ms"]["best"] = sum(min(r["cudnn"], r["flash"]) for r in per_seq)
    log("per sequence sums", R["per_sequence_sum_ms"])

kern = "auto" if gpu else "math"
rts = {
    "fcp-copy": RankRuntime(prog, None, DEV, DT, kern, zero_copy=False, launch_order="plan"),
    "fcp": RankRuntime(prog, None, DEV, DT, kern),
}
rts["fcp-planorder"] = RankRuntime(prog, None, DEV, DT, kern, launch_order="plan")
rts["fcp-nosync"] = RankRuntime(prog, None, DEV, DT, kern, phase_sync="auto")
if gpu and KER.available.get("cudnn"):
    rts["fcp-cudnn"] = RankRuntime(prog, None, DEV, DT, "cudnn")
for name, rt in list(rts.items()):
    rt.prepare()
    variants[name] = (lambda rt_: lambda: rt_.forward(q, k, v))(rt)

    def fcp_fb(rt_=rt):
        o, st = rt_.forward_with_state(q, k, v)
        return rt_.backward(do, st)

    fb[name] = fcp_fb
    R.setdefault("fcp", {})[name] = {"launches": None, "zero_copy": str(rt.__dict__.get("_zc"))}



def graphed(fn):
    """fn captured once as a CUDA graph (same inputs every replay): the time without host work."""
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(st)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        out = fn()
    box = [out]

    def replay():
        gr.replay()
        return box[0]

    return replay


if gpu:  # ceilings: the GPU time of the loop and of FCP's forward once the host is out of the way
    for name, fn in (("loop-sdpa-graph", loop_sdpa), ("fcp-graph", lambda: rts["fcp-nosync"].forward(q, k, v))):
        try:
            variants[name] = graphed(fn)
        except Exception as e:  # noqa: BLE001 - capture may not work for a path; record why
            R["errors"][name] = f"{type(e).__name__}: {e}"[:400]
            torch.cuda.synchronize()
ref = loop_sdpa().float()
R["o_rel_err_vs_loop"] = {}
for name, fn in variants.items():
    try:
        R["o_rel_err_vs_loop"][name] = rel_err(fn().float(), ref)
    except Exception as e:  # noqa: BLE001 - a variant that fails is a result too
        R["errors"][name] = f"{type(e).__name__}: {e}"[:400]
for name in R["errors"]:
    variants.pop(name, None)
for name, rt in rts.items():
    R["fcp"][name]["launches"] = rt.stats["forward"].launch_kinds
    R["fcp"][name]["zero_copy"] = str(rt.__dict__.get("_zc"))
log("errors vs loop", json.dumps(R["o_rel_err_vs_loop"]))
save()


def rounds(fns: dict, n: int, reps: int) -> dict:
    names = list(fns)
    for f in fns.values():  # warm-up: cuDNN graphs, Triton
        f()
        f()
    per = {x: [] for x in names}
    for r in range(n):
        order = names[r % len(names):] + names[: r % len(names)]
        for x in order:
            per[x].append(float(np.median(time_ms(fns[x], DEV, reps=reps, warmup=1))))
    return {x: {"ms": float(np.median(v)), "min": min(v), "max": max(v)} for x, v in per.items()}


R["forward"] = rounds(variants, args.rounds, args.reps)
base = R["forward"]["loop-sdpa"]["ms"]
for x, r in R["forward"].items():
    r["mfu"] = mfu(r["ms"])
    r["vs_loop"] = base / r["ms"]
save()
log("forward", json.dumps({x: round(r["ms"], 3) for x, r in R["forward"].items()}))
R["fwd_bwd"] = rounds(fb, max(3, args.rounds // 2), 3)
bb = R["fwd_bwd"]["loop-sdpa"]["ms"]
for r in R["fwd_bwd"].values():
    r["vs_loop"] = bb / r["ms"]
save()
log("fwd+bwd", json.dumps({x: round(r["ms"], 3) for x, r in R["fwd_bwd"].items()}))

# kernel-only forward of the FCP runtimes: CUDA events around each kernel call of one forward
if gpu:
    for name, rt in rts.items():
        kf, evs = rt.kernels.forward, []

        def timed(L, *a_, kf=kf, evs=evs, **kw):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            out_ = kf(L, *a_, **kw)
            e1.record()
            evs.append((e0, e1))
            return out_

        rt.kernels.forward = timed
        ks = []
        for _ in range(5):
            evs.clear()
            rt.forward(q, k, v)
            torch.cuda.synchronize()
            ks.append(sum(a_.elapsed_time(b_) for a_, b_ in evs))
        rt.kernels.forward = kf
        R["fcp"][name]["kernel_only_forward_ms"] = float(np.median(ks))
    save()

    # torch.profiler: GPU kernels by total time, one forward each
    from torch.profiler import ProfilerActivity, profile

    R["profile"] = {}
    for name, fn in (("loop-sdpa", loop_sdpa), ("fcp", variants["fcp"]), ("fcp-nosync", variants["fcp-nosync"]), ("fcp-copy", variants["fcp-copy"])):
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            fn()
            torch.cuda.synchronize()
        rows, cpu = [], []
        for e in prof.key_averages():
            dt_ = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
            if dt_ > 0:
                rows.append((dt_, e.count, e.key[:110]))
            cpu.append((e.self_cpu_time_total, e.count, e.key[:110]))
        rows.sort(reverse=True)
        cpu.sort(reverse=True)
        R["profile"][name] = [{"us": float(a), "count": int(c), "name": n} for a, c, n in rows[:14]]
        R["profile"][name + "_total_us"] = float(sum(a for a, _, _ in rows))
        R["profile"][name + "_cpu"] = [{"us": float(a), "count": int(c), "name": n} for a, c, n in cpu[:16]]
        R["profile"][name + "_cpu_total_us"] = float(sum(a for a, _, _ in cpu))
    save()

lines = [f"world1: {len(lens)} sequences, {T} tokens, longest {max(lens)}"]
for x, r in R["forward"].items():
    lines.append(f"  fwd {x:18s} {r['ms']:7.2f} ms ({r['min']:.2f}-{r['max']:.2f}) mfu {r['mfu']:.3f} vs loop {r['vs_loop']:.3f} err {R['o_rel_err_vs_loop'].get(x, 0):.1e}")
for x, r in R["fwd_bwd"].items():
    lines.append(f"  f+b {x:18s} {r['ms']:7.2f} ms ({r['min']:.2f}-{r['max']:.2f}) vs loop {r['vs_loop']:.3f}")
for x, r in R.get("fcp", {}).items():
    lines.append(f"  {x}: kernels {r.get('kernel_only_forward_ms')} launches {r['launches']} {r['zero_copy']}")
if "per_sequence_sum_ms" in R:
    lines.append(f"  per-sequence sums (alone): {json.dumps({a: round(b, 3) for a, b in R['per_sequence_sum_ms'].items()})}")
for name in ("loop-sdpa", "fcp"):
    for row in R.get("profile", {}).get(name, [])[:4]:
        lines.append(f"  prof {name:10s} {row['us']:9.1f} us x{row['count']:3d} {row['name']}")
    lines.append(f"  prof {name:10s} host (self CPU) total {R.get('profile', {}).get(name + '_cpu_total_us', 0):.0f} us; top:")
    for row in R.get("profile", {}).get(name + "_cpu", [])[:8]:
        lines.append(f"    cpu {row['us']:9.1f} us x{row['count']:3d} {row['name']}")
R["summary"] = "\n".join(lines)
save()
print(R["summary"], flush=True)

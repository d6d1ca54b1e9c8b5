"""Measured peak memory of each rank against fcp_torch.memory's estimate (CPU, gloo, math kernel).

    /usr/bin/python3 -m tests.measure_memory --plan plan.json --layers 3     (cwd: python/)

W = plan.world processes; each builds one FcpAttention, runs one untimed forward + backward of
`--layers` calls (caches, gloo buffers), then measures the same again: the rise of its resident set
(VmHWM after resetting it through /proc/self/clear_refs, minus VmRSS before; glibc's malloc_trim
first returns the free heap pages of the warm-up; glibc's mmap threshold is fixed at 1 MiB, so every
large tensor is its own mapping, returned on free, and the rise follows live memory). Prints one JSON line: per rank the measured and estimated bytes.

`--device cuda` (the GPU machine; scripts/gpu/h200.py section `memory`): every process on GPU
rank % device_count, the group gloo (messages through host copies), GPU kernels (`--kernel`), and
the measurement is `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats` minus
`memory_allocated` before, against the estimate's `gpu` kernel model.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def worker(a) -> None:
    import ctypes

    import torch
    import torch.distributed as dist

    from fcp_torch.autograd import FcpAttention
    from fcp_torch.memory import rank_memory
    from fcp_torch.plan import read_plan

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    plan = read_plan(a.plan)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dt = getattr(torch, a.dtype)
    cuda = a.device == "cuda"
    dev = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    att = FcpAttention.from_plan(plan, rank=rank, dtype=dt, device=str(dev), kernel=a.kernel if cuda else "auto")
    att.runtime.prepare()
    U = att.runtime.prog.user_tokens
    H, Hk, D = plan.q_heads, plan.kv_heads, plan.head_dim
    g = torch.Generator().manual_seed(rank)
    # Inputs of every layer exist before the measurement (a model has them as activations); one
    # scalar leaf takes every gradient, so no per-layer .grad is left behind.
    x = torch.ones(1, requires_grad=True, device=dev)
    data = [tuple(torch.randn(U, h, D, generator=g).to(dev, dt) for h in (H, Hk, Hk)) for _ in range(a.layers)]
    ins = [tuple(t * x.to(dt) for t in qkv) for qkv in data]

    def step() -> None:
        total = None
        for q, k, v in ins:
            s = att(q, k, v).float().sum()
            total = s if total is None else total + s
        total.backward(retain_graph=True)  # the inputs' graph is kept for the next step
        x.grad = None

    step()
    dist.barrier()
    if cuda:
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        step()
        torch.cuda.synchronize(dev)
        peak = torch.cuda.max_memory_allocated(dev) - before
    else:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages leave the resident set
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status("VmRSS")
        step()
        peak = _status("VmHWM") - before
    # CUDA tensors in a gloo group travel through host copies (comm.StagedComm): messages on the host
    messages = "host" if cuda and world > 1 else "device"
    est = rank_memory(plan, rank, a.dtype, "gpu" if cuda and a.kernel != "math" else "math", a.layers, messages)
    res = [None] * world
    dist.all_gather_object(res, {"rank": rank, "measured": peak, "estimated": est["peak"], "detail": est})
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def launch(a) -> dict:
    from fcp_torch.launch import free_port
    from fcp_torch.plan import read_plan

    plan = read_plan(a.plan)
    out = os.path.join(tempfile.mkdtemp(prefix="fcp-mem-"), "mem.json")
    port = free_port()
    procs = []
    for r in range(plan.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(plan.world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("OMP_NUM_THREADS", "1")
        # A fixed mmap threshold: every tensor of 1 MiB or more is its own mapping, returned on free.
        env["MALLOC_MMAP_THRESHOLD_"] = "1048576"
        cmd = [sys.executable, "-m", "tests.measure_memory", "--worker", "--plan", a.plan, "--out", out]
        cmd += ["--layers", str(a.layers), "--dtype", a.dtype, "--device", a.device, "--kernel", a.kernel]
        procs.append(subprocess.Popen(cmd, env=env))
    try:
        codes = [p.wait(timeout=a.timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        raise SystemExit(f"a worker failed: exit codes {codes}")
    with open(out) as f:
        ranks = json.load(f)
    for r in ranks:
        r["relErr"] = (r["estimated"] - r["measured"]) / r["measured"]
    return {"world": plan.world, "layers": a.layers, "dtype": a.dtype, "device": a.device, "kernel": a.kernel, "ranks": ranks}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tests.measure_memory")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--kernel", default="auto", help="with --device cuda: the attention kernel policy")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.worker:
        worker(a)
    else:
        print(json.dumps(launch(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

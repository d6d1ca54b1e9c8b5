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
`memory_allocated` before (what the runtime kept from the warm-up let go first), against the
estimate's `gpu` kernel model; the inputs are leaves whose gradients are dropped on arrival, and
`phases` gives the peak of each layer's forward and backward (docs/gpu.md, "Memory estimate").
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _release(torch, dev, att) -> int:
    """Drops what the runtime keeps between calls (the last phase's buffers); returns the bytes."""
    import gc

    torch.cuda.synchronize(dev)
    a = torch.cuda.memory_allocated(dev)
    rt = att.runtime
    rt._bufs, rt._keep, rt._pending = None, [], None
    gc.collect()
    torch.cuda.synchronize(dev)
    return a - torch.cuda.memory_allocated(dev)


def _phases(torch, dev, att, ins, x, dt) -> dict:
    """The same step again in phases (CUDA): all layers' forwards, then each layer's backward on its
    own, last layer first (as autograd runs them), with reset_peak_memory_stats before each phase.
    Bytes relative to memory_allocated before the forwards: `peak` the phase's max_memory_allocated,
    `live` memory_allocated after it."""
    def mark(name: str, out: dict) -> None:
        torch.cuda.synchronize(dev)
        out[name] = {"peak": torch.cuda.max_memory_allocated(dev) - base, "live": torch.cuda.memory_allocated(dev) - base}
        torch.cuda.reset_peak_memory_stats(dev)

    res: dict = {}
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    outs = []
    for i, (q, k, v) in enumerate(ins):
        outs.append(att(q, k, v).float().sum())
        mark(f"forward{i}", res)
    for i in reversed(range(len(outs))):
        outs[i].backward(retain_graph=x.requires_grad and ins[0][0].grad_fn is not None)
        mark(f"backward{i}", res)
    x.grad = None
    del outs
    return res


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
    # CUDA (torch >= 2.1): every input a leaf whose gradient is dropped as soon as it arrives, as a
    # model's projection backward consumes dq/dk/dv at once. Through `t * x` (the CPU path), autograd
    # runs the inputs' mul nodes (the oldest) last, so every layer's dq/dk/dv waited in their input
    # buffers until the last attention backward (433 MB of run 8's 3086 on num-fcp-1).
    leaves = cuda and hasattr(torch.Tensor, "register_post_accumulate_grad_hook")
    if leaves:
        ins = [tuple(t.requires_grad_() for t in qkv) for qkv in data]
        for qkv in ins:
            for t in qkv:
                t.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
    else:
        ins = [tuple(t * x.to(dt) for t in qkv) for qkv in data]

    def step() -> None:
        total = None
        for q, k, v in ins:
            s = att(q, k, v).float().sum()
            total = s if total is None else total + s
        total.backward(retain_graph=not leaves)  # the inputs' graph is kept for the next step
        x.grad = None

    step()
    dist.barrier()
    if cuda:

        def peak_of_step() -> int:
            # bytes allocated above what was held when the step began, at the step's peak
            torch.cuda.reset_peak_memory_stats(dev)
            before = torch.cuda.memory_allocated(dev)
            step()
            torch.cuda.synchronize(dev)
            return torch.cuda.max_memory_allocated(dev) - before

        # run 7's protocol: `before` still holds what the runtime kept from the last step
        torch.cuda.synchronize(dev)
        peak_warm = peak_of_step()
        # the measurement: the runtime's buffers of the last phase (RankRuntime._bufs, which also
        # holds that call's Q/Ofinal/LSE) are let go first, so `before` is the inputs alone and the
        # peak counts every byte the attention has while it runs, as the estimate does
        held = _release(torch, dev, att)
        peak = peak_of_step()
        held_after = _release(torch, dev, att)
        phases = _phases(torch, dev, att, ins, x, dt)
        phases["warmProtocol"] = {"peak": peak_warm, "heldBefore": held, "heldAfter": held_after}
    else:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages leave the resident set
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status("VmRSS")
        step()
        peak = _status("VmHWM") - before
        phases = None
    # CUDA tensors in a gloo group travel through host copies (comm.StagedComm): messages on the host
    messages = "host" if cuda and world > 1 else "device"
    est = rank_memory(plan, rank, a.dtype, "gpu" if cuda and a.kernel != "math" else "math", a.layers, messages)
    res = [None] * world
    dist.all_gather_object(res, {"rank": rank, "measured": peak, "estimated": est["peak"], "detail": est, "phases": phases})
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def launch(a) -> dict:
    from fcp_torch.launch import spawn_ranks
    from fcp_torch.plan import read_plan

    plan = read_plan(a.plan)
    out = os.path.join(tempfile.mkdtemp(prefix="fcp-mem-"), "mem.json")
    cmd = [sys.executable, "-m", "tests.measure_memory", "--worker", "--plan", a.plan, "--out", out]
    cmd += ["--layers", str(a.layers), "--dtype", a.dtype, "--device", a.device, "--kernel", a.kernel]
    env = {
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        # A fixed mmap threshold: every tensor of 1 MiB or more is its own mapping, returned on free.
        "MALLOC_MMAP_THRESHOLD_": "1048576",
    }
    codes = spawn_ranks(cmd, plan.world, env, a.timeout).codes
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

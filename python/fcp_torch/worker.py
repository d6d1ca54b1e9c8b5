"""One process of a plan run: `python -m fcp_torch.worker --plan P --out DIR ...`.

Started N times by `fcp run --backend torch` (or torchrun) with RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT (and LOCAL_RANK) in the environment. Errors a user can act on are printed as one line
`FCP_ERROR {"code": ..., "message": ...}` on stderr and exit with status 3.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback

# NVLink multicast stays off in every process we start (shared hosts; see docs/gpu.md).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

EXIT_PARENT_GONE = 4


def watch_parent() -> None:
    """Ends this worker when the launcher that started it is gone (issue 11 item 11).

    Our launchers (src/executors/torch/launch.ts, fcp_torch.launch) set FCP_PARENT_PID and give the
    worker a stdin pipe they never write to. Three guards, so that no path leaves a worker behind:
    the parent-death signal (Linux prctl; the kernel kills us even while a collective holds the
    GIL), a check that the parent did not die before that was set, and a thread that exits when
    stdin reaches EOF (the pipe closes with the parent, on any OS). torchrun sets none of this.
    """
    ppid = os.environ.get("FCP_PARENT_PID")
    if not ppid:
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if str(os.getppid()) != ppid:
        os._exit(EXIT_PARENT_GONE)
    if os.environ.get("FCP_WATCH_STDIN") == "1":
        import threading

        def wait_eof() -> None:
            try:
                while os.read(0, 65536):
                    pass
            except OSError:
                pass
            os._exit(EXIT_PARENT_GONE)

        threading.Thread(target=wait_eof, name="fcp-parent-watch", daemon=True).start()


watch_parent()  # before importing torch: that alone takes seconds

import numpy as np  # noqa: E402
import torch  # noqa: E402

from .check import check_plan  # noqa: E402
from .plan import PlanError, rank_program, read_plan  # noqa: E402

EXIT_USER = 3


def fail(code: str, message: str) -> None:
    sys.stderr.write("FCP_ERROR " + json.dumps({"code": code, "message": message}) + "\n")
    sys.stderr.flush()
    os._exit(EXIT_USER)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="fcp_torch.worker")
    ap.add_argument("--plan", required=True, action="append", help="plan file (repeat to run several plans in one launch)")
    ap.add_argument("--out", required=True, help="output folder (rank{r}.json, rank{r}.bin; with several plans, one subfolder per plan index)")
    ap.add_argument("--inputs", action="append", help="input file written by the TypeScript executor (one per --plan)")
    ap.add_argument("--seed", type=int, default=1, help="seed of generated inputs (without --inputs)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl", "gloo-staged"))
    ap.add_argument("--kernel", default="auto", choices=("auto", "math", "flash", "cudnn"))
    ap.add_argument("--mode", default=None, choices=("br", "square"))
    ap.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--no-outputs", action="store_true", help="do not write rank{r}.bin")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("FCP_TIMEOUT", "60")))
    return ap.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    plans = []
    for path in a.plan:
        try:
            plan = read_plan(path)
            # Every rank checks the whole plan before the process group exists: all refuse together.
            check_plan(plan)
        except PlanError as e:
            fail(e.code, e.message)
        if plan.world != world:
            fail(
                "run.nproc",
                f"the plan {os.path.basename(path)} is for {plan.world} ranks but {world} processes were started; "
                f"use --nproc {plan.world}",
            )
        plans.append(plan)
    if a.inputs and len(a.inputs) != len(plans):
        fail("run.inputs", f"{len(plans)} plans but {len(a.inputs)} input files")
    if a.device == "cuda" and not torch.cuda.is_available():
        fail("run.noCuda", "CUDA was requested but torch sees no CUDA device; use --device cpu")
    if a.device == "cuda":
        ndev = torch.cuda.device_count()
        device = torch.device("cuda", local_rank % ndev)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dtype = getattr(torch, a.dtype) if a.dtype else (torch.bfloat16 if a.device == "cuda" else torch.float32)
    backend = a.backend
    if backend == "auto":
        if a.device == "cpu":
            backend = "gloo"
        else:
            local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
            backend = "nccl" if torch.cuda.device_count() >= local_world else "gloo-staged"
    if a.device == "cpu" and backend != "gloo":
        fail("run.backend", f"backend {backend} needs --device cuda")
    comm = None
    if world > 1:
        import torch.distributed as dist

        from .comm import DistComm, StagedComm

        pg_backend = "gloo" if backend.startswith("gloo") else "nccl"
        kw = {"timeout": datetime.timedelta(seconds=a.timeout)}
        if pg_backend == "nccl":
            kw["device_id"] = device
        try:
            dist.init_process_group(pg_backend, rank=rank, world_size=world, **kw)
        except TypeError:
            kw.pop("device_id", None)
            dist.init_process_group(pg_backend, rank=rank, world_size=world, **kw)
        comm = StagedComm(rank, world, device) if backend == "gloo-staged" else DistComm(rank, world, device)
    for i, plan in enumerate(plans):
        out_dir = a.out if len(plans) == 1 else os.path.join(a.out, str(i))
        inputs = a.inputs[i] if a.inputs else None
        run_plan(a, plan, inputs, out_dir, comm, rank, world, device, dtype, backend)
    if comm is not None:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return 0


def _inject_fault(rank: int) -> None:
    """Test hook: FCP_TORCH_FAULT="RANK:exit|hang|raise" makes that rank die, stall or fail here,
    after the process group is up and before the first transfer (the others then wait on it)."""
    spec = os.environ.get("FCP_TORCH_FAULT", "")
    if not spec:
        return
    who, _, what = spec.partition(":")
    if int(who) != rank:
        return
    if what == "exit":
        os._exit(9)
    if what == "hang":
        time.sleep(3600)
    if what == "raise":
        raise RuntimeError("injected fault")


def run_plan(a, plan, inputs_path, out_dir, comm, rank, world, device, dtype, backend) -> None:
    """Runs one plan (warm-up and timed iterations) and writes this rank's outputs and timings."""
    from .runtime import RankRuntime

    try:
        prog = rank_program(plan, rank)
        rt = RankRuntime(prog, comm, device, dtype, a.kernel, a.mode)
        prep_s = rt.prepare()
    except PlanError as e:
        fail(e.code, e.message)
    if inputs_path:
        from .io import read_input_rows

        x = read_input_rows(
            inputs_path, plan.sequences, plan.q_heads, plan.kv_heads, plan.head_dim, prog.user_seq, prog.user_start, prog.user_length
        )
        x = {k: v.to(device, dtype) for k, v in x.items()}
    else:
        from .io import generate_rows

        x = generate_rows(
            a.seed, plan.q_heads, plan.kv_heads, plan.head_dim, prog.user_seq, prog.user_start, prog.user_length, device, dtype
        )
    _inject_fault(rank)
    iters = []
    o = dq = dk = dv = None
    for it in range(a.warmup + a.iters):
        if comm is not None:
            import torch.distributed as dist

            dist.barrier()
        o = rt.forward(x["q"], x["k"], x["v"])
        f = rt.stats["forward"]
        dq, dk, dv = rt.backward(x["dO"])
        b = rt.stats["backward"]
        if it >= a.warmup:
            iters.append({"forward": f.__dict__.copy(), "backward": b.__dict__.copy()})
    info = {
        "rank": rank,
        "world": world,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "backend": backend,
        "kernel": rt.kernel,
        "mode": rt.mode,
        "dtype": str(dtype).replace("torch.", ""),
        "kernelsAvailable": rt.kernels.available,
        "kernelErrors": rt.kernels.errors,
        "prepareMs": prep_s * 1e3,
        "pairsForward": prog.attended_pairs("forward"),
        "pairsBackward": prog.attended_pairs("backward"),
        "userRows": {"seq": prog.user_seq.tolist(), "start": prog.user_start.tolist(), "length": prog.user_length.tolist()},
        "iters": iters,
    }
    if not a.no_outputs:
        from .io import write_outputs

        write_outputs(out_dir, rank, (o, dq, dk, dv), info)
    else:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
            json.dump(info, fh)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PlanError as e:
        fail(e.code, e.message)
    except Exception as e:  # noqa: BLE001 - report, then non-zero exit
        traceback.print_exc()
        sys.stderr.write(f"FCP_FAILED {type(e).__name__}: {e}\n")
        sys.exit(1)

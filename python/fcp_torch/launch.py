"""Starting N worker processes on this machine and collecting their outputs (Python side).

The TypeScript CLI (`fcp run --backend torch`) has its own launcher; this one serves the Python
tests and the GPU script. A failing rank ends every other rank at once.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional

import numpy as np

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LaunchError(RuntimeError):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def run_workers(
    plan_path: str,
    nproc: int,
    out_dir: str,
    args: List[str],
    timeout: float = 300.0,
    python: str = sys.executable,
    env_extra: Optional[Dict[str, str]] = None,
) -> List[dict]:
    """Runs `nproc` workers; returns each rank's info (rank{r}.json). Raises LaunchError on failure."""
    port = free_port()
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    procs = []
    logs = []
    for r in range(nproc):
        env = dict(os.environ)
        env.update(NO_MULTICAST)
        env.update(
            {
                "RANK": str(r),
                "LOCAL_RANK": str(r),
                "WORLD_SIZE": str(nproc),
                "LOCAL_WORLD_SIZE": str(nproc),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "PYTHONPATH": pkg_root + os.pathsep + env.get("PYTHONPATH", ""),
                "PYTHONUNBUFFERED": "1",
                # the worker ends itself when this process is gone (fcp_torch.worker.watch_parent)
                "FCP_PARENT_PID": str(os.getpid()),
                "FCP_WATCH_STDIN": "1",
            }
        )
        if env_extra:
            env.update(env_extra)
        log = open(os.path.join(out_dir, f"rank{r}.log"), "w+") if os.path.isdir(out_dir) else subprocess.DEVNULL
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [python, "-m", "fcp_torch.worker", "--plan", plan_path, "--out", out_dir, *args],
                env=env,
                stdin=subprocess.PIPE,  # never written to: EOF tells the worker we are gone
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.time() + timeout
    failed: Optional[int] = None
    try:
        while True:
            codes = [p.poll() for p in procs]
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c == 0 for c in codes):
                break
            if time.time() > deadline:
                raise LaunchError("run.timeout", f"the run did not finish within {timeout:.0f} s")
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
    if failed is not None:
        text = ""
        lg = logs[failed]
        if hasattr(lg, "seek"):
            lg.seek(0)
            text = lg.read()
        for line in text.splitlines():
            if line.startswith("FCP_ERROR "):
                e = json.loads(line[len("FCP_ERROR ") :])
                raise LaunchError(e["code"], e["message"])
        raise LaunchError("run.rankFailed", f"rank {failed} exited with status {procs[failed].returncode}: {text[-2000:]}")
    for lg in logs:
        if hasattr(lg, "close"):
            lg.close()
    infos = []
    for r in range(nproc):
        with open(os.path.join(out_dir, f"rank{r}.json")) as f:
            infos.append(json.load(f))
    return infos


def gather_outputs(out_dir: str, infos: List[dict], sequences, H: int, Hk: int, D: int) -> Dict[str, List[np.ndarray]]:
    """Assembles per-sequence outputs (o, dq, dk, dv) from every rank's rank{r}.bin."""
    res = {f: [np.full((int(L), H if f in ("o", "dq") else Hk, D), np.nan, np.float32) for L in sequences] for f in ("o", "dq", "dk", "dv")}
    for info in infos:
        rows = info["userRows"]
        U = int(sum(rows["length"]))
        data = np.fromfile(os.path.join(out_dir, f"rank{info['rank']}.bin"), dtype="<f4")
        off = 0
        for f in ("o", "dq", "dk", "dv"):
            h = H if f in ("o", "dq") else Hk
            block = data[off : off + U * h * D].reshape(U, h, D)
            off += U * h * D
            pos = 0
            for s, a, n in zip(rows["seq"], rows["start"], rows["length"]):
                res[f][s][a : a + n] = block[pos : pos + n]
                pos += n
    return res

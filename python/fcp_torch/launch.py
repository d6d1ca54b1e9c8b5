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
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Union

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


def rank_env(r: int, n: int, port: int, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of rank `r` of `n` on this machine: ours, NVLink multicast off, the
    torch.distributed rendezvous variables, then `extra`."""
    env = dict(os.environ)
    env.update(NO_MULTICAST)
    env.update(
        {
            "RANK": str(r),
            "LOCAL_RANK": str(r),
            "WORLD_SIZE": str(n),
            "LOCAL_WORLD_SIZE": str(n),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    if extra:
        env.update(extra)
    return env


class SpawnResult(NamedTuple):
    codes: List[int]  # exit status per rank (a rank ended by us: its kill status)
    failed: Optional[int]  # the first rank seen exiting with a non-zero status, None if all exited 0


def spawn_ranks(
    cmd: Union[Sequence[str], Callable[[int], Sequence[str]]],
    n: int,
    env: Optional[Dict[str, str]] = None,
    timeout: float = 300.0,
    stdout: Optional[Callable[[int], object]] = None,
    stdin_pipe: bool = False,
    cwd: Optional[str] = None,
) -> SpawnResult:
    """Starts `n` ranks of `cmd` (one command for all, or `cmd(rank)`) with `rank_env` plus `env`
    and waits for them. The first rank that fails ends every other rank at once (none is left
    waiting in a receive from a dead peer); past `timeout` seconds all are ended and LaunchError
    `run.timeout` is raised. `stdout(rank)`: a file for the rank's output (default: ours);
    `stdin_pipe`: give each rank a pipe it can watch for EOF (fcp_torch.worker.watch_parent).
    Used by run_workers, examples/train.py and tests/measure_memory.py."""
    port = free_port()
    procs: List[subprocess.Popen] = []
    try:
        for r in range(n):
            c = list(cmd(r) if callable(cmd) else cmd)
            procs.append(
                subprocess.Popen(
                    c,
                    env=rank_env(r, n, port, env),
                    stdin=subprocess.PIPE if stdin_pipe else None,  # never written to: EOF = we are gone
                    stdout=stdout(r) if stdout else None,
                    stderr=subprocess.STDOUT if stdout else None,
                    cwd=cwd,
                )
            )
        deadline = time.time() + timeout
        failed: Optional[int] = None
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
    return SpawnResult([p.returncode for p in procs], failed)


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
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    extra = {
        "PYTHONPATH": pkg_root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONUNBUFFERED": "1",
        # the worker ends itself when this process is gone (fcp_torch.worker.watch_parent)
        "FCP_PARENT_PID": str(os.getpid()),
        "FCP_WATCH_STDIN": "1",
        **(env_extra or {}),
    }
    logs: List = []

    def log_of(r: int):
        lg = open(os.path.join(out_dir, f"rank{r}.log"), "w+") if os.path.isdir(out_dir) else subprocess.DEVNULL
        logs.append(lg)
        return lg

    cmd = [python, "-m", "fcp_torch.worker", "--plan", plan_path, "--out", out_dir, *args]
    res = spawn_ranks(cmd, nproc, extra, timeout, stdout=log_of, stdin_pipe=True)
    failed = res.failed
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
        raise LaunchError("run.rankFailed", f"rank {failed} exited with status {res.codes[failed]}: {text[-2000:]}")
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

"""Running every rank of a plan inside one process (one thread per rank, messages through queues).

Not a production path: it exists so that tests and tools can execute multi-rank plans without
starting processes. Each rank runs the same :class:`RankRuntime` as in a real run.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Optional

import torch

from .check import check_plan
from .comm import LocalComm, Mailbox, ThreadComm
from .plan import Plan, rank_program
from .runtime import RankRuntime


def run_local(
    plan: Plan,
    inputs: Dict[str, List[torch.Tensor]],
    device="cpu",
    dtype=torch.float32,
    kernel: str = "math",
    mode: Optional[str] = None,
    timeout: float = 60.0,
    streams: bool = False,
    kv_pool: Optional[bool] = None,
) -> Dict[str, List[torch.Tensor]]:
    """Executes `plan` forward and backward with per-sequence inputs {q, k, v, dO}; returns {o, dq, dk, dv}.

    `streams=True` (CUDA): each rank posts its groups from its own communication stream, the code
    path of NCCL runs (stream-ordered completion, compute waiting on events) without NCCL.
    `kv_pool`: RankRuntime's K/V pool (kvpool.py); None: FCP_KV_POOL.
    """
    check_plan(plan)  # before any rank starts: a broken plan must not hang or give wrong outputs
    box = Mailbox(plan.world, timeout)
    results: List[Optional[tuple]] = [None] * plan.world
    errors: List[BaseException] = []

    def rank_main(r: int) -> None:
        try:
            prog = rank_program(plan, r)
            dev = torch.device(device)
            if dev.type == "cuda" and dev.index is None:
                dev = torch.device("cuda", torch.cuda.current_device())
            stream = torch.cuda.Stream(device=dev) if streams else None
            comm = LocalComm() if plan.world == 1 else ThreadComm(r, box, stream)
            rt = RankRuntime(prog, comm, device, dtype, kernel, mode, kv_pool=kv_pool)

            def rows(field: str) -> torch.Tensor:
                parts = [inputs[field][s][a : a + n] for s, a, n in zip(prog.user_seq, prog.user_start, prog.user_length)]
                h = plan.q_heads if field in ("q", "dO") else plan.kv_heads
                return torch.cat(parts) if parts else torch.zeros(0, h, plan.head_dim, device=device)

            if streams:
                torch.cuda.set_device(dev)
            o = rt.forward(rows("q"), rows("k"), rows("v"))
            dq, dk, dv = rt.backward(rows("dO"))
            if streams:
                torch.cuda.synchronize()
            results[r] = (prog, o, dq, dk, dv)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(plan.world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout * 4)
    if errors:
        raise errors[0]
    out: Dict[str, List[torch.Tensor]] = {}
    for f, h in (("o", plan.q_heads), ("dq", plan.q_heads), ("dk", plan.kv_heads), ("dv", plan.kv_heads)):
        out[f] = [torch.full((int(L), h, plan.head_dim), float("nan")) for L in plan.sequences]
    for res in results:
        if res is None:
            raise RuntimeError("a rank did not finish")
        prog, *tensors = res
        for f, t in zip(("o", "dq", "dk", "dv"), tensors):
            pos = 0
            for s, a, n in zip(prog.user_seq.tolist(), prog.user_start.tolist(), prog.user_length.tolist()):
                out[f][s][a : a + n] = t[pos : pos + n].float().cpu()
                pos += n
    return out

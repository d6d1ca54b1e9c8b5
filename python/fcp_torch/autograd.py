"""Drop-in attention for a model: user-layout q, k, v in, user-layout output out, gradients through.

    rt = FcpAttention.from_plan("plan.json", rank=dist.get_rank(), device="cuda")
    o = rt(q, k, v)          # q [U, qHeads, D], k/v [U, kvHeads, D]: this rank's user tokens
    o.sum().backward()       # runs the plan's backward phase

The user tokens of a rank are its userLayout rows sorted by (sequence, start), concatenated.
"""
from __future__ import annotations

from typing import Optional

import torch

from .check import check_plan, check_world
from .plan import Plan, PlanError, rank_program, read_plan
from .runtime import RankRuntime


class _FcpAttentionFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, runtime: RankRuntime):  # type: ignore[override]
        ctx.runtime = runtime
        ctx.dtypes = (q.dtype, k.dtype, v.dtype)
        # The forward state lives with this call (ctx), never on the runtime: layers sharing one
        # FcpAttention each get their own (issue 11 item 1).
        out, ctx.fcp_state = runtime.forward_with_state(q.detach(), k.detach(), v.detach())
        out = out.to(q.dtype)
        # Zero-copy layouts (zerocopy.py): the state may share storage with q, k, v or with `out`
        # itself. Saving them through autograd makes an in-place change before backward an error
        # (version counters) instead of silently wrong gradients.
        ctx.guard = bool(ctx.fcp_state.get("aliased"))
        if ctx.guard:
            ctx.save_for_backward(q, k, v, out)
        return out

    @staticmethod
    def backward(ctx, do):  # type: ignore[override]
        if ctx.guard:
            ctx.saved_tensors  # noqa: B018 - raises if a saved tensor was modified in place
        dq, dk, dv = ctx.runtime.backward(do.contiguous(), ctx.fcp_state)
        tq, tk, tv = ctx.dtypes
        return dq.to(tq), dk.to(tk), dv.to(tv), None


def fcp_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, runtime: RankRuntime) -> torch.Tensor:
    """Attention of this rank's user tokens under the runtime's plan (autograd-aware)."""
    return _FcpAttentionFn.apply(q, k, v, runtime)


class FcpAttention:
    """A callable bound to one plan and rank; build one per batch (each batch has its own plan) and
    call it from every layer: each call keeps its own forward state."""

    def __init__(self, runtime: RankRuntime):
        self.runtime = runtime

    @classmethod
    def from_plan(
        cls,
        plan: "str | Plan",
        rank: Optional[int] = None,
        device: str = "cpu",
        dtype: Optional[torch.dtype] = None,
        kernel: str = "auto",
        comm=None,
        cp_group=None,
        softmax_scale: Optional[float] = None,
        memory_budget: Optional[float] = None,
        memory_layers: int = 1,
    ) -> "FcpAttention":
        """One rank's attention under `plan` (a Plan or a plan file).

        `cp_group`: the context-parallel ProcessGroup the plan runs in (default: the default group
        when torch.distributed is initialised), or a device mesh / (mesh, dim) (comm.resolve_group); plan ranks are ranks inside it, so CP combines with
        data, tensor or pipeline parallelism. `rank` defaults to this process's rank in the group.
        `softmax_scale` defaults to 1/sqrt(headDim). `memory_budget` (bytes per rank): refuse the
        plan with PlanError `run.memory` when any rank's estimated peak for `memory_layers` layers
        (fcp_torch.memory) exceeds it, on every rank alike, before anything is allocated. Every check (the plan's rules, its world
        against the group's size, the rank) runs here, before any collective call.
        """
        from .comm import resolve_group

        cp_group = resolve_group(cp_group)  # a ProcessGroup, a device mesh or (mesh, dim)
        p = read_plan(plan) if isinstance(plan, str) else plan
        # The whole plan is checked on every rank before any collective call (fcp_torch.check).
        check_plan(p)
        if comm is None and (p.world > 1 or cp_group is not None):
            import torch.distributed as dist

            from .comm import DistComm, StagedComm

            if dist.is_available() and dist.is_initialized():
                size = dist.get_world_size(cp_group)
                check_world(p, size, "the CP group" if cp_group is not None else "the default process group")
                me = dist.get_rank(cp_group)
                if rank is not None and rank != me:
                    raise PlanError("run.rank", f"rank {rank} was given but this process is rank {me} of its CP group")
                rank = me
                # gloo moves host tensors only: CUDA tensors of a gloo group (several ranks on one
                # GPU, where NCCL refuses) travel through host copies.
                staged = torch.device(device).type == "cuda" and dist.get_backend(cp_group) == "gloo"
                comm = (StagedComm if staged else DistComm)(rank, p.world, torch.device(device), cp_group)
            elif cp_group is not None:
                raise PlanError("run.noGroup", "a cp_group was given but torch.distributed is not initialised")
        rank = 0 if rank is None else rank
        dt = dtype or (torch.bfloat16 if str(device).startswith("cuda") else torch.float32)
        if memory_budget is not None:
            from .memory import check_memory

            gpu = str(device).startswith("cuda") and kernel != "math"
            check_memory(p, memory_budget, dtype=str(dt).replace("torch.", ""), kernel="gpu" if gpu else "math", layers=memory_layers)
        return cls(RankRuntime(rank_program(p, rank), comm, device, dt, kernel, softmax_scale=softmax_scale))

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return fcp_attention(q, k, v, self.runtime)

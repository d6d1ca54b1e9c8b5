"""Sharding a packed batch across the context-parallel ranks of a plan, and gathering it back.

    sh = fcp_torch.shard(lengths, plan, cp_group=cp)       # plan: Plan, plan file or PlannerClient
    ids, pos = input_ids[sh.index], sh.position_ids        # this rank's user tokens; RoPE positions
    attn = sh.attention()                                   # one FcpAttention for every layer
    ...
    logits_all = fcp_torch.gather(logits, sh)               # packed [T, ...] again (no autograd)

A packed batch is the sequences of `lengths` concatenated in order, T = sum(lengths) tokens (the
layout MagiAttention's dispatch and TransformerEngine's get_batch_on_this_cp_rank start from). The
rank's user tokens are its userLayout rows sorted by (sequence, start), concatenated: the order of
the q/k/v tensors FcpAttention takes. `index` maps them to packed positions, `position_ids` to
positions inside their own sequence.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .check import check_plan, check_world
from .plan import Plan, PlanError, read_plan, user_rows


@dataclass
class Shard:
    """One rank's part of a packed batch under a plan."""

    plan: Plan
    rank: int
    world: int
    group: object
    #: packed-batch positions of this rank's user tokens, in user-layout order (int64)
    index: torch.Tensor
    #: position of each of those tokens inside its own sequence (for RoPE)
    position_ids: torch.Tensor
    #: sequence of each of those tokens
    seq_ids: torch.Tensor

    def take(self, packed: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a packed [T, ...] tensor (autograd flows through)."""
        if packed.shape[0] != int(self.plan.sequences.sum()):
            raise PlanError("run.tokens", f"a packed tensor of {packed.shape[0]} tokens for a batch of {int(self.plan.sequences.sum())}")
        return packed[self.index.to(packed.device)]

    def attention(
        self,
        device: str = "cpu",
        dtype: Optional[torch.dtype] = None,
        kernel: str = "auto",
        softmax_scale: Optional[float] = None,
        memory_budget: Optional[float] = None,
        memory_layers: int = 1,
    ):
        """The FcpAttention of this rank (call it from every layer; each call keeps its own state).
        `memory_budget` (bytes): see FcpAttention.from_plan (`run.memory` before any allocation)."""
        from .autograd import FcpAttention

        return FcpAttention.from_plan(
            self.plan,
            self.rank,
            device,
            dtype,
            kernel,
            cp_group=self.group,
            softmax_scale=softmax_scale,
            memory_budget=memory_budget,
            memory_layers=memory_layers,
        )


def _packed_index(plan: Plan, rank: int):
    seq, start, length = user_rows(plan, rank)
    base = np.concatenate([[0], np.cumsum(plan.sequences)])[:-1]
    n = int(length.sum())
    row = np.repeat(np.arange(len(seq)), length)
    first = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    pos = start[row] + np.arange(n) - first[row] if n else np.zeros(0, np.int64)
    return base[seq[row]] + pos, pos, seq[row]


def shard(batch_lengths: Sequence[int], plan, rank: Optional[int] = None, cp_group=None, **plan_request) -> Shard:
    """This rank's user tokens of a packed batch of `batch_lengths` under `plan`.

    `plan`: a Plan, a plan file, or a PlannerClient (then planned now with `plan_request`, e.g.
    `strategy="fcp", model={...}`, for the CP group's size). `rank` defaults to this process's rank
    in `cp_group` (or 0 without torch.distributed); `cp_group` is a ProcessGroup, a device mesh of
    one dimension or `(mesh, dim)` (duck-typed `get_group`, see comm.resolve_group). Raises PlanError (`run.batch`, `run.world`,
    `run.rank`, a plan rule's code) before any collective call.
    """
    import torch.distributed as dist

    from .comm import resolve_group

    cp_group = resolve_group(cp_group)  # a ProcessGroup, a device mesh or (mesh, dim)
    dist_on = dist.is_available() and dist.is_initialized()
    if cp_group is not None and not dist_on:
        raise PlanError("run.noGroup", "a cp_group was given but torch.distributed is not initialised")
    world = dist.get_world_size(cp_group) if dist_on else None
    lengths = [int(x) for x in batch_lengths]
    if hasattr(plan, "submit") and hasattr(plan, "request"):  # a PlannerClient
        plan = plan.plan(batch=lengths, world=world or 1, **plan_request)
    elif isinstance(plan, str):
        plan = read_plan(plan)
    if not isinstance(plan, Plan):
        raise PlanError("run.plan", f"shard needs a Plan, a plan file or a PlannerClient, not {type(plan).__name__}")
    check_plan(plan)
    if world is not None:
        check_world(plan, world, "the CP group" if cp_group is not None else "the default process group")
        me = dist.get_rank(cp_group)
        if rank is not None and rank != me:
            raise PlanError("run.rank", f"rank {rank} was given but this process is rank {me} of its CP group")
        rank = me
    rank = 0 if rank is None else rank
    if not 0 <= rank < plan.world:
        raise PlanError("run.rank", f"rank {rank} is outside the plan's world of {plan.world}")
    if lengths != plan.sequences.tolist():
        raise PlanError(
            "run.batch",
            f"the batch has {len(lengths)} sequences ({sum(lengths)} tokens) but the plan was made for {len(plan.sequences)} ({int(plan.sequences.sum())} tokens); plan this batch",
        )
    idx, pos, seq = _packed_index(plan, rank)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64))  # noqa: E731
    return Shard(plan, rank, plan.world, cp_group, t(idx), t(pos), t(seq))


def gather(local: torch.Tensor, sh: Shard) -> torch.Tensor:
    """The packed [T, ...] tensor from every rank's user-layout rows (an all-gather in the CP group;
    no autograd). Every rank of the group must call it."""
    T = int(sh.plan.sequences.sum())
    if local.shape[0] != sh.index.numel():
        raise PlanError("run.tokens", f"rank {sh.rank} holds {sh.index.numel()} tokens, not {local.shape[0]}")
    out = local.new_zeros((T, *local.shape[1:]))
    if sh.world == 1:
        out[sh.index.to(local.device)] = local.detach()
        return out
    import torch.distributed as dist

    sizes = [int(user_rows(sh.plan, r)[2].sum()) for r in range(sh.world)]
    n = max(sizes)
    pad = local.new_zeros((n, *local.shape[1:]))
    pad[: local.shape[0]] = local.detach()
    parts = [torch.empty_like(pad) for _ in range(sh.world)]
    dist.all_gather(parts, pad, group=sh.group)
    for r, part in enumerate(parts):
        idx = sh.index if r == sh.rank else torch.from_numpy(_packed_index(sh.plan, r)[0])
        out[idx.to(local.device)] = part[: sizes[r]]
    return out

"""Hugging Face transformers integration: FCP as an attention implementation (`attn_implementation="fcp"`).

transformers (>= 4.48) looks attention functions up by name in `AttentionInterface`; `register()`
adds "fcp". The function attends a packed varlen batch (batch size 1, every sequence of the plan
one after another in the plan's user order, `position_ids` restarting at 0 for each) through the
plan bound with `use_plan` (one per batch; every layer calls the same FcpAttention, each call keeps
its own forward state). The attention mask transformers builds is not used: the plan holds the
sequence boundaries and the causal mask. Usage:

    from fcp_torch import hf
    hf.register()
    model = LlamaForCausalLM(config, attn_implementation="fcp")   # or model.set_attn_implementation
    with hf.use_plan(FcpAttention.from_plan(plan, rank=0, device="cuda", dtype=torch.bfloat16)):
        logits = model(input_ids, position_ids=position_ids).logits
"""
from __future__ import annotations

import contextlib
from typing import Optional

import torch

from .plan import PlanError

_CURRENT = []  # stack of bound FcpAttention objects


@contextlib.contextmanager
def use_plan(attention):
    """Binds an `FcpAttention` for the model calls inside the block."""
    _CURRENT.append(attention)
    try:
        yield attention
    finally:
        _CURRENT.pop()


def fcp_attention_forward(module, query, key, value, attention_mask=None, scaling: Optional[float] = None, dropout: float = 0.0, **kwargs):
    """transformers attention signature: query [1, H, T, D], key/value [1, Hk, T, D] -> ([1, T, H, D], None)."""
    if not _CURRENT:
        raise PlanError("hf.noPlan", "attn_implementation 'fcp' needs a plan: call the model inside fcp_torch.hf.use_plan(...)")
    att = _CURRENT[-1]
    if query.shape[0] != 1:
        raise PlanError("hf.batch", f"fcp attention takes one packed batch (batch size 1), got {query.shape[0]}")
    if dropout:
        raise PlanError("hf.dropout", "fcp attention has no dropout")
    rt = att.runtime
    if scaling is not None and abs(scaling - rt.scale) > 1e-6 * rt.scale:
        raise PlanError("hf.scale", f"softmax scale {scaling} differs from the plan's 1/sqrt(headDim) = {rt.scale}")
    q = query[0].transpose(0, 1)
    k = key[0].transpose(0, 1)
    v = value[0].transpose(0, 1)
    o = att(q.contiguous(), k.contiguous(), v.contiguous())
    return o.unsqueeze(0), None


def register(name: str = "fcp") -> None:
    """Registers the attention function (and an empty mask builder) with transformers."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, fcp_attention_forward)
    try:  # transformers >= 4.53: no dense mask is built for this implementation
        from transformers import AttentionMaskInterface

        AttentionMaskInterface.register(name, lambda *a, **k: None)
    except Exception:  # noqa: BLE001 - older versions: the mask is built and ignored
        pass

"""Unsharded reference attention: each sequence whole, on one device (math kernel or torch SDPA)."""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

import torch

from .kernels import math_backward, math_forward


def reference_sequence(q, k, v, do, causal: bool, dtype=torch.float64) -> Tuple[torch.Tensor, ...]:
    """(o, dq, dk, dv) of one whole sequence, computed by the math kernel in `dtype`."""
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D)
    q, k, v, do = (x.to(dtype) for x in (q, k, v, do))
    o, lse = _math_fwd(q, k, v, causal, scale)
    dq, dk, dv = _math_bwd(q, k, v, o, do, lse, causal, scale)
    return o, dq, dk, dv


def _math_fwd(q, k, v, causal, scale):
    lq, H, D = q.shape
    Hk = k.shape[1]
    g = H // Hk
    s = torch.einsum("ihgd,jhd->hgij", q.reshape(lq, Hk, g, D), k) * scale
    if causal:
        m = torch.ones(lq, k.shape[0], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~m, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse.unsqueeze(-1))
    o = torch.einsum("hgij,jhd->ihgd", p, v).reshape(lq, H, D)
    return o, lse.permute(2, 0, 1).reshape(lq, H)


def _math_bwd(q, k, v, o, do, lse, causal, scale):
    if q.dtype == torch.float32:
        return math_backward(q, k, v, o, do, lse, causal, scale)
    lq, H, D = q.shape
    Hk = k.shape[1]
    g = H // Hk
    qf = q.reshape(lq, Hk, g, D)
    dof = do.reshape(lq, Hk, g, D)
    s = torch.einsum("ihgd,jhd->hgij", qf, k) * scale
    l = lse.reshape(lq, Hk, g).permute(1, 2, 0)
    p = torch.exp(s - l.unsqueeze(-1))
    if causal:
        p = p.masked_fill(~torch.ones(lq, k.shape[0], dtype=torch.bool, device=q.device).tril(), 0.0)
    dv = torch.einsum("hgij,ihgd->jhd", p, dof)
    dp = torch.einsum("ihgd,jhd->hgij", dof, v)
    dr = (dof * o.reshape(lq, Hk, g, D)).sum(-1).permute(1, 2, 0)
    ds = p * (dp - dr.unsqueeze(-1))
    dq = torch.einsum("hgij,jhd->ihgd", ds, k).reshape(lq, H, D) * scale
    dk = torch.einsum("hgij,ihgd->jhd", ds, qf) * scale
    return dq, dk, dv


def sdpa_sequence(q, k, v, do, causal: bool) -> Tuple[torch.Tensor, ...]:
    """(o, dq, dk, dv) of one whole sequence by torch's scaled_dot_product_attention with autograd."""
    H, Hk = q.shape[1], k.shape[1]
    qq = q.detach().transpose(0, 1).unsqueeze(0).requires_grad_(True)
    kk = k.detach().transpose(0, 1).unsqueeze(0).requires_grad_(True)
    vv = v.detach().transpose(0, 1).unsqueeze(0).requires_grad_(True)
    ke, ve = kk, vv
    if Hk != H:
        ke = kk.repeat_interleave(H // Hk, dim=1)
        ve = vv.repeat_interleave(H // Hk, dim=1)
    o = torch.nn.functional.scaled_dot_product_attention(qq, ke, ve, is_causal=causal)
    o.backward(do.transpose(0, 1).unsqueeze(0).to(o.dtype))
    tr = lambda x: x.squeeze(0).transpose(0, 1)  # noqa: E731
    return tr(o.detach()), tr(qq.grad), tr(kk.grad), tr(vv.grad)


def reference_batch(inputs: Dict[str, List[torch.Tensor]], causal: bool, fn=reference_sequence) -> Dict[str, List[torch.Tensor]]:
    """Applies `fn` to every sequence of per-sequence inputs {q, k, v, dO}."""
    res: Dict[str, List[torch.Tensor]] = {"o": [], "dq": [], "dk": [], "dv": []}
    for q, k, v, do in zip(inputs["q"], inputs["k"], inputs["v"], inputs["dO"]):
        o, dq, dk, dv = fn(q, k, v, do, causal)
        res["o"].append(o)
        res["dq"].append(dq)
        res["dk"].append(dk)
        res["dv"].append(dv)
    return res

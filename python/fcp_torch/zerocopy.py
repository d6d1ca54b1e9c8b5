"""Zero-copy buffers: where a rank's user layout *is* its slot layout, the user's tensors are the buffers.

A rank's forward copies the user's Q, K, V into its slot buffers (`qspace`, `kvspace`), writes O
there, copies O back out into the user layout and keeps a copy of its own K/V for the backward. At
world 1 (and for a rank of a `--loader-layout` plan that fetches nothing) the user layout and the
slot layout are the same rows in the same order: every one of those copies moves a whole tensor to
the place it already is. On the H200 that was ~2-3 ms of the world-1 forward's 16 ms (run 10:
1 GB of Q, 1 GB of O twice, K/V twice, 64K tokens, 64 heads of 128).

`plan(rt)` decides once per runtime, from the plan alone, which buffers may alias the caller's
tensors. A buffer may alias only when (a) its slot index is the identity over the whole buffer,
(b) no transfer of the phase writes into it (received rows would land in the caller's tensor), and
(c) the K/V pool is off (pool rows are not slots). Buffers the runtime writes (O, dQ, dK, dV and
their float32 accumulators) never alias inputs; O may *be* the user output only when no `out`
partial is added to it after the phase (then the caller gets the rank's final O itself, which the
backward reads: autograd.py saves it with `save_for_backward`, so an in-place change is caught).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .plan import KIND_IN, KIND_KV, KIND_OUT


@dataclass(frozen=True)
class ZeroCopy:
    """Which buffers alias the caller's tensors (see the module comment)."""

    q: bool = False  # forward Q is the user's q
    kv: bool = False  # forward K/V are the user's k, v
    state_kv: bool = False  # the K/V kept for the backward are the forward's K/V buffers
    out: bool = False  # the user output is the rank's final O (no `out` partial added after the phase)
    do: bool = False  # backward dO is the user's dO
    bwd_kv: bool = False  # backward K/V are the forward state's K/V


def _identity(idx: torch.Tensor, n: int) -> bool:
    a = idx.detach().cpu().numpy()
    return len(a) == n and bool(np.array_equal(a, np.arange(n)))


def _receives(rt, phase: str, kinds) -> bool:
    me = rt.prog.rank
    for g in getattr(rt.prog, phase).groups:
        if bool(((g.dst == me) & np.isin(g.kind, kinds)).any()):
            return True
    return False


def plan(rt) -> ZeroCopy:
    """The runtime's zero-copy decisions, computed once (cached on `rt`). `FCP_ZERO_COPY=0` or
    `rt.zero_copy = False`: none (the copying path, the reference in the tests)."""
    zc = rt.__dict__.get("_zc")
    if zc is not None:
        return zc
    if not getattr(rt, "zero_copy", True) or rt.pool is not None:
        zc = ZeroCopy()
    else:
        nq, nkf, nkb = rt.qspace.size, rt.kvspace["forward"].size, rt.kvspace["backward"].size
        local = rt.local
        q_in = not local and _receives(rt, "forward", (KIND_IN,))
        kv_in = not local and _receives(rt, "forward", (KIND_IN, KIND_KV))
        out_in = not local and _receives(rt, "forward", (KIND_OUT,))
        q_id = _identity(rt.user_q, nq)
        state_kv = _identity(rt.base_kv["forward"], nkf)
        zc = ZeroCopy(
            q=q_id and not q_in,
            kv=_identity(rt.user_kv["forward"], nkf) and not kv_in,
            state_kv=state_kv,
            out=q_id and not out_in,
            do=q_id and not (not local and _receives(rt, "backward", (KIND_IN,))),
            bwd_kv=state_kv and nkb == nkf and _identity(rt.base_kv["backward"], nkb)
            and not (not local and _receives(rt, "backward", (KIND_KV,))),
        )
    rt._zc = zc
    return zc


def as_buffer(x: torch.Tensor, device: torch.device, dtype: torch.dtype):
    """`x` itself when it can serve as a slot buffer (device, dtype, contiguous rows), else None."""
    same = x.device.type == device.type and (device.index is None or x.device.index == device.index)
    if not same or x.dtype != dtype or not x.is_contiguous():
        return None
    return x

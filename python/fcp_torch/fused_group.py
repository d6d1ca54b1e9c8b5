"""Merging the partials of several launches of one forward op in one pass (FCP_MERGE_GROUP=N).

Run 9 (docs/results.md) found the forward's time outside the kernels to be the merges' memory
traffic: per launch, the float32 accumulator row of every destination slot is read and written
(8 bytes per element) for 2 bytes of partial. An op's launches often hit the same query slots
(a causal square and the rectangles of one query block are different launch shapes), so merging
up to N consecutive launches of an op together reads and writes each slot's accumulator once for
all their partials (fcp-64's heaviest rank: 141K instead of 337K accumulator rows, computed from
the plan). The partials are not copied: the Triton kernel reads up to `MAX_SOURCES` launch
outputs through separate pointers; the torch fallback concatenates them (it only needs to be right).
The cost is holding the grouped launches' outputs until the merge. Off by default (N = 1) until
measured on the GPU.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

import numpy as np
import torch

from .fused import HAVE_TRITON, MergePlan, merge_csr_torch, merge_plans

MAX_SOURCES = 4
_FAR = 1 << 62


def group_size() -> int:
    """Launches merged together (1..MAX_SOURCES), from FCP_MERGE_GROUP (default 1: per launch)."""
    return max(1, min(MAX_SOURCES, int(os.environ.get("FCP_MERGE_GROUP", "1"))))


if HAVE_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _merge_multi_kernel(
        acc_o, acc_l, po0, po1, po2, po3, pl0, pl1, pl2, pl3,
        a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3,
        off1, off2, off3, dst, ptr, src, first,
        H: tl.constexpr, D: tl.constexpr, BH: tl.constexpr,
    ):
        # (a, b, c, d)_k: source k's o row / head strides and lse row / head strides
        r = tl.program_id(0)
        h = tl.program_id(1) * BH + tl.arange(0, BH)
        d = tl.arange(0, D)
        hm = h < H
        row = tl.load(dst + r).to(tl.int64)
        lo = tl.load(ptr + r)
        hi = tl.load(ptr + r + 1)
        f = tl.load(first + r)
        acc_off = row * (H * D) + h[:, None] * D + d[None, :]
        ninf = float("-inf")
        m = tl.load(acc_l + row * H + h, mask=hm & (f == 0), other=ninf)
        o = tl.load(acc_o + acc_off, mask=hm[:, None] & (f == 0), other=0.0)
        s = tl.where(m == ninf, 0.0, 1.0)
        for j in range(lo, hi):
            sr = tl.load(src + j).to(tl.int64)
            k = (sr >= off1).to(tl.int32) + (sr >= off2).to(tl.int32) + (sr >= off3).to(tl.int32)
            base = tl.where(k == 0, 0, tl.where(k == 1, off1, tl.where(k == 2, off2, off3)))
            lr = sr - base
            l0 = tl.load(pl0 + lr * c0 + h * d0, mask=hm & (k == 0), other=0.0).to(tl.float32)
            l1 = tl.load(pl1 + lr * c1 + h * d1, mask=hm & (k == 1), other=0.0).to(tl.float32)
            l2 = tl.load(pl2 + lr * c2 + h * d2, mask=hm & (k == 2), other=0.0).to(tl.float32)
            l3 = tl.load(pl3 + lr * c3 + h * d3, mask=hm & (k == 3), other=0.0).to(tl.float32)
            l = tl.where(k == 0, l0, tl.where(k == 1, l1, tl.where(k == 2, l2, l3)))
            mk = hm[:, None]
            x0 = tl.load(po0 + lr * a0 + h[:, None] * b0 + d[None, :], mask=mk & (k == 0), other=0.0).to(tl.float32)
            x1 = tl.load(po1 + lr * a1 + h[:, None] * b1 + d[None, :], mask=mk & (k == 1), other=0.0).to(tl.float32)
            x2 = tl.load(po2 + lr * a2 + h[:, None] * b2 + d[None, :], mask=mk & (k == 2), other=0.0).to(tl.float32)
            x3 = tl.load(po3 + lr * a3 + h[:, None] * b3 + d[None, :], mask=mk & (k == 3), other=0.0).to(tl.float32)
            x = tl.where(k == 0, x0, tl.where(k == 1, x1, tl.where(k == 2, x2, x3)))
            mn = tl.maximum(m, l)
            ref = tl.where(mn == ninf, 0.0, mn)
            c_old = tl.exp(m - ref)
            c_new = tl.exp(l - ref)
            o = o * c_old[:, None] + x * c_new[:, None]
            s = s * c_old + c_new
            m = mn
        pos = s > 0.0
        s_safe = tl.where(pos, s, 1.0)
        o = o / s_safe[:, None]
        lse = tl.where(pos, m + tl.log(s_safe), ninf)
        tl.store(acc_o + acc_off, o, mask=hm[:, None])
        tl.store(acc_l + row * H + h, lse, mask=hm)


def _offsets(os_: Sequence[torch.Tensor]) -> List[int]:
    offs = np.cumsum([0] + [int(o.shape[0]) for o in os_]).tolist()
    return [int(x) for x in offs]


def merge_multi_triton(o_acc, lse_acc, os_: Sequence[torch.Tensor], ls: Sequence[torch.Tensor], mp: MergePlan) -> None:
    """One Triton launch merging the partials of up to MAX_SOURCES launches (rows of their virtual
    concatenation, `mp.src`) into the float32 accumulator."""
    if mp.rows == 0:
        return
    H, D = o_acc.shape[1], o_acc.shape[2]
    os_ = [o if o.stride(2) == 1 else o.contiguous() for o in os_]
    offs = _offsets(os_)
    n = len(os_)
    po = list(os_) + [os_[0]] * (MAX_SOURCES - n)
    pl = list(ls) + [ls[0]] * (MAX_SOURCES - n)
    strides = []
    for o, l in zip(po, pl):
        strides += [o.stride(0), o.stride(1), l.stride(0), l.stride(1)]
    bounds = offs[1:n] + [_FAR] * (MAX_SOURCES - n)
    BH = max(1, min(H, 4096 // D))
    grid = (int(mp.dst.shape[0]), triton.cdiv(H, BH))
    _merge_multi_kernel[grid](
        o_acc, lse_acc, *po, *pl, *strides, bounds[0], bounds[1], bounds[2], mp.dst, mp.ptr, mp.src, mp.first,
        H=H, D=D, BH=BH, num_warps=4,
    )


def merge_multi_torch(o_acc, lse_acc, os_: Sequence[torch.Tensor], ls: Sequence[torch.Tensor], mp: MergePlan) -> None:
    """The same merge in torch: the partials concatenated, then `merge_csr_torch` (reference)."""
    if mp.rows == 0:
        return
    o = torch.cat([x.reshape(x.shape[0], -1) for x in os_]).view(-1, *os_[0].shape[1:])
    lse = torch.cat([x.float() for x in ls])
    merge_csr_torch(o_acc, lse_acc, o, lse, mp)


def probe_multi(device) -> Optional[str]:
    """The Triton kernel against the torch one on random partials of 3 launches; None if they agree."""
    g = torch.Generator(device="cpu").manual_seed(1)
    rng = np.random.default_rng(1)
    H, D, n_slots = 8, 128, 300
    rows = [rng.integers(0, n_slots, 200), np.arange(40, 240), rng.integers(0, n_slots, 350)]
    for sizes in ((3,), (1, 2)):  # one group of three launches, then groups of one and two
        accs = [[torch.zeros(n_slots, H, D, device=device), torch.full((n_slots, H), float("-inf"), device=device)] for _ in range(2)]
        groups, a = [], 0
        for n in sizes:
            groups.append(list(range(a, a + n)))
            a += n
        plans = merge_plans([np.concatenate([rows[i] for i in grp]) for grp in groups], n_slots, device)
        os_ = [torch.randn(len(r), H, D, generator=g).to(device, torch.bfloat16) for r in rows]
        ls = [(torch.randn(H, len(r), generator=g) * 3).to(device).t() for r in rows]
        for grp, mp in zip(groups, plans):
            merge_multi_triton(accs[0][0], accs[0][1], [os_[i] for i in grp], [ls[i] for i in grp], mp)
            merge_multi_torch(accs[1][0], accs[1][1], [os_[i] for i in grp], [ls[i] for i in grp], mp)
        torch.cuda.synchronize(device)
        for x, y, name in ((accs[0][0], accs[1][0], "O"), (accs[0][1], accs[1][1], "LSE")):
            fin = torch.isfinite(y)
            err = float((x[fin] - y[fin]).norm() / (y[fin].norm() + 1e-30))
            if not err < 1e-5 or not torch.equal(torch.isinf(x), torch.isinf(y)):
                return f"grouped merge mismatch ({name}: relative error {err:.2e})"
    return None


class GroupMerger:
    """The grouped merge of one device: Triton where `probe_multi` passes, else torch."""

    def __init__(self, fused):
        self.backend = "torch"
        self.error: Optional[str] = None
        if fused.backend == "triton":
            try:
                self.error = probe_multi(fused.device)
                self.backend = "triton" if self.error is None else "torch"
            except Exception as e:  # noqa: BLE001 - any failure: the torch path
                self.error = f"{type(e).__name__}: {e}"[:400]

    def merge(self, o_acc, lse_acc, os_, ls, mp: MergePlan) -> None:
        if self.backend == "triton" and o_acc.shape[2] & (o_acc.shape[2] - 1) == 0:
            merge_multi_triton(o_acc, lse_acc, os_, ls, mp)
        else:
            merge_multi_torch(o_acc, lse_acc, os_, ls, mp)


def chunk_plans(per_launch_slots, per_launch_sels, launch_rows, op_sizes, n_acc, device, size):
    """Merge plans of launch groups: consecutive launches of one op that merge rows, at most `size`
    per group, in run order. Returns, per op, a list of (member launch positions, MergePlan)."""
    groups, slots, sels = [], [], []
    pos = 0
    for n in op_sizes:
        op_groups, cur = [], []
        for j in range(pos, pos + n):
            if len(per_launch_slots[j]) == 0:
                continue
            cur.append(j)
            if len(cur) == size:
                op_groups.append(cur)
                cur = []
        if cur:
            op_groups.append(cur)
        for grp in op_groups:
            off, s_parts, r_parts = 0, [], []
            for j in grp:
                s_parts.append(per_launch_slots[j])
                sel = per_launch_sels[j]
                r_parts.append(off + (np.arange(launch_rows[j]) if sel is None else np.asarray(sel, np.int64)))
                off += launch_rows[j]
            slots.append(np.concatenate(s_parts))
            sels.append(np.concatenate(r_parts))
        groups.append([[j - pos for j in grp] for grp in op_groups])
        pos += n
    plans = merge_plans(slots, n_acc, device, sels)
    out, k = [], 0
    for op_groups in groups:
        out.append([(grp, plans[k + i]) for i, grp in enumerate(op_groups)])
        k += len(op_groups)
    return out

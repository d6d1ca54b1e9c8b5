"""Fused online-LSE merges of partial attention outputs (Triton), with a torch fallback.

The forward of a rank adds every kernel launch's partial result (o, lse) into float32 accumulators
O/LSE of its query slots. The original torch code (`kernels.merge_slice`, `kernels.merge_into`)
spends about 15 small kernels per launch on it and reads and writes the float32 accumulator several
times. Here each launch gets a *merge plan*, built once per plan and rank (`MergePlan`):

- the destination slots of the launch's rows, de-duplicated (`dst`), with the launch rows that go to
  each of them as CSR (`ptr`, `src`): one query slot can receive several pieces of one launch;
- `first`: whether the slot is touched for the first time in the phase (op order). Such a slot's
  accumulator is still empty (O = 0, LSE = -inf), so the merge writes it without reading it.

`merge_csr` applies one merge plan: one Triton launch on CUDA (one program per destination slot and
block of heads; it reads the accumulator once, unless `first`, reads each partial row once and
writes the slot once), or the same algorithm in torch (`merge_csr_torch`): the fallback where Triton
is absent or fails its start-up probe, and the reference the Triton kernel is probed against.
The online softmax merge: for partials (o_i, lse_i) of one row, lse = log sum exp(lse_i) and
o = sum exp(lse_i - lse) o_i (Milakov and Gimelshein, "Online normalizer calculation for softmax",
2018; FlashAttention's split-KV combine).

Gathers: `gather_rows` copies rows of several buffers that share one index in one launch (K and V,
or Q, O and dO in the backward), instead of one `index_select` per buffer.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

try:  # Triton is on GPU machines only; CPU/CI uses the torch fallback.
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except Exception:  # noqa: BLE001 - any import problem means: no Triton
    HAVE_TRITON = False


@dataclass
class MergePlan:
    """Where one launch's packed rows go: see the module comment."""

    dst: torch.Tensor  # [U] int64 destination slots (unique)
    ptr: torch.Tensor  # [U + 1] int32 CSR offsets into src
    src: torch.Tensor  # [n] int32 launch rows, grouped by destination
    first: torch.Tensor  # [U] int8: 1 = the slot is empty before this merge
    inv: torch.Tensor  # [n] int64 destination position of each launch row (torch fallback)
    first_b: torch.Tensor  # [U] bool, as `first`
    row_dst: torch.Tensor  # [n] int64 destination slot of each launch row
    rows: int  # n
    simple: bool  # every destination is first and gets exactly one row: a plain scatter
    # Launch rows the plan reads, when it covers a subset of them (`src` then holds launch rows
    # directly; the torch fallback selects them first). None: all rows, in order.
    sel: Optional[torch.Tensor] = None


def merge_plans(
    row_slots: Sequence[np.ndarray], n_slots: int, device, row_sel: Optional[Sequence[Optional[np.ndarray]]] = None
) -> List[MergePlan]:
    """Merge plans of a phase's launches, in execution order (`row_slots[i]`: slots of launch i's rows).

    `first` follows the order: a slot is first in the earliest launch that touches it. `row_sel[i]`
    (optional): the launch rows that `row_slots[i]` belongs to, when the plan covers only some rows.
    """
    touched = np.zeros(n_slots, bool)
    out: List[MergePlan] = []
    for li, idx in enumerate(row_slots):
        idx = np.asarray(idx, np.int64)
        sel = None if row_sel is None or row_sel[li] is None else np.asarray(row_sel[li], np.int64)
        u, inv, cnt = np.unique(idx, return_inverse=True, return_counts=True)
        inv = inv.reshape(-1)
        first = ~touched[u]
        touched[u] = True
        order = np.argsort(inv, kind="stable")
        ptr = np.concatenate(([0], np.cumsum(cnt))).astype(np.int32)
        t = lambda a, dt: torch.from_numpy(np.ascontiguousarray(a, dtype=dt)).to(device)  # noqa: E731
        out.append(
            MergePlan(
                dst=t(u, np.int64),
                ptr=t(ptr, np.int32),
                src=t(order if sel is None else sel[order], np.int32),
                first=t(first, np.int8),
                inv=t(inv, np.int64),
                first_b=t(first, np.bool_),
                row_dst=t(idx, np.int64),
                rows=len(idx),
                simple=bool(first.all() and (cnt == 1).all()),
                sel=None if sel is None else t(sel, np.int64),
            )
        )
    return out


# ------------------------------------------------------------------------------------------------
# torch fallback (and reference of the Triton kernel)


def merge_csr_torch(o_acc: torch.Tensor, lse_acc: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, mp: MergePlan) -> None:
    """Applies merge plan `mp`: rows (o [n, H, D], lse [n, H]) into o_acc/lse_acc (float32), in place."""
    if mp.rows == 0:
        return
    if mp.sel is not None:
        o, lse = o.index_select(0, mp.sel), lse.index_select(0, mp.sel)
    lse = lse.float()
    if mp.simple:
        # Every destination empty and hit once: the merge is a copy.
        o_acc.index_copy_(0, mp.row_dst, o.float())
        lse_acc.index_copy_(0, mp.row_dst, lse)
        return
    ninf = float("-inf")
    old_l = lse_acc.index_select(0, mp.dst)
    old_l = torch.where(mp.first_b.unsqueeze(1), torch.full_like(old_l, ninf), old_l)
    old_o = o_acc.index_select(0, mp.dst)
    old_o = torch.where(mp.first_b.view(-1, 1, 1), torch.zeros_like(old_o), old_o)
    inv = mp.inv
    mx = old_l.clone()
    mx.index_reduce_(0, inv, lse, "amax", include_self=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    s = torch.exp(old_l - mx)
    s.index_add_(0, inv, torch.exp(lse - mx.index_select(0, inv)))
    pos = s > 0
    s_safe = torch.where(pos, s, torch.ones_like(s))
    new_l = torch.where(pos, mx + torch.log(s_safe), torch.full_like(s, ninf))
    acc = old_o * torch.exp(old_l - mx).unsqueeze(-1)
    acc.index_add_(0, inv, o.float() * torch.exp(lse - mx.index_select(0, inv)).unsqueeze(-1))
    acc = acc / s_safe.unsqueeze(-1)
    o_acc.index_copy_(0, mp.dst, acc)
    lse_acc.index_copy_(0, mp.dst, new_l)


# ------------------------------------------------------------------------------------------------
# Triton kernels

if HAVE_TRITON:
    # The online LSE merge of one accumulator row and block of heads, shared by the per-launch merge
    # below and deferred.py's window merge (one loop body, two ways of finding the partials).

    @triton.jit
    def merge_begin(acc_o, acc_l, row, h, d, hm, f, H: tl.constexpr, D: tl.constexpr):
        """The row's float32 accumulator (o, s, m) to merge into; empty when `f` (first touch)."""
        acc_off = row * (H * D) + h[:, None] * D + d[None, :]
        m = tl.load(acc_l + row * H + h, mask=hm & (f == 0), other=float("-inf"))
        o = tl.load(acc_o + acc_off, mask=hm[:, None] & (f == 0), other=0.0)
        s = tl.where(m == float("-inf"), 0.0, 1.0)
        return acc_off, o, s, m

    @triton.jit
    def merge_step(o, s, m, x, l):
        """One partial (x [BH, D], lse l [BH]) merged into the running (o, s, m), all float32."""
        mn = tl.maximum(m, l)
        ref = tl.where(mn == float("-inf"), 0.0, mn)
        c_old = tl.exp(m - ref)
        c_new = tl.exp(l - ref)
        return o * c_old[:, None] + x * c_new[:, None], s * c_old + c_new, mn

    @triton.jit
    def merge_end(acc_o, acc_l, acc_off, row, h, hm, o, s, m, H: tl.constexpr):
        """Normalised O and the merged LSE stored back (-inf where nothing was seen)."""
        pos = s > 0.0
        s_safe = tl.where(pos, s, 1.0)
        tl.store(acc_o + acc_off, o / s_safe[:, None], mask=hm[:, None])
        tl.store(acc_l + row * H + h, tl.where(pos, m + tl.log(s_safe), float("-inf")), mask=hm)

    @triton.jit
    def _merge_kernel(
        acc_o, acc_l, po, pl, dst, ptr, src, first,
        s_po_r, s_po_h, s_pl_r, s_pl_h,
        H: tl.constexpr, D: tl.constexpr, BH: tl.constexpr,
    ):
        r = tl.program_id(0)
        h = tl.program_id(1) * BH + tl.arange(0, BH)
        d = tl.arange(0, D)
        hm = h < H
        row = tl.load(dst + r).to(tl.int64)
        a = tl.load(ptr + r)
        b = tl.load(ptr + r + 1)
        acc_off, o, s, m = merge_begin(acc_o, acc_l, row, h, d, hm, tl.load(first + r), H, D)
        for j in range(a, b):
            sr = tl.load(src + j).to(tl.int64)
            l = tl.load(pl + sr * s_pl_r + h * s_pl_h, mask=hm, other=float("-inf")).to(tl.float32)
            x = tl.load(po + sr * s_po_r + h[:, None] * s_po_h + d[None, :], mask=hm[:, None], other=0.0).to(tl.float32)
            o, s, m = merge_step(o, s, m, x, l)
        merge_end(acc_o, acc_l, acc_off, row, h, hm, o, s, m, H)

    @triton.jit
    def _gather_kernel(
        idx, n, s0, d0, s1, d1, s2, d2,
        W: tl.constexpr, BW: tl.constexpr, NT: tl.constexpr,
    ):
        i = tl.program_id(0)
        w = tl.program_id(1) * BW + tl.arange(0, BW)
        wm = w < W
        r = tl.load(idx + i).to(tl.int64)
        i64 = i.to(tl.int64)
        tl.store(d0 + i64 * W + w, tl.load(s0 + r * W + w, mask=wm), mask=wm)
        if NT > 1:
            tl.store(d1 + i64 * W + w, tl.load(s1 + r * W + w, mask=wm), mask=wm)
        if NT > 2:
            tl.store(d2 + i64 * W + w, tl.load(s2 + r * W + w, mask=wm), mask=wm)


def merge_csr_triton(o_acc: torch.Tensor, lse_acc: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, mp: MergePlan) -> None:
    """`merge_csr_torch` as one Triton launch (needs D a power of two, D-contiguous rows)."""
    if mp.rows == 0:
        return
    H, D = o_acc.shape[1], o_acc.shape[2]
    if o.stride(2) != 1:
        o = o.contiguous()
    BH = max(1, min(H, 4096 // D))
    grid = (int(mp.dst.shape[0]), triton.cdiv(H, BH))
    _merge_kernel[grid](
        o_acc, lse_acc, o, lse, mp.dst, mp.ptr, mp.src, mp.first,
        o.stride(0), o.stride(1), lse.stride(0), lse.stride(1),
        H=H, D=D, BH=BH, num_warps=4,
    )


def gather_rows_torch(srcs: Sequence[torch.Tensor], idx: torch.Tensor) -> List[torch.Tensor]:
    """Rows `idx` of each buffer (one index_select each)."""
    return [s.index_select(0, idx) for s in srcs]


def gather_rows_triton(srcs: Sequence[torch.Tensor], idx: torch.Tensor) -> List[torch.Tensor]:
    """Rows `idx` of up to three buffers of one row width and dtype, in one launch."""
    n = int(idx.shape[0])
    outs = [torch.empty((n,) + tuple(s.shape[1:]), dtype=s.dtype, device=s.device) for s in srcs]
    if n == 0:
        return outs
    W = int(np.prod(srcs[0].shape[1:]))
    BW = min(4096, triton.next_power_of_2(W))
    ss = list(srcs) + [srcs[0]] * (3 - len(srcs))
    ds = outs + [outs[0]] * (3 - len(outs))
    _gather_kernel[(n, triton.cdiv(W, BW))](idx, n, ss[0], ds[0], ss[1], ds[1], ss[2], ds[2], W=W, BW=BW, NT=len(srcs), num_warps=4)
    return outs


# ------------------------------------------------------------------------------------------------
# Choice at start-up


class Fused:
    """The merge and gather implementations of one device: Triton where its probe passes, else torch.

    `backend` is "triton" or "torch"; `errors` says why Triton is not used. FCP_FUSED=torch forces
    the torch fallback (FCP_FUSED=legacy is read by the runtime: the original merges, no merge plans).
    """

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.backend = "torch"
        self.errors: Dict[str, str] = {}
        want = os.environ.get("FCP_FUSED", "auto")
        if want == "torch":
            self.errors["triton"] = "FCP_FUSED=torch"
        elif self.device.type != "cuda":
            self.errors["triton"] = "needs CUDA"
        elif not HAVE_TRITON:
            self.errors["triton"] = "triton is not installed"
        else:
            try:
                err = probe_triton(self.device)
                if err is None:
                    self.backend = "triton"
                else:
                    self.errors["triton"] = err
            except Exception as e:  # noqa: BLE001 - any failure disables the path
                self.errors["triton"] = f"{type(e).__name__}: {e}"[:400]

    def merge(self, o_acc, lse_acc, o, lse, mp: MergePlan) -> None:
        """Merges one launch's partials by its merge plan."""
        if self.backend == "triton" and o_acc.shape[2] & (o_acc.shape[2] - 1) == 0:
            merge_csr_triton(o_acc, lse_acc, o, lse, mp)
        else:
            merge_csr_torch(o_acc, lse_acc, o, lse, mp)

    def gather(self, srcs: Sequence[torch.Tensor], idx: torch.Tensor) -> List[torch.Tensor]:
        """Rows `idx` of buffers sharing one shape and dtype (K and V; Q, O and dO)."""
        if self.backend == "triton" and len(srcs) <= 3 and all(s.is_contiguous() and s.dtype == srcs[0].dtype and s.shape[1:] == srcs[0].shape[1:] for s in srcs):
            return gather_rows_triton(srcs, idx)
        return gather_rows_torch(srcs, idx)


def probe_triton(device: torch.device) -> Optional[str]:
    """Runs the Triton merge and gather on random data against the torch fallback; None if they agree."""
    from .kernels import merge_into

    g = torch.Generator(device="cpu").manual_seed(0)
    H, D, n_slots = 8, 128, 300
    rng = np.random.default_rng(0)
    launches = [rng.integers(0, n_slots, 200), np.arange(40, 240), rng.integers(0, n_slots, 350)]
    plans = merge_plans(launches, n_slots, device)
    acc = [torch.zeros(n_slots, H, D, device=device), torch.full((n_slots, H), float("-inf"), device=device)]
    ref = [acc[0].clone(), acc[1].clone()]
    for idx, mp in zip(launches, plans):
        o = torch.randn(len(idx), H, D, generator=g).to(device, torch.bfloat16)
        # LSE as kernels return it: a transposed [H, n] buffer (strided rows)
        lse = (torch.randn(H, len(idx), generator=g) * 3).to(device).t()
        merge_csr_triton(acc[0], acc[1], o, lse, mp)
        merge_into(ref[0], ref[1], torch.from_numpy(idx).to(device), o.float(), lse.contiguous())
    torch.cuda.synchronize(device)
    for a, b, name in ((acc[0], ref[0], "O"), (acc[1], ref[1], "LSE")):
        fa, fb = a[torch.isfinite(b)] if name == "LSE" else a, b[torch.isfinite(b)] if name == "LSE" else b
        err = float((fa - fb).norm() / (fb.norm() + 1e-30))
        if not err < 1e-5 or not bool(torch.equal(torch.isinf(a), torch.isinf(b))):
            return f"merge mismatch against the torch merge ({name}: relative error {err:.2e})"
    src = [torch.randn(500, 8, 128, generator=g).to(device, torch.bfloat16) for _ in range(3)]
    idx = torch.from_numpy(rng.integers(0, 500, 321)).to(device)
    for got, want in zip(gather_rows_triton(src, idx), gather_rows_torch(src, idx)):
        if not torch.equal(got, want):
            return "gather mismatch against index_select"
    return None


# ------------------------------------------------------------------------------------------------
# The runtime's compute ops on the fused path (RankRuntime calls these when `rt.fused` is set)


def make_fused(device) -> Optional[Fused]:
    """The fused path of a runtime, or None for the original merges (FCP_FUSED=legacy)."""
    return None if os.environ.get("FCP_FUSED") == "legacy" else Fused(device)


@dataclass
class Direct:
    """Launch rows whose query slot gets no other partial in the phase: written as the kernel returns
    them (compute dtype), no float32 accumulator, no merge."""

    rows: Optional[torch.Tensor]  # launch rows written directly; None: all of them
    dst: torch.Tensor  # [n] int64 their query slots
    rng: Optional[tuple]  # (a, e): all rows, going to slots a..e-1 in order (a slice copy)


@dataclass
class ForwardLayout:
    """Where one rank's forward keeps its outputs (built once per plan, `prepare_merges`).

    A query slot with exactly one partial row in the whole phase and no `out` transfer is final as
    soon as its kernel returns: it goes straight into the compute-dtype O (`Obf`). Only slots where
    several partials meet (or whose O travels as an `out` partial) get a float32 accumulator row
    (`O`/`LSEc`, compact, `acc_slots[i]` = slot of row i), merged online; at the end those rows are
    converted once into `Obf`. The forward's `out` messages are remapped to accumulator rows.
    """

    acc_slots: torch.Tensor  # [M] int64
    zero_slots: torch.Tensor  # slots no partial writes: O = 0 there (as before)
    user_acc_pos: torch.Tensor  # user-layout positions whose slot has an accumulator row ...
    user_acc_rows: torch.Tensor  # ... and that row (for adding `out` partials received: O_in)
    launches: Dict[int, list]  # id(launch list of an op) -> [(Direct or None, MergePlan)] per launch
    direct_rows: int  # rows written directly over the phase (reported by the GPU script)
    # deferred merges (deferred.py, rt.merge_window > 1): id(launch list of an op) -> position of its
    # first launch in the phase's launch order; windows by the position of the launch that ends them
    first_pos: Optional[Dict[int, int]] = None
    windows: Optional[Dict[int, object]] = None
    # the same slots as (start, end) runs when they are few: slice fills at memset speed instead of
    # index_fill_ (0.6 ms for 28K rows at fcp-256's heaviest rank, H200 run 10); None: use zero_slots
    zero_runs: Optional[List[tuple]] = None


def _runs(slots: np.ndarray, most: int) -> Optional[List[tuple]]:
    """Sorted slots as (start, end) runs of consecutive slots; None when there are more than `most`."""
    if len(slots) == 0:
        return []
    cut = np.nonzero(np.diff(slots) != 1)[0] + 1
    if len(cut) + 1 > most:
        return None
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(slots)]))
    return [(int(slots[a]), int(slots[e - 1]) + 1) for a, e in zip(starts, ends)]


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy().astype(np.int64)


def prepare_merges(rt) -> ForwardLayout:
    """Builds the forward layout and the merge plans of every forward launch of runtime `rt` once
    (op order = run order); remaps the forward's `out` message rows to accumulator rows."""
    lay = rt.__dict__.get("_fwd_layout")
    if lay is not None:
        return lay
    nq = rt.qspace.size
    lists, idxs = [], []
    for i in range(len(rt.prog.forward.ops)):
        launches = rt._launches("forward", i)
        lists.append(launches)
        idxs.extend(_np(L.qidx) for L in launches)
    cnt = np.bincount(np.concatenate(idxs), minlength=nq) if idxs else np.zeros(nq, np.int64)
    acc = cnt >= 2
    specs = [] if rt.local else [rt._group("forward", g) for g in range(len(rt.prog.forward.groups))]
    oparts = [part for sp in specs for side in (sp.sends, sp.recvs) for parts in side.values() for part in parts if part.field == "O"]
    for part in oparts:
        acc[_np(part.idx)] = True
    acc_slots = np.nonzero(acc)[0]
    acc_of = np.full(nq, -1, np.int64)
    acc_of[acc_slots] = np.arange(len(acc_slots))
    for part in oparts:
        part.idx = rt._t(acc_of[_np(part.idx)])
    directs, slots, sels = [], [], []
    n_direct = 0
    for L, idx in zip((L for ls in lists for L in ls), idxs):
        a = acc_of[idx]
        m = a >= 0
        if m.all():
            directs.append(None)
            slots.append(a)
            sels.append(None)
            continue
        dr = np.nonzero(~m)[0]
        n_direct += len(dr)
        if not m.any():
            rng = L.q_range if L.q_range is not None else None
            directs.append(Direct(None, rt._t(idx), rng))
        else:
            directs.append(Direct(rt._t(dr), rt._t(idx[dr]), None))
        mr = np.nonzero(m)[0]
        slots.append(a[mr])
        sels.append(mr)
    plans = merge_plans(slots, len(acc_slots), rt.device, sels)
    per: Dict[int, list] = {}
    pos = 0
    for launches in lists:
        n = len(launches)
        per[id(launches)] = list(zip(directs[pos : pos + n], plans[pos : pos + n]))
        pos += n
    first_pos = wins = None
    if getattr(rt, "merge_window", 1) > 1:
        from . import deferred as _df

        first_pos, pos = {}, 0
        op_of = []
        for i, launches in enumerate(lists):
            first_pos[id(launches)] = pos
            pos += len(launches)
            op_of.extend([i] * len(launches))
        rows = [len(x) for x in idxs]
        ws = _df.windows(slots, sels, rows, op_of, len(acc_slots), rt.device, rt.merge_window, rt.window_rows, _df.post_barriers(rt, "forward", ("O",)))
        wins = {w.end_launch: w for w in ws}
        rt._fwd_table = _df.table_for(ws, rt.device, 6, getattr(rt, "window_bh", None))
        _df.backend(rt.fused)  # probe the Triton kernels now, not inside the first timed phase
    uq = _np(rt.user_q)
    ua = acc_of[uq] if len(uq) else np.zeros(0, np.int64)
    upos = np.nonzero(ua >= 0)[0]
    zs = np.nonzero((cnt == 0) & ~acc)[0]
    lay = ForwardLayout(
        acc_slots=rt._t(acc_slots),
        zero_slots=rt._t(zs),
        zero_runs=_runs(zs, 256),
        user_acc_pos=rt._t(upos),
        user_acc_rows=rt._t(ua[upos]),
        launches=per,
        direct_rows=n_direct,
        first_pos=first_pos,
        windows=wins,
    )
    rt._fwd_layout = lay
    return lay


def forward_buffers(rt, b: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Adds the forward's output buffers to `b` (which holds Q, K, V): `Obf` [nq] compute dtype,
    `LSE` [nq] float32, and the compact float32 accumulator `O`/`LSEc` [M] (see ForwardLayout)."""
    lay = prepare_merges(rt)
    nq, M, dev = rt.qspace.size, int(lay.acc_slots.shape[0]), rt.device
    ninf = float("-inf")
    b["Obf"] = torch.empty(nq, rt.H, rt.D, device=dev, dtype=rt.dtype)
    if lay.zero_runs is not None:
        for a, e in lay.zero_runs:
            b["Obf"][a:e].zero_()
    elif lay.zero_slots.numel():
        b["Obf"].index_fill_(0, lay.zero_slots, 0.0)
    b["LSE"] = torch.full((nq, rt.H), ninf, device=dev, dtype=torch.float32)
    b["O"] = torch.zeros(M, rt.H, rt.D, device=dev, dtype=torch.float32)
    b["LSEc"] = torch.full((M, rt.H), ninf, device=dev, dtype=torch.float32)
    return b


def finish_forward(rt, b: Dict[str, torch.Tensor], user: bool = True, alias_out: bool = False):
    """After the forward phase: accumulator rows into `Obf`/`LSE`; returns (Ofinal, LSE, o_user).

    Ofinal is the rank's own O (without `out` partials received, as the backward expects); o_user
    (None unless `user`) is the user-layout output, received `out` partials added. `alias_out`
    (zerocopy.ZeroCopy.out: user rows = all slots in order, no `out` partial received): o_user is
    Ofinal itself, not a copy."""
    lay = prepare_merges(rt)
    obf, lse = b["Obf"], b["LSE"]
    if lay.acc_slots.numel():
        obf.index_copy_(0, lay.acc_slots, b["O"].to(obf.dtype))
        lse.index_copy_(0, lay.acc_slots, b["LSEc"])
    b["O"] = b["LSEc"] = None  # the float32 accumulator is done: let it go before the backward
    out = None
    if user and alias_out and b.get("O_in") is None:
        return obf, lse, obf
    if user:
        out = obf.index_select(0, rt.user_q)
        inc = b.get("O_in")
        if inc is not None and lay.user_acc_pos.numel():
            rows = lay.user_acc_rows
            acc_rows = obf.index_select(0, lay.acc_slots.index_select(0, rows)).float()
            out.index_copy_(0, lay.user_acc_pos, (acc_rows + inc.index_select(0, rows)).to(obf.dtype))
    return obf, lse, out


def forward_with_state(rt, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """RankRuntime.forward_with_state on the fused path (same inputs, outputs and state)."""
    from . import zerocopy as _zc

    nq, nk = rt.qspace.size, rt.kv_rows["forward"]
    dev, dt = rt.device, rt.dtype
    zc = _zc.plan(rt)
    b: Dict[str, torch.Tensor] = {}
    # zerocopy.py: where the user layout is the slot layout, the caller's tensors are the buffers
    for name, x, n, heads, idx, ok in (
        ("Q", q, nq, rt.H, rt.user_q, zc.q),
        ("K", k, nk, rt.Hk, rt.user_kv["forward"], zc.kv),
        ("V", v, nk, rt.Hk, rt.user_kv["forward"], zc.kv),
    ):
        buf = _zc.as_buffer(x, dev, dt) if ok else None
        if buf is None:
            buf = torch.zeros(n, heads, rt.D, device=dev, dtype=dt)
            buf.index_copy_(0, idx, x.to(dev, dt))
        b[name] = buf
    forward_buffers(rt, b)
    rt._run_phase("forward", b)
    ofinal, lse, out = finish_forward(rt, b, alias_out=zc.out)
    state = {
        "Q": b["Q"],
        "Ofinal": ofinal,
        "LSE": lse,
        "K": b["K"] if zc.state_kv else b["K"].index_select(0, rt.base_kv["forward"]),
        "V": b["V"] if zc.state_kv else b["V"].index_select(0, rt.base_kv["forward"]),
        # the state shares storage with the caller's q/k/v or the returned o (autograd.py guards it)
        "aliased": any(b[n] is x for n, x in (("Q", q), ("K", k), ("V", v))) or out is ofinal,
    }
    return out, state


def _kv(rt, b, L, names=("K", "V")):
    if L.k_range is not None:
        a, e = L.k_range
        return [b[n][a:e] for n in names]
    return rt.fused.gather([b[n] for n in names], L.kidx)


def _q(rt, b, L, names):
    if L.q_range is not None:
        a, e = L.q_range
        return [b[n][a:e] for n in names]
    return rt.fused.gather([b[n] for n in names], L.qidx)


def _write_direct(obf: torch.Tensor, lse_all: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, dr: Direct) -> None:
    if dr.rng is not None:
        a, e = dr.rng
        obf[a:e].copy_(o)
        lse_all[a:e].copy_(lse)
        return
    if dr.rows is not None:
        o, lse = o.index_select(0, dr.rows), lse.index_select(0, dr.rows)
    obf.index_copy_(0, dr.dst, o.to(obf.dtype))
    lse_all.index_copy_(0, dr.dst, lse.float())


def forward_op(rt, launches) -> None:
    """One forward op: kernel launches; rows of single-partial slots written straight into `Obf`,
    the others merged into the float32 accumulator by the launch's merge plan."""
    lay = prepare_merges(rt)
    per = lay.launches[id(launches)]
    b = rt._bufs
    if lay.windows is not None:
        return _forward_op_deferred(rt, lay, launches, per, b)
    for L, (dr, mp) in zip(launches, per):
        (q,) = _q(rt, b, L, ("Q",))
        k, v = _kv(rt, b, L)
        o, lse = rt.kernels.forward(L, q, k, v)
        if dr is not None:
            _write_direct(b["Obf"], b["LSE"], o, lse, dr)
        if mp.rows:
            rt.fused.merge(b["O"], b["LSEc"], o, lse, mp)


def _forward_op_deferred(rt, lay: ForwardLayout, launches, per, b) -> None:
    """forward_op with deferred merges (deferred.py): partials held until their window's last launch."""
    from . import deferred as _df

    held = rt.__dict__.setdefault("_held", {})
    g0 = lay.first_pos[id(launches)]
    for j, (L, (dr, mp)) in enumerate(zip(launches, per)):
        (q,) = _q(rt, b, L, ("Q",))
        k, v = _kv(rt, b, L)
        o, lse = rt.kernels.forward(L, q, k, v)
        if dr is not None:
            _write_direct(b["Obf"], b["LSE"], o, lse, dr)
        if mp.rows:
            held[g0 + j] = (o, lse)
        w = lay.windows.get(g0 + j)
        if w is not None:
            os_ = [held[i][0] for i in w.launches]
            ls = [held[i][1] for i in w.launches]
            # freeing the sources right after the launch is safe: the caching allocator hands their
            # memory only to work queued after it on the compute stream, and `_sums` marks them used
            # on the side stream
            with rt._sums(*os_, *ls):
                _df.merge_window(rt.fused, b["O"], b["LSEc"], os_, ls, w, rt._fwd_table)
            for i in w.launches:
                del held[i]


# Scatter-adds of a launch's gradients convert to float32 in chunks of at most this many elements,
# so the float32 copy of a large launch's dQ (1 GB for 32K rows of 64 x 128) never exists at once.
ADD_CHUNK_ELEMS = 1 << 24


def add_rows(acc: torch.Tensor, idx: torch.Tensor, x: torch.Tensor) -> None:
    """acc[idx[i]] += x[i] (float32 accumulator; duplicate indices add up), bounded temporaries."""
    n = int(x.shape[0])
    if x.dtype == acc.dtype:
        acc.index_add_(0, idx, x)
        return
    step = max(1, ADD_CHUNK_ELEMS // max(1, x[0].numel() if n else 1))
    for a in range(0, n, step):
        acc.index_add_(0, idx[a : a + step], x[a : a + step].float())


def prepare_adds(rt):
    """Deferred dQ adds of the backward (deferred.py, rt.merge_window > 1), built once: (position of
    each op's first launch, windows by the position of the launch that ends them), or None."""
    hit = rt.__dict__.get("_bwd_windows")
    if hit is not None or getattr(rt, "merge_window", 1) <= 1:
        return hit
    from . import deferred as _df

    first_pos, slots, op_of, pos = {}, [], [], 0
    for i in range(len(rt.prog.backward.ops)):
        launches = rt._launches("backward", i)
        first_pos[id(launches)] = pos
        pos += len(launches)
        slots.extend(_np(L.qidx) for L in launches)
        op_of.extend([i] * len(launches))
    # dQ leaves in `out` sends: a window must be applied before such a post
    ws = _df.windows(slots, [None] * len(slots), [len(x) for x in slots], op_of, rt.qspace.size, rt.device, rt.merge_window, rt.window_rows, _df.post_barriers(rt, "backward", ("dQ",)))
    rt._bwd_windows = (first_pos, {w.end_launch: w for w in ws}, _df.table_for(ws, rt.device, 3, getattr(rt, "window_bh", None)))
    return rt._bwd_windows


def backward_op(rt, launches) -> None:
    """One backward op: as RankRuntime._backward_op. Its gathers stay `index_select`: with the Triton
    gathers the backward measured slower on the H200 (fcp-64 replay 241 ms against 230 ms, run 4).
    With deferred adds (rt.merge_window > 1) the launches' dQ is held and added per window."""
    from . import deferred as _df

    b = rt._bufs
    dfr = prepare_adds(rt)
    held = rt.__dict__.setdefault("_held", {}) if dfr is not None else None
    g0 = dfr[0][id(launches)] if dfr is not None else 0
    for j, L in enumerate(launches):
        q, o, do = (b[n][L.q_range[0] : L.q_range[1]] for n in ("Q", "Ofinal", "dO")) if L.q_range is not None else gather_rows_torch([b["Q"], b["Ofinal"], b["dO"]], L.qidx)
        k, v = (b[n][L.k_range[0] : L.k_range[1]] for n in ("K", "V")) if L.k_range is not None else gather_rows_torch([b["K"], b["V"]], L.kidx)
        lse = b["LSE"][L.q_range[0] : L.q_range[1]] if L.q_range is not None else b["LSE"].index_select(0, L.qidx)
        dq, dk, dv = rt.kernels.backward(L, q, k, v, o, do, lse)
        if held is not None:
            held[g0 + j] = dq
            w = dfr[1].get(g0 + j)
            xs = [held[i] for i in w.launches] if w is not None else []
            with rt._sums(dk, dv, *xs):  # the side stream (RankRuntime.side_stream), or in place
                _add_kv(rt, L, dk, dv)
                if w is not None:
                    _df.add_window(rt.fused, b["dQ"], xs, w, dfr[2])
            if w is not None:
                for i in w.launches:
                    del held[i]
            del xs
        elif rt._sliced(L):
            with rt._sums(dq, dk, dv):
                rt._add_sliced(L, dq, dk, dv)
        else:
            with rt._sums(dq, dk, dv):
                add_rows(b["dQ"], L.qidx, dq)
                add_rows(b["dK"], L.kidx, dk)
                add_rows(b["dV"], L.kidx, dv)


def _add_kv(rt, L, dk, dv) -> None:
    b = rt._bufs
    if rt._sliced(L):
        off = 0
        for a, n in zip(L.kf.tolist(), L.lk.tolist()):
            b["dK"][a : a + n].add_(dk[off : off + n])
            b["dV"][a : a + n].add_(dv[off : off + n])
            off += n
    else:
        add_rows(b["dK"], L.kidx, dk)
        add_rows(b["dV"], L.kidx, dv)


# ------------------------------------------------------------------------------------------------
# dK/dV partials on the wire: float32 bits inside a 2-byte wire message


def f32_on_wire(kind_dkv: bool, wire: torch.dtype) -> bool:
    """Whether a message part travels as float32 bits in a 2-byte (bf16/fp16) message: `dkv`
    partials do. They are forwarded and added to on every hop (ring: up to 2N hops), so rounding
    them to the wire dtype at each hop compounds; `out` values are rounded once, at the end, and
    K/V are inputs already in the wire dtype."""
    return kind_dkv and torch.empty(0, dtype=wire).element_size() == 2


def wire_elems(n: int, kind_dkv: bool, wire: torch.dtype) -> int:
    """Wire elements of a part of `n` values."""
    return 2 * n if f32_on_wire(kind_dkv, wire) else n


def pack_part(x: torch.Tensor, kind_dkv: bool, wire: torch.dtype) -> torch.Tensor:
    """A message part as flat wire elements (float32 bits reinterpreted as pairs for `dkv`)."""
    if f32_on_wire(kind_dkv, wire):
        return x.float().contiguous().reshape(-1).view(wire)
    return x.to(wire).reshape(-1)


def unpack_part(x: torch.Tensor, kind_dkv: bool, wire: torch.dtype) -> torch.Tensor:
    """Inverse of `pack_part` on the flat slice `x` of a received message (float32 for `dkv`)."""
    if not f32_on_wire(kind_dkv, wire):
        return x
    if x.storage_offset() % 2:  # the float32 view needs 4-byte alignment (odd head widths only)
        x = x.clone()
    return x.view(torch.float32)

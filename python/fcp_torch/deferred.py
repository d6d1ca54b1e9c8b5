"""Deferred merges: the partials of a window of consecutive ops summed into float32 in one pass.

Run 9 (docs/results.md) traced the time outside the kernels to summing partials at memory speed:
every launch's partial rows are merged into the float32 O accumulator (forward) or added into the
float32 dQ (backward), and each pass reads and writes the accumulator row (8 bytes per element) for
2 bytes of partial. An FCP rank's query block meets its K/V blocks one op at a time (one op per
arriving group: fcp-256's heaviest rank has 4 query blocks of 4096 tokens, each attending 20-38
K/V blocks over 30 ops), so fusing tasks inside an op cannot cut that traffic (fusion.py: 2 % of
the partial rows at fcp-256), but deferring the sums can: the kernels run when they always ran,
their outputs (compute dtype) are held, and after every `W` ops one pass per window reads each
accumulator row once for all the window's partials. Bytes per partial element: 2 + 8/W instead of
2 + 8 (CPU count from the plan, `scripts/gpu/count-partials.py`: fcp-256's forward merges 22.3 GB
-> 12.3 GB at W = 4, its backward dQ adds 29.5 -> 16.9 GB). The cost: the held outputs (at most
`max_rows` rows), and windows must end wherever a group's post reads the accumulators (`out`/`dkv`
sends, the `_in` buffers): `barriers`.

`SumPlan` is the CSR of one window: unique destination rows, and per destination the (source,
row) pairs of its partials, sources = the window's held launch outputs in run order. On CUDA one
Triton launch applies it, reading every source through a table of pointers (no concatenation); the
torch fallback concatenates the sources and runs the per-launch code (`fused.merge_csr_torch`,
`index_add_`): the reference the Triton kernels are probed against at start-up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import torch

from .fused import HAVE_TRITON, MergePlan, merge_plans


@dataclass
class Window:
    """One window: the launches it holds (global launch positions in run order) and its plan."""

    launches: List[int]  # positions in the phase's launch order whose rows this window sums
    end_launch: int  # the window is applied right after this launch ran
    plan: MergePlan  # forward: merge plan over the window's rows (src = concatenated row ids)
    src_k: torch.Tensor  # [n] int32: source (index into `launches`) of each CSR entry
    src_r: torch.Tensor  # [n] int32: row inside that source


def windows(
    per_launch_slots: Sequence[np.ndarray],
    per_launch_sels: Sequence[Optional[np.ndarray]],
    launch_rows: Sequence[int],
    op_of_launch: Sequence[int],
    n_slots: int,
    device,
    ops: int,
    max_rows: Optional[int],
    barriers: Sequence[int] = (),
) -> List[Window]:
    """Groups the launches that sum rows (`per_launch_slots[i]` non-empty) into windows of at most
    `ops` consecutive ops and `max_rows` held rows (a launch larger than that is a window alone),
    never spanning a barrier (an op index after which the window must be applied). Returns windows
    in run order; launches without rows belong to none."""
    stop = np.sort(np.asarray(list(barriers), np.int64))
    groups: List[List[int]] = []
    cur: List[int] = []
    cur_ops: List[int] = []
    held = 0

    def close() -> None:
        nonlocal cur, cur_ops, held
        if cur:
            groups.append(cur)
        cur, cur_ops, held = [], [], 0

    last_op = -1
    for i, idx in enumerate(per_launch_slots):
        op = int(op_of_launch[i])
        # a barrier b in [last_op, op): the window so far must be applied before op's launches
        if op != last_op and np.searchsorted(stop, last_op, "left") < np.searchsorted(stop, op, "left"):
            close()
        last_op = op
        if len(idx) == 0:
            continue
        n = int(launch_rows[i])
        new_op = not cur_ops or cur_ops[-1] != op
        if cur and ((new_op and len(cur_ops) >= ops) or (max_rows is not None and held + n > max_rows)):
            close()
        cur.append(i)
        if not cur_ops or cur_ops[-1] != op:
            cur_ops.append(op)
        held += n
    close()
    slots, sels, ks, rs = [], [], [], []
    for grp in groups:
        off, sp, rp, kp, lr = 0, [], [], [], []
        for k, i in enumerate(grp):
            sel = per_launch_sels[i]
            rows = np.arange(int(launch_rows[i])) if sel is None else np.asarray(sel, np.int64)
            sp.append(np.asarray(per_launch_slots[i], np.int64))
            rp.append(off + rows)
            kp.append(np.full(len(rows), k, np.int64))
            lr.append(rows)
            off += int(launch_rows[i])
        slots.append(np.concatenate(sp))
        sels.append(np.concatenate(rp))
        ks.append(np.concatenate(kp))
        rs.append(np.concatenate(lr))
    plans = merge_plans(slots, n_slots, device, sels)
    out: List[Window] = []
    for grp, mp, k, r, s in zip(groups, plans, ks, rs, sels):
        # CSR entries are `mp.src` = concatenated row ids in destination order: map back to (k, r)
        order = mp.src.cpu().numpy().astype(np.int64)
        pos = np.searchsorted(s, order) if len(s) else order
        # `s` is increasing (sources in order, rows increasing within each): searchsorted finds each
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int32)).to(device)  # noqa: E731
        out.append(Window(list(grp), grp[-1], mp, t(k[pos]), t(r[pos])))
    return out


# ------------------------------------------------------------------------------------------------
# torch reference / fallback


def merge_window_torch(o_acc, lse_acc, os_: Sequence[torch.Tensor], ls: Sequence[torch.Tensor], w: Window) -> None:
    """Forward: the window's partials (launch outputs `os_`, lse `ls`, in window order) merged into
    the float32 accumulator, as the per-launch merges would (fused.merge_csr_torch on their concatenation)."""
    from .fused import merge_csr_torch

    if w.plan.rows == 0:
        return
    o = torch.cat([x.reshape(x.shape[0], -1) for x in os_]).view(-1, *os_[0].shape[1:])
    lse = torch.cat([x.float() for x in ls])
    merge_csr_torch(o_acc, lse_acc, o, lse, w.plan)


def add_window_torch(acc: torch.Tensor, xs: Sequence[torch.Tensor], w: Window) -> None:
    """Backward: acc[dst] += sum of the window's rows (float32), as per-launch index_add_ would."""
    mp = w.plan
    if mp.rows == 0:
        return
    x = torch.cat([t.reshape(t.shape[0], -1) for t in xs]).view(-1, *xs[0].shape[1:])
    if mp.sel is not None:
        x = x.index_select(0, mp.sel)
    acc.index_add_(0, mp.row_dst, x.float())


# ------------------------------------------------------------------------------------------------
# Triton: sources through a pointer table

if HAVE_TRITON:
    import triton
    import triton.language as tl

    from .fused import merge_begin, merge_end, merge_step  # the shared merge loop body

    @triton.jit
    def _merge_ptr_kernel(
        acc_o, acc_l, optr, lptr, so_r, so_h, sl_r, sl_h, dst, ptr, src_k, src_r, first,
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
            k = tl.load(src_k + j)
            sr = tl.load(src_r + j).to(tl.int64)
            po = tl.load(optr + k).to(tl.pointer_type(tl.bfloat16))
            pl = tl.load(lptr + k).to(tl.pointer_type(tl.float32))
            l = tl.load(pl + sr * tl.load(sl_r + k) + h * tl.load(sl_h + k), mask=hm, other=float("-inf"))
            x = tl.load(po + sr * tl.load(so_r + k) + h[:, None] * tl.load(so_h + k) + d[None, :], mask=hm[:, None], other=0.0).to(tl.float32)
            o, s, m = merge_step(o, s, m, x, l)
        merge_end(acc_o, acc_l, acc_off, row, h, hm, o, s, m, H)

    @triton.jit
    def _add_ptr_kernel(acc, xptr, sx_r, sx_h, dst, ptr, src_k, src_r, H: tl.constexpr, D: tl.constexpr, BH: tl.constexpr):
        r = tl.program_id(0)
        h = tl.program_id(1) * BH + tl.arange(0, BH)
        d = tl.arange(0, D)
        hm = h < H
        row = tl.load(dst + r).to(tl.int64)
        a = tl.load(ptr + r)
        b = tl.load(ptr + r + 1)
        off = row * (H * D) + h[:, None] * D + d[None, :]
        y = tl.load(acc + off, mask=hm[:, None], other=0.0)
        for j in range(a, b):
            k = tl.load(src_k + j)
            sr = tl.load(src_r + j).to(tl.int64)
            px = tl.load(xptr + k).to(tl.pointer_type(tl.bfloat16))
            y += tl.load(px + sr * tl.load(sx_r + k) + h[:, None] * tl.load(sx_h + k) + d[None, :], mask=hm[:, None], other=0.0).to(tl.float32)
        tl.store(acc + off, y, mask=hm[:, None])


class PtrTable:
    """Device rows of source pointers and strides, one row per window of a phase, filled through a
    pinned host copy with a non-blocking copy: `torch.tensor(list, device=cuda)` would wait for the
    stream (a blocking copy) and stall the host behind the GPU at every window. A row is written
    once per phase; the runtime synchronizes at phase ends, so no copy of a row is still pending
    when the next phase rewrites it."""

    def __init__(self, n: int, width: int, device, bh: Optional[int] = None):
        dev = torch.device(device)
        self.bh = bh  # heads per kernel program (None: as many as fit 4096 elements, as fused.py)
        self.dev = torch.zeros(max(n, 1), max(width, 1), dtype=torch.int64, device=dev)
        self.host = torch.zeros(self.dev.shape, dtype=torch.int64, pin_memory=dev.type == "cuda")
        self.np = self.host.numpy()

    def put(self, i: int, cols: Sequence[Sequence[int]]) -> List[torch.Tensor]:
        """Writes the columns (each one value per source) into row i; returns their device slices."""
        S = len(cols[0])
        flat = [int(x) for c in cols for x in c]
        self.np[i, : len(flat)] = flat
        self.dev[i, : len(flat)].copy_(self.host[i, : len(flat)], non_blocking=True)
        return [self.dev[i, j * S : (j + 1) * S] for j in range(len(cols))]


def table_for(ws: Sequence[Window], device, per_source: int, bh: Optional[int] = None) -> PtrTable:
    """A PtrTable with one row per window (`per_source` values per source) and each window's row."""
    for i, w in enumerate(ws):
        w.row = i  # type: ignore[attr-defined]
    return PtrTable(len(ws), per_source * max((len(w.launches) for w in ws), default=1), device, bh)


def _bh(table: PtrTable, H: int, D: int) -> int:
    return max(1, min(H, table.bh if table.bh else 4096 // D))


def merge_window_triton(o_acc, lse_acc, os_: Sequence[torch.Tensor], ls: Sequence[torch.Tensor], w: Window, table: PtrTable) -> None:
    """`merge_window_torch` in one Triton launch (sources read in place; D a power of two)."""
    mp = w.plan
    if mp.rows == 0:
        return
    H, D = o_acc.shape[1], o_acc.shape[2]
    os_ = [o if o.stride(2) == 1 else o.contiguous() for o in os_]
    ls = [x if x.dtype == torch.float32 else x.float() for x in ls]
    cols = [[o.data_ptr() for o in os_], [o.stride(0) for o in os_], [o.stride(1) for o in os_],
            [x.data_ptr() for x in ls], [x.stride(0) for x in ls], [x.stride(1) for x in ls]]
    op_, so_r, so_h, lp_, sl_r, sl_h = table.put(w.row, cols)  # type: ignore[attr-defined]
    BH = _bh(table, H, D)
    grid = (int(mp.dst.shape[0]), triton.cdiv(H, BH))
    _merge_ptr_kernel[grid](
        o_acc, lse_acc, op_, lp_, so_r, so_h, sl_r, sl_h, mp.dst, mp.ptr, w.src_k, w.src_r, mp.first,
        H=H, D=D, BH=BH, num_warps=4,
    )
    return os_, ls


def add_window_triton(acc: torch.Tensor, xs: Sequence[torch.Tensor], w: Window, table: PtrTable):
    """`add_window_torch` in one Triton launch (float32 accumulator, sources read in place)."""
    mp = w.plan
    if mp.rows == 0:
        return None
    H, D = acc.shape[1], acc.shape[2]
    xs = [x if x.stride(2) == 1 else x.contiguous() for x in xs]
    xp, sx_r, sx_h = table.put(w.row, [[x.data_ptr() for x in xs], [x.stride(0) for x in xs], [x.stride(1) for x in xs]])  # type: ignore[attr-defined]
    BH = _bh(table, H, D)
    grid = (int(mp.dst.shape[0]), triton.cdiv(H, BH))
    _add_ptr_kernel[grid](acc, xp, sx_r, sx_h, mp.dst, mp.ptr, w.src_k, w.src_r, H=H, D=D, BH=BH, num_warps=4)
    return xs


# ------------------------------------------------------------------------------------------------
# choice at start-up, dispatch, barriers


def probe(device) -> Optional[str]:
    """Both Triton kernels against the torch ones on random windows of strided sources; None if they agree."""
    from .fused import merge_csr_torch  # noqa: F401 - the reference path is merge_window_torch

    g = torch.Generator(device="cpu").manual_seed(2)
    rng = np.random.default_rng(2)
    H, D, n = 8, 128, 300
    rows = [rng.integers(0, n, 200), np.arange(40, 240), rng.integers(0, n, 350)]
    ws = windows(rows, [None] * 3, [len(r) for r in rows], [0, 1, 2], n, device, 2, None)  # windows of 2 and 1 sources
    tm, ta = table_for(ws, device, 6), PtrTable(len(ws), 3 * 3, device)
    accs = [[torch.zeros(n, H, D, device=device), torch.full((n, H), float("-inf"), device=device)] for _ in range(2)]
    sums = [torch.randn(n, H, D, generator=g).to(device) for _ in range(1)]
    sums.append(sums[0].clone())
    os_ = [torch.randn(H, len(r), D, generator=g).to(device, torch.bfloat16).transpose(0, 1) for r in rows]  # strided rows
    ls = [(torch.randn(H, len(r), generator=g) * 3).to(device).t() for r in rows]
    for w in ws:
        so = [os_[i] for i in w.launches]
        sl = [ls[i] for i in w.launches]
        merge_window_triton(accs[0][0], accs[0][1], so, sl, w, tm)
        merge_window_torch(accs[1][0], accs[1][1], so, sl, w)
        add_window_triton(sums[0], so, w, ta)
        add_window_torch(sums[1], so, w)
    torch.cuda.synchronize(device)
    for x, y, name in ((accs[0][0], accs[1][0], "O"), (accs[0][1], accs[1][1], "LSE"), (sums[0], sums[1], "sum")):
        fin = torch.isfinite(y)
        err = float((x[fin] - y[fin]).norm() / (y[fin].norm() + 1e-30))
        if not err < 1e-5 or not torch.equal(torch.isinf(x), torch.isinf(y)):
            return f"deferred {name} mismatch against the torch path (relative error {err:.2e})"
    return None


_BACKEND: dict = {}


def backend(fused) -> str:
    """'triton' where the fused path is Triton and `probe` passes on this device (probed once), else 'torch'."""
    if fused is None or fused.backend != "triton":
        return "torch"
    key = str(fused.device)
    if key not in _BACKEND:
        try:
            err = probe(fused.device)
        except Exception as e:  # noqa: BLE001 - any failure: the torch path
            err = f"{type(e).__name__}: {e}"[:400]
        _BACKEND[key] = ("triton" if err is None else "torch", err)
        if err is not None:
            fused.errors["deferred"] = err
    return _BACKEND[key][0]


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def merge_window(fused, o_acc, lse_acc, os_, ls, w: Window, table: PtrTable):
    """Forward window merge on the probed backend (Triton reads bf16 partials: the GPU compute dtype)."""
    if backend(fused) == "triton" and _pow2(o_acc.shape[2]) and all(o.dtype == torch.bfloat16 for o in os_):
        return merge_window_triton(o_acc, lse_acc, os_, ls, w, table)
    merge_window_torch(o_acc, lse_acc, os_, ls, w)
    return None


def add_window(fused, acc, xs, w: Window, table: PtrTable):
    """Backward window add on the probed backend (Triton reads bf16 sources)."""
    if backend(fused) == "triton" and _pow2(acc.shape[2]) and all(x.dtype == torch.bfloat16 for x in xs):
        return add_window_triton(acc, xs, w, table)
    add_window_torch(acc, xs, w)
    return None


def post_barriers(rt, phase: str, fields: Sequence[str]) -> List[int]:
    """Op positions after which a group is posted that sends one of `fields` (so the deferred sums
    must be applied by then): the order of RankRuntime._run_phase, replayed without data."""
    if rt.local:
        return []
    pp = getattr(rt.prog, phase)
    ops = pp.ops
    out: List[int] = []
    op_ptr = 0
    for g in range(len(pp.groups)):
        spec = rt._group(phase, g)
        while op_ptr <= spec.send_after:
            op_ptr += 1
        if any(part.field in fields for parts in spec.sends.values() for part in parts):
            out.append(op_ptr - 1)
        while op_ptr < len(ops) and ops[op_ptr].after < g:
            op_ptr += 1
    return out

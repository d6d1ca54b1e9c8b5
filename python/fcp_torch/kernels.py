"""Attention kernels over *pieces*, returning the log-sum-exp, and the piece decomposition of tasks.

A plan task attends queries [qs, qs+ql) to keys [ks, ks+kl) of one sequence under the mask in
sequence positions. Kernels know two masks only: full, and causal aligned at the bottom right
(query i of a segment sees keys j <= i + lk - lq; FlashAttention's varlen convention). Every causal
task splits into at most two such pieces (`mode="br"`): a causal piece whose keys end where its
queries end, and a full rectangle for the queries past the key range. Dense cuDNN attention knows only
top-left causal, which equals bottom-right for squares, so `mode="square"` further splits a causal
piece with earlier keys into a full rectangle plus a causal square: FCP's diagonal blocks and the
rectangles off the diagonal.

Backends:
- `math`: plain float32 torch on any device (CPU tests, reference).
- `flash`: `torch.ops.aten._flash_attention_forward/_backward` over packed varlen segments (one
  launch per mask kind), GQA native.
- `cudnn`: `torch.ops.aten._scaled_dot_product_cudnn_attention(_backward)` over dense batches of
  pieces of identical shape; batch sizes are split into powers of two so that the number of distinct
  cuDNN graphs stays small.
- `auto`: cuDNN for piece shapes with both sides >= `AUTO_MIN_LEN` tokens, varlen flash for the rest
  (thresholds chosen from the H200 measurements; see docs/gpu.md).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

AUTO_MIN_LEN = int(os.environ.get("FCP_AUTO_MIN_LEN", "512"))


@dataclass
class Pieces:
    """Kernel pieces: rows of (task, q0, lq, k0, lk, causal) in sequence positions."""

    task: np.ndarray
    seq: np.ndarray
    q0: np.ndarray
    lq: np.ndarray
    k0: np.ndarray
    lk: np.ndarray
    causal: np.ndarray  # bool: bottom-right aligned causal

    def __len__(self) -> int:
        return len(self.task)

    def select(self, m) -> "Pieces":
        return Pieces(*(getattr(self, f)[m] for f in ("task", "seq", "q0", "lq", "k0", "lk", "causal")))


def decompose(seq, qs, ql, ks, kl, causal: bool, mode: str = "br") -> Pieces:
    """Splits tasks into kernel pieces (see the module comment); fully masked parts are dropped."""
    seq, qs, ql, ks, kl = (np.asarray(x, np.int64) for x in (seq, qs, ql, ks, kl))
    n = len(seq)
    tid = np.arange(n, dtype=np.int64)
    if not causal:
        keep = (ql > 0) & (kl > 0)
        return Pieces(tid[keep], seq[keep], qs[keep], ql[keep], ks[keep], kl[keep], np.zeros(int(keep.sum()), bool))
    qe, ke = qs + ql, ks + kl
    k_end = np.minimum(ke, qe)  # keys past the last query are never attended
    q0 = np.maximum(qs, ks)  # queries before the first key attend nothing here
    live = (k_end > ks) & (q0 < qe) & (ql > 0) & (kl > 0)
    full_all = live & (k_end - 1 <= q0)  # every live query sees every (clipped) key
    part = live & ~full_all
    rows: List[Tuple[np.ndarray, ...]] = []
    # Wholly visible: one full piece [q0, qe) x [ks, k_end).
    m = full_all
    rows.append((tid[m], seq[m], q0[m], (qe - q0)[m], ks[m], (k_end - ks)[m], np.zeros(int(m.sum()), bool)))
    # Partly visible: causal piece [q0, k_end) x [ks, k_end) (bottom-right aligned), then the queries
    # past the keys see them all: full piece [k_end, qe) x [ks, k_end).
    m = part
    if mode == "br":
        rows.append((tid[m], seq[m], q0[m], (k_end - q0)[m], ks[m], (k_end - ks)[m], np.ones(int(m.sum()), bool)))
    elif mode == "square":
        mr = m & (ks < q0)
        rows.append((tid[mr], seq[mr], q0[mr], (k_end - q0)[mr], ks[mr], (q0 - ks)[mr], np.zeros(int(mr.sum()), bool)))
        rows.append((tid[m], seq[m], q0[m], (k_end - q0)[m], q0[m], (k_end - q0)[m], np.ones(int(m.sum()), bool)))
    else:
        raise ValueError(f"unknown decomposition mode {mode!r}")
    m = part & (qe > k_end)
    rows.append((tid[m], seq[m], k_end[m], (qe - k_end)[m], ks[m], (k_end - ks)[m], np.zeros(int(m.sum()), bool)))
    cols = [np.concatenate([r[i] for r in rows]) for i in range(7)]
    o = np.argsort(cols[0], kind="stable")
    return Pieces(*(c[o] for c in cols))


def piece_pairs(p: Pieces) -> np.ndarray:
    """Attended pairs of each piece."""
    lq, lk = p.lq, p.lk
    full = lq * lk
    # bottom-right causal: query i sees min(lk, i + lk - lq + 1) keys (lk >= lq in our pieces)
    d = lk - lq
    causal = lq * d + lq * (lq + 1) // 2
    return np.where(p.causal, causal, full)


# ------------------------------------------------------------------------------------------------
# Math kernel (float32, any device)


def _br_mask(lq: int, lk: int, device) -> torch.Tensor:
    i = torch.arange(lq, device=device).unsqueeze(1)
    j = torch.arange(lk, device=device).unsqueeze(0)
    return j <= i + (lk - lq)


def math_forward(q, k, v, causal: bool, scale: float):
    """q [lq, H, D], k/v [lk, Hk, D] -> (o [lq, H, D] float32, lse [lq, H] float32)."""
    lq, H, D = q.shape
    lk, Hk, _ = k.shape
    g = H // Hk
    qf = q.float().reshape(lq, Hk, g, D)
    s = torch.einsum("ihgd,jhd->hgij", qf, k.float()) * scale
    if causal:
        mask = _br_mask(lq, lk, q.device)
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [Hk, g, lq]
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    p = torch.exp(s - safe.unsqueeze(-1))
    if causal:
        p = p.masked_fill(~mask, 0.0)
    o = torch.einsum("hgij,jhd->ihgd", p, v.float()).reshape(lq, H, D)
    return o, lse.permute(2, 0, 1).reshape(lq, H)


def math_backward(q, k, v, o, do, lse, causal: bool, scale: float):
    """Gradients of one piece given the *final* output and LSE of its query rows (float32)."""
    lq, H, D = q.shape
    lk, Hk, _ = k.shape
    g = H // Hk
    qf = q.float().reshape(lq, Hk, g, D)
    kf, vf = k.float(), v.float()
    dof = do.float().reshape(lq, Hk, g, D)
    of = o.float().reshape(lq, Hk, g, D)
    s = torch.einsum("ihgd,jhd->hgij", qf, kf) * scale
    l = lse.float().reshape(lq, Hk, g).permute(1, 2, 0)  # [Hk, g, lq]
    l = torch.where(torch.isinf(l), torch.zeros_like(l), l)
    p = torch.exp(s - l.unsqueeze(-1))
    if causal:
        p = p.masked_fill(~_br_mask(lq, lk, q.device), 0.0)
    dv = torch.einsum("hgij,ihgd->jhd", p, dof)
    dp = torch.einsum("ihgd,jhd->hgij", dof, vf)
    dr = (dof * of).sum(-1).permute(1, 2, 0)  # [Hk, g, lq]
    ds = p * (dp - dr.unsqueeze(-1))
    dq = torch.einsum("hgij,jhd->ihgd", ds, kf).reshape(lq, H, D) * scale
    dk = torch.einsum("hgij,ihgd->jhd", ds, qf) * scale
    return dq, dk, dv


# ------------------------------------------------------------------------------------------------
# Prepared launches


@dataclass
class Launch:
    """One kernel launch over pieces: gather indexes into the rank's slot buffers."""

    kernel: str  # math | flash | cudnn
    causal: bool
    qidx: torch.Tensor  # slots of the packed query rows
    kidx: torch.Tensor  # slots of the packed key rows
    lq: np.ndarray  # per segment
    lk: np.ndarray
    cu_q: Optional[torch.Tensor] = None
    cu_k: Optional[torch.Tensor] = None
    batch: int = 0  # cudnn: dense batch size
    pairs: int = 0
    # First slot of each segment's queries and keys (numpy), for slice-wise merges and adds.
    qf: Optional[np.ndarray] = None
    kf: Optional[np.ndarray] = None
    # (start, end) when the packed rows are one contiguous slot range: a view replaces the gather.
    q_range: Optional[Tuple[int, int]] = None
    k_range: Optional[Tuple[int, int]] = None

    def finish(self) -> "Launch":
        """Fills the contiguous ranges from qf/kf (called once the segments are known)."""
        if self.qf is not None:
            self.q_range = _contiguous(self.qf, self.lq)
        if self.kf is not None:
            self.k_range = _contiguous(self.kf, self.lk)
        return self


def _contiguous(first: np.ndarray, length: np.ndarray) -> Optional[Tuple[int, int]]:
    if len(first) == 0:
        return None
    if len(first) > 1 and not np.array_equal(first[1:], first[:-1] + length[:-1]):
        return None
    return int(first[0]), int(first[-1] + length[-1])


def _t(a: np.ndarray, device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)


def _index(first: np.ndarray, length: np.ndarray) -> np.ndarray:
    from .spaces import ranges_index

    return ranges_index(first, length)


def split_rows(lq: np.ndarray, lk: np.ndarray, max_rows: Optional[int]) -> List[np.ndarray]:
    """Consecutive groups of pieces (indices into lq/lk) whose gathered rows, sum(lq + lk), stay within
    `max_rows` (a piece larger than that is a group alone); one group of all when `max_rows` is None.

    A launch gathers its pieces' Q and K/V rows and returns their outputs (and, backward, dQ/dK/dV)
    as dense temporaries: a ring rank's op reads its query chunk against many K/V chunks, so one
    launch of all of them holds several times the rank's live set. Capping the rows bounds them."""
    n = len(lq)
    if max_rows is None or n == 0:
        return [np.arange(n)]
    rows = (lq + lk).astype(np.int64)
    out, start, acc = [], 0, 0
    for i in range(n):
        if i > start and acc + int(rows[i]) > max_rows:
            out.append(np.arange(start, i))
            start, acc = i, 0
        acc += int(rows[i])
    out.append(np.arange(start, n))
    return out


def plan_launches(
    pieces: Pieces,
    qfirst: np.ndarray,
    kfirst: np.ndarray,
    kernel: str,
    device,
    available: Dict[str, bool],
    max_rows: Optional[int] = None,
    solo_pairs: Optional[int] = None,
) -> List[Launch]:
    """Groups an op's pieces into launches for `kernel` (math, flash, cudnn, auto); `max_rows`
    bounds each launch's gathered rows (split_rows; None: one launch per kind and shape class).
    `solo_pairs`: cuDNN pieces of at least this many (lq x lk) pairs are launched one per launch,
    so that their Q and K/V are views of the slot buffers instead of gathered copies (a batch of
    two 4096 x 4096 pieces gathers 8192 query rows of 16 KB and their K/V: fcp-256's heaviest rank
    gathers 5.7 GB per forward for 26 such launches, CPU count from the plan)."""
    out: List[Launch] = []
    pairs = piece_pairs(pieces)

    def varlen(m: np.ndarray, name: str) -> None:
        for c in (False, True):
            sel = np.nonzero(m & (pieces.causal == c))[0]
            for part in split_rows(pieces.lq[sel], pieces.lk[sel], max_rows):
                if len(part):
                    one(sel[part], c, name)

    def one(mm: np.ndarray, c: bool, name: str) -> None:
        lq, lk = pieces.lq[mm], pieces.lk[mm]
        cu_q = np.concatenate(([0], np.cumsum(lq))).astype(np.int32)
        cu_k = np.concatenate(([0], np.cumsum(lk))).astype(np.int32)
        out.append(
            Launch(
                name,
                c,
                _t(_index(qfirst[mm], lq), device),
                _t(_index(kfirst[mm], lk), device),
                lq,
                lk,
                torch.from_numpy(cu_q).to(device) if name == "flash" else None,
                torch.from_numpy(cu_k).to(device) if name == "flash" else None,
                pairs=int(pairs[mm].sum()),
                qf=qfirst[mm],
                kf=kfirst[mm],
            ).finish()
        )

    if kernel == "math":
        # One launch per piece keeps the math kernel's memory at one piece's scores.
        for i in range(len(pieces)):
            lq, lk = pieces.lq[i : i + 1], pieces.lk[i : i + 1]
            out.append(
                Launch(
                    "math",
                    bool(pieces.causal[i]),
                    _t(_index(qfirst[i : i + 1], lq), device),
                    _t(_index(kfirst[i : i + 1], lk), device),
                    lq,
                    lk,
                    pairs=int(pairs[i]),
                    qf=qfirst[i : i + 1],
                    kf=kfirst[i : i + 1],
                ).finish()
            )
        return out
    if kernel == "flash":
        varlen(np.ones(len(pieces), bool), "flash")
        return out
    use_cudnn = np.ones(len(pieces), bool)
    if kernel == "auto":
        use_cudnn = (pieces.lq >= AUTO_MIN_LEN) & (pieces.lk >= AUTO_MIN_LEN)
        if not available.get("cudnn", False):
            use_cudnn[:] = False
    elif kernel != "cudnn":
        raise ValueError(f"unknown kernel {kernel!r}")
    # Dense cuDNN batches: causal pieces must be squares (top-left == bottom-right).
    use_cudnn &= ~pieces.causal | (pieces.lq == pieces.lk)
    idx = np.nonzero(use_cudnn)[0]
    if len(idx):
        key = np.stack([pieces.lq[idx], pieces.lk[idx], pieces.causal[idx].astype(np.int64)], 1)
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        for u in range(len(uniq)):
            members = idx[inv == u]
            lq_, lk_, c_ = (int(x) for x in uniq[u])
            # powers of two, largest first, to bound distinct cuDNN graphs (and at most max_rows rows)
            cap = len(members) if max_rows is None else max(1, max_rows // (lq_ + lk_))
            if solo_pairs is not None and lq_ * lk_ >= solo_pairs:
                cap = 1
            pos = 0
            n = len(members)
            while pos < n:
                b = 1 << int(math.floor(math.log2(min(n - pos, cap))))
                mem = members[pos : pos + b]
                pos += b
                out.append(
                    Launch(
                        "cudnn",
                        bool(c_),
                        _t(_index(qfirst[mem], pieces.lq[mem]), device),
                        _t(_index(kfirst[mem], pieces.lk[mem]), device),
                        pieces.lq[mem],
                        pieces.lk[mem],
                        batch=b,
                        pairs=int(pairs[mem].sum()),
                        qf=qfirst[mem],
                        kf=kfirst[mem],
                    ).finish()
                )
    rest = ~use_cudnn
    if rest.any():
        varlen(rest, "flash" if available.get("flash", False) else "math")
    return out


# ------------------------------------------------------------------------------------------------
# Kernel calls


class Kernels:
    """Calls the attention kernels; probes once which GPU paths work on this device."""

    def __init__(self, device: torch.device, dtype: torch.dtype, scale: float):
        self.device = device
        self.dtype = dtype
        self.scale = scale
        self.available: Dict[str, bool] = {"math": True, "flash": False, "cudnn": False}
        self.errors: Dict[str, str] = {}
        self.flash_lse_layout = "HT"  # [H, total_q]; or "BHM": padded [batch, H, max_q]
        self.cudnn_gqa = True
        if device.type == "cuda":
            self._probe()

    # --- probing ---------------------------------------------------------------------------
    def _probe(self) -> None:
        g = torch.Generator(device="cpu").manual_seed(0)
        H, Hk, D = 4, 2, 64
        lq = [64, 48]
        lk = [64, 80]
        attempts = [("flash", None), ("cudnn", True), ("cudnn", False)]  # cuDNN: native GQA, then expanded heads
        for name, gqa in attempts:
            if self.available.get(name):
                continue
            if gqa is not None:
                self.cudnn_gqa = gqa
            try:
                ok = self._probe_one(name, g, H, Hk, D, lq, lk)
                self.available[name] = ok
                if not ok:
                    self.errors[f"{name}{'' if gqa is None else f' gqa={gqa}'}"] = "numerics mismatch against the math kernel"
            except Exception as e:  # noqa: BLE001 - any failure disables the path
                self.available[name] = False
                self.errors[f"{name}{'' if gqa is None else f' gqa={gqa}'}"] = f"{type(e).__name__}: {e}"[:400]

    def _probe_one(self, name, g, H, Hk, D, lq, lk) -> bool:
        dev, dt = self.device, self.dtype
        if name == "cudnn":
            lq, lk = [64, 64], [64, 64]
        q = torch.randn(sum(lq), H, D, generator=g).to(dev, dt)
        k = torch.randn(sum(lk), Hk, D, generator=g).to(dev, dt)
        v = torch.randn(sum(lk), Hk, D, generator=g).to(dev, dt)
        do = torch.randn(sum(lq), H, D, generator=g).to(dev, dt)
        L = Launch(
            name,
            True,
            torch.arange(sum(lq), device=dev),
            torch.arange(sum(lk), device=dev),
            np.array(lq),
            np.array(lk),
            batch=len(lq),
        )
        if name == "flash":
            L.cu_q = torch.tensor(np.concatenate(([0], np.cumsum(lq))), dtype=torch.int32, device=dev)
            L.cu_k = torch.tensor(np.concatenate(([0], np.cumsum(lk))), dtype=torch.int32, device=dev)
        if name == "flash":
            # discover the LSE layout
            out = torch.ops.aten._flash_attention_forward(
                q, k, v, L.cu_q, L.cu_k, max(lq), max(lk), 0.0, True, False, scale=self.scale
            )
            lse = out[1]
            self.flash_lse_layout = "HT" if lse.dim() == 2 else "BHM"
        o, lse = self.forward(L, q, k, v)
        ro, rl, rdq, rdk, rdv = [], [], [], [], []
        qo = ko = 0
        for a, b in zip(lq, lk):
            oo, ll = math_forward(q[qo : qo + a], k[ko : ko + b], v[ko : ko + b], True, self.scale)
            ro.append(oo)
            rl.append(ll)
            qo += a
            ko += b
        ro_t, rl_t = torch.cat(ro), torch.cat(rl)
        if not _close(o.float(), ro_t, 2e-2) or not _close(lse, rl_t, 2e-2):
            return False
        dq, dk, dv = self.backward(L, q, k, v, ro_t.to(dt), do, rl_t)
        qo = ko = 0
        for a, b in zip(lq, lk):
            x = math_backward(
                q[qo : qo + a], k[ko : ko + b], v[ko : ko + b], ro_t[qo : qo + a], do[qo : qo + a], rl_t[qo : qo + a], True, self.scale
            )
            rdq.append(x[0])
            rdk.append(x[1])
            rdv.append(x[2])
            qo += a
            ko += b
        return (
            _close(dq.float(), torch.cat(rdq), 3e-2)
            and _close(dk.float(), torch.cat(rdk), 3e-2)
            and _close(dv.float(), torch.cat(rdv), 3e-2)
        )

    # --- forward -----------------------------------------------------------------------------
    def forward(self, L: Launch, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """Packed q [n, H, D], k/v [m, Hk, D] -> (o [n, H, D], lse [n, H] float32)."""
        if L.kernel == "math":
            return self._math_fwd(L, q, k, v)
        if L.kernel == "flash":
            out = torch.ops.aten._flash_attention_forward(
                q, k, v, L.cu_q, L.cu_k, int(L.lq.max()), int(L.lk.max()), 0.0, L.causal, False, scale=self.scale
            )
            o, lse = out[0], out[1]
            return o, self._flash_lse_unpack(L, lse)
        if L.kernel == "cudnn":
            return self._cudnn_fwd(L, q, k, v)
        raise ValueError(L.kernel)

    def _math_fwd(self, L, q, k, v):
        os_, ls_ = [], []
        qo = ko = 0
        for a, b in zip(L.lq.tolist(), L.lk.tolist()):
            o, l = math_forward(q[qo : qo + a], k[ko : ko + b], v[ko : ko + b], L.causal, self.scale)
            os_.append(o)
            ls_.append(l)
            qo += a
            ko += b
        return torch.cat(os_), torch.cat(ls_)

    def _flash_lse_unpack(self, L: Launch, lse: torch.Tensor) -> torch.Tensor:
        if lse.dim() == 2:  # [H, total_q]
            return lse.t()
        # padded [B, H, max_q] -> packed rows
        b_of = np.repeat(np.arange(len(L.lq)), L.lq)
        i_of = np.arange(int(L.lq.sum())) - np.repeat(np.concatenate(([0], np.cumsum(L.lq)[:-1])), L.lq)
        bi = torch.from_numpy(b_of).to(lse.device)
        ii = torch.from_numpy(i_of).to(lse.device)
        return lse[bi, :, ii]

    def _flash_lse_pack(self, L: Launch, lse_rows: torch.Tensor) -> torch.Tensor:
        if self.flash_lse_layout == "HT":
            return lse_rows.t().contiguous()
        B, M = len(L.lq), int(L.lq.max())
        out = torch.zeros(B, lse_rows.shape[1], M, dtype=torch.float32, device=lse_rows.device)
        b_of = np.repeat(np.arange(B), L.lq)
        i_of = np.arange(int(L.lq.sum())) - np.repeat(np.concatenate(([0], np.cumsum(L.lq)[:-1])), L.lq)
        out[torch.from_numpy(b_of).to(out.device), :, torch.from_numpy(i_of).to(out.device)] = lse_rows
        return out

    def _dense(self, L: Launch, x: torch.Tensor, length: int) -> torch.Tensor:
        # [B*len, H, D] -> [B, H, len, D] (a strided view; cuDNN reads BSHD layouts natively)
        return x.view(L.batch, length, x.shape[1], x.shape[2]).transpose(1, 2)

    def _expand(self, k: torch.Tensor, H: int) -> torch.Tensor:
        # [B, Hk, L, D] -> [B, H, L, D] for cuDNN builds without grouped-query support
        Hk = k.shape[1]
        if Hk == H or self.cudnn_gqa:
            return k
        return k.repeat_interleave(H // Hk, dim=1)

    def _cudnn_fwd(self, L, q, k, v):
        lq, lk = int(L.lq[0]), int(L.lk[0])
        H = q.shape[1]
        qd, kd, vd = self._dense(L, q, lq), self._dense(L, k, lk), self._dense(L, v, lk)
        try:
            res = torch.ops.aten._scaled_dot_product_cudnn_attention(
                qd, self._expand(kd, H), self._expand(vd, H), None, True, 0.0, L.causal, False, scale=self.scale
            )
        except RuntimeError:
            if not self.cudnn_gqa or kd.shape[1] == H:
                raise
            self.cudnn_gqa = False
            res = torch.ops.aten._scaled_dot_product_cudnn_attention(
                qd, self._expand(kd, H), self._expand(vd, H), None, True, 0.0, L.causal, False, scale=self.scale
            )
        o, lse = res[0], res[1]
        o = o.transpose(1, 2).reshape(L.batch * lq, H, -1)
        lse = lse.reshape(L.batch, H, lq).transpose(1, 2).reshape(L.batch * lq, H)
        return o, lse.float()

    # --- backward ----------------------------------------------------------------------------
    def _flash_bwd(self, L, do, q, k, v, o, lse):
        # Without dropout the RNG state is unused, but its expected dtype differs between versions.
        dev = q.device
        variants = [
            lambda: (torch.zeros(2, dtype=torch.int64, device=dev), torch.empty(0, dtype=torch.int64, device=dev)),
            lambda: (torch.zeros(2, dtype=torch.uint64, device=dev), torch.empty(0, dtype=torch.uint64, device=dev)),
            lambda: (torch.empty(0, device=dev), torch.empty(0, device=dev)),
        ]
        order = [self._flash_variant] if getattr(self, "_flash_variant", None) is not None else range(len(variants))
        last = None
        for i in order:
            try:
                rng, unused = variants[i]()
                res = torch.ops.aten._flash_attention_backward(
                    do, q, k, v, o, lse, L.cu_q, L.cu_k, int(L.lq.max()), int(L.lk.max()), 0.0, L.causal, rng, unused, scale=self.scale
                )
                self._flash_variant = i
                return res
            except (RuntimeError, TypeError, AttributeError) as e:
                last = e
        raise last  # type: ignore[misc]

    def _cudnn_bwd(self, dod, qd, kd, vd, od, lse, lq, lk, causal):
        variants = _cudnn_variants(qd.device)
        order = [self._cudnn_variant] if getattr(self, "_cudnn_variant", None) is not None else range(len(variants))
        last = None
        for i in order:
            bias, cq, ck, seed, off, lse4 = variants[i]
            try:
                res = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
                    dod, qd, kd, vd, od, lse.unsqueeze(-1) if lse4 else lse, seed, off, bias, cq, ck, lq, lk, 0.0, causal, scale=self.scale
                )
                self._cudnn_variant = i
                return res
            except (RuntimeError, TypeError) as e:
                last = e
        raise last  # type: ignore[misc]

    def backward(self, L: Launch, q, k, v, o, do, lse_rows):
        """Gradients (dq [n, H, D], dk/dv [m, Hk, D]) of one launch given final o and lse rows."""
        if L.kernel == "math":
            dqs, dks, dvs = [], [], []
            qo = ko = 0
            for a, b in zip(L.lq.tolist(), L.lk.tolist()):
                x = math_backward(
                    q[qo : qo + a], k[ko : ko + b], v[ko : ko + b], o[qo : qo + a], do[qo : qo + a], lse_rows[qo : qo + a], L.causal, self.scale
                )
                dqs.append(x[0])
                dks.append(x[1])
                dvs.append(x[2])
                qo += a
                ko += b
            return torch.cat(dqs), torch.cat(dks), torch.cat(dvs)
        if L.kernel == "flash":
            lse = self._flash_lse_pack(L, lse_rows)
            return self._flash_bwd(L, do, q, k, v, o, lse)
        if L.kernel == "cudnn":
            lq, lk = int(L.lq[0]), int(L.lk[0])
            H = q.shape[1]
            Hk = k.shape[1]
            qd, kd, vd = self._dense(L, q, lq), self._expand(self._dense(L, k, lk), H), self._expand(self._dense(L, v, lk), H)
            od, dod = self._dense(L, o, lq), self._dense(L, do, lq)
            lse = lse_rows.reshape(L.batch, lq, H).transpose(1, 2).contiguous()
            dq, dk, dv = self._cudnn_bwd(dod, qd, kd, vd, od, lse, lq, lk, L.causal)
            dq = dq.transpose(1, 2).reshape(L.batch * lq, H, -1)
            if dk.shape[1] != Hk:  # expanded heads: sum each group back
                g = dk.shape[1] // Hk
                dk = dk.view(L.batch, Hk, g, lk, -1).sum(2)
                dv = dv.view(L.batch, Hk, g, lk, -1).sum(2)
            dk = dk.transpose(1, 2).reshape(L.batch * lk, Hk, -1)
            dv = dv.transpose(1, 2).reshape(L.batch * lk, Hk, -1)
            return dq, dk, dv
        raise ValueError(L.kernel)


_VARIANTS: dict = {}


def _cudnn_variants(device):
    """Argument variants of the cuDNN backward's optional inputs, tried in order (versions differ).
    Built once per device: they are only read (no dropout), and building them per launch cost a
    fill kernel and two allocations on every backward launch."""
    key = str(device)
    hit = _VARIANTS.get(key)
    if hit is None:
        hit = _VARIANTS[key] = _build_variants(device)
    return hit


def _build_variants(device):
    e = torch.empty(0, device=device)
    z = torch.zeros((), dtype=torch.int64, device=device)
    return [
        (None, None, None, z, z, True),
        (None, None, None, z, z, False),
        (e, e, e, z, z, True),
        (e, e, e, z, z, False),
    ]


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    a = a.float()
    b = b.float().to(a.device)
    if not torch.isfinite(a).all():
        return False
    num = (a - b).norm().item()
    den = b.norm().item() + 1e-30
    return num / den < tol


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| in float64."""
    a = a.double().cpu()
    b = b.double().cpu()
    return float((a - b).norm() / (b.norm() + 1e-300))


def merge_slice(o_acc: torch.Tensor, lse_acc: torch.Tensor, a: int, o: torch.Tensor, lse: torch.Tensor) -> None:
    """Merges one segment's (o, lse) into accumulator rows [a, a + len(o)) in place.

    One pass over the rows: with w = sigmoid(lse - lse_acc) = exp(lse - lse'), the merged output is
    o_acc + w (o - o_acc), a lerp (the rows of a kernel piece always attend at least one key).
    """
    n = o.shape[0]
    la = lse_acc[a : a + n]
    w = torch.sigmoid(lse.float() - la)
    o_acc[a : a + n].lerp_(o.float(), w.unsqueeze(-1))
    torch.logaddexp(la, lse.float(), out=la)


def merge_into(
    o_acc: torch.Tensor,
    lse_acc: torch.Tensor,
    idx: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    unique: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
) -> None:
    """Merges partial attention results (o, lse) of rows `idx` into the accumulators, in place.

    Rows may repeat in `idx` (several pieces for one query row). Online-softmax merge:
    lse' = log(exp(lse_acc) + sum exp(lse_i)); o' = o_acc exp(lse_acc - lse') + sum o_i exp(lse_i - lse').
    """
    if idx.numel() == 0:
        return
    # torch.unique on a GPU waits for the device; callers with a fixed idx pass it precomputed.
    u, inv = unique if unique is not None else torch.unique(idx, return_inverse=True)
    old_l = lse_acc.index_select(0, u)
    old_o = o_acc.index_select(0, u)
    lse = lse.float()
    mx = old_l.clone()
    mx.index_reduce_(0, inv, lse, "amax", include_self=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    s = torch.exp(old_l - mx)
    s.index_add_(0, inv, torch.exp(lse - mx.index_select(0, inv)))
    new_l = mx + torch.log(s)
    finite = torch.isfinite(new_l)
    ref = torch.where(finite, new_l, torch.zeros_like(new_l))
    w_old = torch.where(finite, torch.exp(old_l - ref), torch.zeros_like(ref))
    w_new = torch.exp(lse - ref.index_select(0, inv))
    w_new = torch.where(torch.isfinite(lse), w_new, torch.zeros_like(w_new))
    new_o = old_o * w_old.unsqueeze(-1)
    new_o.index_add_(0, inv, o.float() * w_new.unsqueeze(-1))
    o_acc.index_copy_(0, u, new_o)
    lse_acc.index_copy_(0, u, new_l)

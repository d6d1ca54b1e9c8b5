"""The K/V pool inside `RankRuntime`: every K/V slot of a phase mapped to a row of a pool sized by
the phase's peak live set (liveness.py), so a rank allocates its K/V (and float32 dK/dV) once, at
the size the plan says, instead of one row for every token it ever holds.

What the pool changes in the runtime (issue 17, deliverable 2):

- launches read pool rows: `remap_launch` rewrites a launch's key index, its contiguous key range
  and the per-segment first rows of slice-wise adds (dropped when a segment is no longer
  contiguous in the pool, the launch then gathers and scatters);
- messages: every K/V-space part of a group (`in`/`kv` K and V, `dkv` and backward `out` dK/dV)
  is mapped through the same table when the group's layout is built (RankRuntime._group);
- the rank's own rows (`user_kv`, `base_kv`) live for the whole phase, so they keep their rows;
- a row that passes from one slot to another in the backward still holds the old slot's float32
  dK/dV (a `dkv` send zeroes it, a backward `out` send does not) and possibly an incoming partial:
  `zero_at` lists, per issue event, the rows whose new slot is first touched there and that an
  earlier slot used; the runtime zeroes dK, dV, dK_in and dV_in at those rows before the event
  (on the communication stream for a group, which waits for the compute stream first, so the
  zeroing is ordered after the old slot's last op and before the group's receives).
  K and V themselves need no zeroing: a non-own slot's K/V is written by the receive that brings
  it before any op reads it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np
import torch

from .liveness import allocate, check_allocation, issue_order, lifetimes
from .plan import PlanError


@dataclass
class PhasePool:
    """One phase's slot -> pool row table, its size and the rows to zero per event."""

    pool_of: np.ndarray  # [slots] pool row, -1 for slots never touched
    rows: int
    # ("op", i) / ("post", g) -> pool rows to zero before that event (backward only)
    zero_at: Dict[Tuple[str, int], torch.Tensor]

    def map(self, idx: np.ndarray) -> np.ndarray:
        """Pool rows of slots; a slot outside every lifetime is a runtime error (a plan the
        lifetimes do not cover), reported rather than read from row -1."""
        r = self.pool_of[np.asarray(idx, np.int64)]
        if len(r) and int(r.min()) < 0:
            raise PlanError("run.pool", "a K/V slot is used outside its computed lifetime (no pool row)")
        return r


def build(rt, phase: str) -> PhasePool:
    """Lifetimes, allocation (checked) and the zero-on-reuse lists of one phase of `rt`."""
    prog = rt.prog
    lt = lifetimes(prog, phase, rt.kvspace[phase], rt.base_space, local=rt.local)
    pool_of, size = allocate(lt)
    bad = check_allocation(lt, pool_of)
    if bad:
        raise PlanError("run.pool", "; ".join(bad))
    zero_at: Dict[Tuple[str, int], torch.Tensor] = {}
    if phase == "backward":
        s = np.nonzero(pool_of >= 0)[0]
        o = np.lexsort((lt.first[s], pool_of[s]))
        s = s[o]
        # a slot that is not the first owner of its row: its row held another slot's partials
        reused = np.zeros(len(s), bool)
        reused[1:] = pool_of[s][1:] == pool_of[s][:-1]
        s = s[reused]
        if len(s):
            ev = issue_order(prog, phase, rt.local)
            t = lt.first[s]
            order = np.argsort(t, kind="stable")
            s, t = s[order], t[order]
            cut = np.nonzero(np.diff(t))[0] + 1
            for a, b in zip(np.concatenate(([0], cut)).tolist(), np.concatenate((cut, [len(t)])).tolist()):
                zero_at[ev[int(t[a])]] = rt._t(np.sort(pool_of[s[a:b]]))
    return PhasePool(pool_of, int(size), zero_at)


def remap_launch(L, pool: PhasePool, device) -> None:
    """Points a launch's key rows at pool rows (in place; launches are built once per plan)."""
    k = pool.map(L.kidx.cpu().numpy())
    L.kidx = torch.from_numpy(np.ascontiguousarray(k)).to(device)
    contig = len(k) > 0 and bool(np.all(np.diff(k) == 1))
    L.k_range = (int(k[0]), int(k[-1]) + 1) if contig else None
    if L.kf is not None:
        starts = np.concatenate(([0], np.cumsum(L.lk)[:-1])).astype(np.int64)
        seg_ok = all(np.all(np.diff(k[a : a + n]) == 1) for a, n in zip(starts.tolist(), L.lk.tolist()))
        if seg_ok:
            L.kf = k[starts] if len(k) else L.kf
        else:
            L.qf = L.kf = None  # slice-wise adds need contiguous rows per segment


def zero_rows(b: Dict[str, torch.Tensor], rows: torch.Tensor) -> None:
    """Zeroes the float32 dK/dV (and incoming partial) rows handed to a new slot."""
    for f in ("dK", "dV", "dK_in", "dV_in"):
        x = b.get(f)
        if x is not None:
            x.index_fill_(0, rows, 0.0)

"""Liveness of a rank's K/V slots and a pool allocator sized by the peak live set.

`TokenSpace` gives every token a rank ever holds its own slot for the whole phase, so a ring rank at
256 ranks holds the whole batch's K/V. Here each K/V slot of a phase gets a lifetime in the rank's
*issue order* (the order in which `RankRuntime._run_phase` issues ops and posts groups):

- the rank's own tokens (user and home) live for the whole phase;
- any other token lives from the first event that touches it (the group that brings it, an op that
  reads it, a group that sends it or its dK/dV partial) to the last such event.

Lifetimes are inclusive event intervals [first, last]. `peak_live` is the most slots alive at one
event: the K/V rows the rank must hold, computed from the plan before anything is allocated.
`allocate` maps every slot to a pool row so that slots alive at the same time never share a row;
it takes freed rows first (last freed, first reused, which keeps a range arriving after one just
freed contiguous) and grows the pool only when none is free, so the pool has exactly `peak_live`
rows. Writes into a reused row happen at the event that first touches its new slot, which comes
after the last event of the row's previous slot in issue order; on one CUDA stream (and on the
communication stream, which waits for the compute stream at each post) that order is execution
order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from .plan import KIND_DKV, KIND_IN, KIND_KV, KIND_OUT, PhaseProgram, RankProgram
from .spaces import TokenSpace

# Transfer kinds whose fields live in the K/V space, per phase (see runtime.FIELDS).
KV_KINDS = {"forward": (KIND_IN, KIND_KV), "backward": (KIND_KV, KIND_DKV, KIND_OUT)}


def issue_order(prog: RankProgram, phase: str, local: bool = False) -> List[Tuple[str, int]]:
    """("op", i) and ("post", g) events in the order `RankRuntime._run_phase` issues them."""
    pp: PhaseProgram = getattr(prog, phase)
    ops = pp.ops
    ev: List[Tuple[str, int]] = []
    i = 0
    G = 0 if local else len(pp.groups)
    for g in range(G):
        grp = pp.groups[g]
        sa = grp.send_after[grp.src == prog.rank]
        last = int(sa.max()) if len(sa) else -1
        while i <= last:
            ev.append(("op", i))
            i += 1
        ev.append(("post", g))
        while i < len(ops) and ops[i].after < g:
            ev.append(("op", i))
            i += 1
    while i < len(ops):
        ev.append(("op", i))
        i += 1
    return ev


@dataclass
class Lifetimes:
    """Per K/V slot of a phase: first and last event (inclusive); -1 for slots never touched."""

    first: np.ndarray
    last: np.ndarray
    events: int

    def live_counts(self) -> np.ndarray:
        """Slots alive at each event."""
        m = self.first >= 0
        d = np.bincount(self.first[m], minlength=self.events + 1) - np.bincount(self.last[m] + 1, minlength=self.events + 1)
        return np.cumsum(d)[: self.events]

    def peak(self) -> int:
        c = self.live_counts()
        return int(c.max()) if len(c) else 0


def lifetimes(prog: RankProgram, phase: str, space: TokenSpace, base: TokenSpace, local: bool = False) -> Lifetimes:
    """Lifetimes of every slot of `space` (the phase's K/V space) in issue order; `base`: own tokens."""
    ev = issue_order(prog, phase, local)
    T = max(len(ev), 1)
    pp: PhaseProgram = getattr(prog, phase)
    me = prog.rank
    idx_parts: List[np.ndarray] = []
    t_parts: List[np.ndarray] = []
    kinds = np.asarray(KV_KINDS[phase])
    for t, (what, j) in enumerate(ev):
        if what == "op":
            op = pp.ops[j]
            idx = space.index(op.seq, op.kv_start, op.kv_length)
        else:
            grp = pp.groups[j]
            m = ((grp.src == me) | (grp.dst == me)) & np.isin(grp.kind, kinds)
            if not m.any():
                continue
            idx = space.index(grp.seq[m], grp.start[m], grp.length[m])
        idx_parts.append(idx)
        t_parts.append(np.full(len(idx), t, np.int64))
    n = space.size
    first = np.full(n, -1, np.int64)
    last = np.full(n, -1, np.int64)
    if idx_parts:
        idx = np.concatenate(idx_parts)
        tt = np.concatenate(t_parts)
        u, pos = np.unique(idx, return_index=True)
        first[u] = tt[pos]  # events are concatenated in time order: first occurrence = first touch
        u, pos = np.unique(idx[::-1], return_index=True)
        last[u] = tt[::-1][pos]
    own = space.index(base.seq, base.start, base.end - base.start)
    first[own] = 0
    last[own] = T - 1
    return Lifetimes(first, last, T)


def allocate(lt: Lifetimes) -> Tuple[np.ndarray, int]:
    """Pool row of every slot (-1 for untouched slots) and the pool size (= `lt.peak()`).

    Slots are handled in runs (consecutive slots with one lifetime, e.g. one received range). At each
    event, runs whose last event has passed give their rows back to a LIFO free list, then runs that
    start are placed on free rows (splitting a run across free pieces if needed), the pool growing
    only when the free list is empty: the pool never exceeds the most rows alive at one event.
    """
    n = len(lt.first)
    pool_of = np.full(n, -1, np.int64)
    touched = np.nonzero(lt.first >= 0)[0]
    if len(touched) == 0:
        return pool_of, 0
    f, l = lt.first[touched], lt.last[touched]
    brk = np.nonzero((np.diff(touched) != 1) | (np.diff(f) != 0) | (np.diff(l) != 0))[0] + 1
    starts = np.concatenate(([0], brk))
    ends = np.concatenate((brk, [len(touched)]))
    run_first = f[starts]
    run_last = l[starts]
    order = np.argsort(run_first, kind="stable")
    free_at: dict = {}
    for r in order.tolist():
        free_at.setdefault(int(run_last[r]) + 1, []).append(r)
    pieces: dict = {}
    free: List[Tuple[int, int]] = []  # (row, length), LIFO
    top = 0
    ptr = 0
    R = len(order)
    run_first_sorted = run_first[order]
    free_times = sorted(free_at)
    fp = 0
    for t in np.unique(run_first).tolist():
        while fp < len(free_times) and free_times[fp] <= t:
            for r in free_at[free_times[fp]]:
                free.extend(reversed(pieces.pop(r)))
            fp += 1
        while ptr < R and run_first_sorted[ptr] == t:
            r = int(order[ptr])
            ptr += 1
            need = int(ends[r] - starts[r])
            got: List[Tuple[int, int]] = []
            while need > 0:
                if free:
                    a, m = free.pop()
                    take = min(m, need)
                    if take < m:
                        free.append((a + take, m - take))
                else:
                    a, take = top, need
                    top += need
                got.append((a, take))
                need -= take
            pieces[r] = got
            rows = np.concatenate([np.arange(a, a + m, dtype=np.int64) for a, m in got])
            pool_of[touched[starts[r] : ends[r]]] = rows
    return pool_of, top


def check_allocation(lt: Lifetimes, pool_of: np.ndarray) -> List[str]:
    """Problems of an allocation: slots alive at the same event on one row, touched slots without a row."""
    bad: List[str] = []
    m = lt.first >= 0
    if np.any(pool_of[m] < 0):
        bad.append("a touched slot has no pool row")
    s = np.nonzero(m & (pool_of >= 0))[0]
    o = np.lexsort((lt.first[s], pool_of[s]))
    s = s[o]
    same = pool_of[s][1:] == pool_of[s][:-1]
    overlap = same & (lt.first[s][1:] <= lt.last[s][:-1])
    if overlap.any():
        k = int(np.nonzero(overlap)[0][0])
        bad.append(
            f"slots {int(s[k])} and {int(s[k + 1])} share pool row {int(pool_of[s[k]])} while both alive "
            f"(events {int(lt.first[s[k]])}-{int(lt.last[s[k]])} and {int(lt.first[s[k + 1]])}-{int(lt.last[s[k + 1]])})"
        )
    return bad


def live_set_bytes(prog: RankProgram, q_rows: int, kv_rows: dict, dtype_bytes: int = 2) -> dict:
    """Bytes a rank must hold per phase (what the pool-sized runtime allocates once).

    forward: Q (dtype), O and LSE (float32) over the query space; K, V (dtype) over the K/V pool.
    backward: Q, final O, dO (dtype), LSE and dQ (float32); K, V (dtype) and dK, dV (float32) over the pool.
    """
    H, Hk, D = prog.q_heads, prog.kv_heads, prog.head_dim
    fwd = q_rows * (H * D * (dtype_bytes + 4) + H * 4) + kv_rows["forward"] * Hk * D * 2 * dtype_bytes
    bwd = q_rows * (H * D * (3 * dtype_bytes + 4) + H * 4) + kv_rows["backward"] * Hk * D * 2 * (dtype_bytes + 4)
    return {"forward": int(fwd), "backward": int(bwd)}

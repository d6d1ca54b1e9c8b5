"""Task fusion: the tasks of one query range whose K/V ranges touch become one task (fewer partials).

A plan gives a rank many tasks per query block: one per K/V block it attends. Each task is a kernel
piece (or two, on the diagonal), so each adds one partial output row per query to merge online in
float32 (forward), and one dQ row plus dK/dV rows to add in float32 (backward). Where tasks of the
same sequence and query range [qs, qs+ql) have K/V ranges that touch ([a, b) and [b, c)), the
rank's K/V space already holds them as one contiguous slot range (spaces.TokenSpace merges touching
ranges per sequence), so one task over [a, c) computes exactly the union of their (query, key)
pairs in one kernel call: the kernel does the softmax merge in registers instead of us in memory.
Decomposed (kernels.decompose, `square`), a fused causal task is one full rectangle over the
off-diagonal keys plus the causal diagonal square: 2 partials instead of one per block.

Scope: tasks of one op only (ops keep their `after` groups, so the schedule is the plan's). Fusing
across ops would wait for later groups; deferred.py cuts the partials' traffic across ops instead.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from .plan import Op


def fuse_tasks(seq, q_start, q_length, kv_start, kv_length):
    """Merges tasks with equal (seq, q_start, q_length) whose K/V ranges touch (end == next start).

    Returns (seq, q_start, q_length, kv_start, kv_length) of the fused tasks, sorted by
    (seq, q_start, q_length, kv_start). Overlapping K/V ranges are left apart (a plan never has them
    in one query range: the pair would be counted twice), as are gaps."""
    seq, qs, ql, ks, kl = (np.asarray(x, np.int64) for x in (seq, q_start, q_length, kv_start, kv_length))
    keep = (ql > 0) & (kl > 0)
    seq, qs, ql, ks, kl = seq[keep], qs[keep], ql[keep], ks[keep], kl[keep]
    n = len(seq)
    if n == 0:
        return seq, qs, ql, ks, kl
    o = np.lexsort((ks, ql, qs, seq))
    seq, qs, ql, ks, kl = seq[o], qs[o], ql[o], ks[o], kl[o]
    ke = ks + kl
    same = np.zeros(n, bool)
    same[1:] = (seq[1:] == seq[:-1]) & (qs[1:] == qs[:-1]) & (ql[1:] == ql[:-1]) & (ks[1:] == ke[:-1])
    head = np.nonzero(~same)[0]
    # a run of touching tasks ends at the task before the next head
    last = np.concatenate((head[1:], [n])) - 1
    return seq[head], qs[head], ql[head], ks[head], ke[last] - ks[head]


def fuse_ops(ops: Sequence[Op]) -> List[Op]:
    """Ops with their tasks fused (`fuse_tasks`): one output op per input op, same index and `after`."""
    return [Op(op.index, op.after, *fuse_tasks(op.seq, op.q_start, op.q_length, op.kv_start, op.kv_length)) for op in ops]

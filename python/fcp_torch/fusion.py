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

Whole sequences (`fuse_sequences`): where one op's tasks of a sequence tile its whole attention
square exactly (causal: every pair j <= i of [0, L) once), they become one task [0, L) x [0, L), a
single causal launch with no partials at all, instead of the block row's rectangles and diagonal
squares (kernels.decompose, `square`). Exact tiling is checked (every task inside the square, no
two overlapping in attended pairs, the pairs adding up to the square's); anything else is left as
it is. Exact tiling by one op means no other op or rank computes a pair of that sequence.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from .plan import Op, attended_pairs


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


def _overlap_pairs(causal: bool, qs, qe, ks, ke, q0: int, q1: int, k0: int, k1: int) -> int:
    """Attended pairs that the tasks share with the task [q0, q1) x [k0, k1) (rectangles
    intersected, then the mask)."""
    a, b = np.maximum(qs, q0), np.minimum(qe, q1)
    c, d = np.maximum(ks, k0), np.minimum(ke, k1)
    return int(attended_pairs(causal, a, np.maximum(b - a, 0), c, np.maximum(d - c, 0)).sum())


def covers_square(causal: bool, length: int, qs, ql, ks, kl) -> bool:
    """Whether tasks (one sequence) attend every pair of its [0, length) square exactly once."""
    qs, ql, ks, kl = (np.asarray(x, np.int64) for x in (qs, ql, ks, kl))
    if length <= 0 or len(qs) == 0:
        return False
    qe, ke = qs + ql, ks + kl
    if (qs < 0).any() or (ks < 0).any() or (qe > length).any() or (ke > length).any():
        return False
    whole = length * (length + 1) // 2 if causal else length * length
    if int(attended_pairs(causal, qs, ql, ks, kl).sum()) != whole:
        return False
    for i in range(len(qs) - 1):
        j = slice(i + 1, None)
        if _overlap_pairs(causal, qs[j], qe[j], ks[j], ke[j], int(qs[i]), int(qe[i]), int(ks[i]), int(ke[i])):
            return False
    return True


def fuse_sequences(seq, q_start, q_length, kv_start, kv_length, lengths, causal: bool):
    """The tasks of each sequence that tile its whole square exactly (`covers_square`) replaced by one
    task [0, L) x [0, L); other tasks unchanged. Same columns and order as `fuse_tasks`."""
    seq, qs, ql, ks, kl = (np.asarray(x, np.int64) for x in (seq, q_start, q_length, kv_start, kv_length))
    lengths = np.asarray(lengths, np.int64)
    if len(seq) == 0:
        return seq, qs, ql, ks, kl
    keep = np.ones(len(seq), bool)
    whole = []
    for s in np.unique(seq).tolist():
        m = np.nonzero(seq == s)[0]
        L = int(lengths[s])
        if len(m) > 1 and covers_square(causal, L, qs[m], ql[m], ks[m], kl[m]):
            keep[m] = False
            whole.append(s)
    if not whole:
        return seq, qs, ql, ks, kl
    w = np.asarray(whole, np.int64)
    z = np.zeros(len(w), np.int64)
    cols = [np.concatenate((c[keep], x)) for c, x in ((seq, w), (qs, z), (ql, lengths[w]), (ks, z), (kl, lengths[w]))]
    o = np.lexsort((cols[3], cols[2], cols[1], cols[0]))
    return tuple(c[o] for c in cols)

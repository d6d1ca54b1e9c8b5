"""Token spaces: dense slot numbering of the tokens one rank ever holds.

A rank's data is kept in a few flat buffers indexed by *slot*. The slots of a space are the union of
token ranges the rank touches (its user rows, its home rows, the K/V ranges it receives), merged per
sequence into maximal disjoint intervals and laid out in (sequence, start) order. A token's data is
the same whichever way it arrived (user layout, `in`, `kv`), so one slot per token suffices, and any
contiguous token range a rank holds lies inside one interval: its slots are contiguous, and a task
reads its keys as a view, never a copy.
"""
from __future__ import annotations

import numpy as np

from .plan import PlanError

_SHIFT = np.int64(1) << np.int64(32)


class TokenSpace:
    """Slots for the union of token ranges (seq, start, length)."""

    def __init__(self, seq, start, length):
        seq = np.asarray(seq, np.int64)
        start = np.asarray(start, np.int64)
        length = np.asarray(length, np.int64)
        keep = length > 0
        seq, start, end = seq[keep], start[keep], (start + length)[keep]
        o = np.lexsort((start, seq))
        seq, start, end = seq[o], start[o], end[o]
        # Merge overlapping or touching ranges of the same sequence.
        if len(seq):
            ms, mst, men = [int(seq[0])], [int(start[0])], [int(end[0])]
            for s, a, b in zip(seq[1:].tolist(), start[1:].tolist(), end[1:].tolist()):
                if s == ms[-1] and a <= men[-1]:
                    if b > men[-1]:
                        men[-1] = b
                else:
                    ms.append(s)
                    mst.append(a)
                    men.append(b)
            self.seq = np.asarray(ms, np.int64)
            self.start = np.asarray(mst, np.int64)
            self.end = np.asarray(men, np.int64)
        else:
            self.seq = self.start = self.end = np.zeros(0, np.int64)
        self.offset = np.concatenate(([0], np.cumsum(self.end - self.start))).astype(np.int64)
        self.size = int(self.offset[-1])
        self._key = self.seq * _SHIFT + self.start

    def __len__(self) -> int:
        return self.size

    def locate(self, seq, start, length) -> np.ndarray:
        """First slot of each range; every range must lie inside one interval (else PlanError)."""
        seq = np.asarray(seq, np.int64)
        start = np.asarray(start, np.int64)
        length = np.asarray(length, np.int64)
        i = np.searchsorted(self._key, seq * _SHIFT + start, side="right") - 1
        ok = i >= 0
        ic = np.where(ok, i, 0)
        if len(self.seq):
            ok &= (self.seq[ic] == seq) & (self.start[ic] <= start) & (start + length <= self.end[ic])
        else:
            ok &= False
        if not np.all(ok):
            bad = int(np.nonzero(~ok)[0][0])
            raise PlanError(
                "plan.rule3.missing",
                f"tokens [{int(start[bad])}, {int(start[bad] + length[bad])}) of sequence {int(seq[bad])} "
                "are used on a rank that never holds them",
            )
        return self.offset[ic] + (start - self.start[ic])

    def index(self, seq, start, length) -> np.ndarray:
        """Slots of every token of the ranges, concatenated in range order."""
        first = self.locate(seq, start, length)
        return ranges_index(first, np.asarray(length, np.int64))


def ranges_index(first: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Concatenation of arange(first[i], first[i] + length[i]) for all i (vectorised)."""
    first = np.asarray(first, np.int64)
    length = np.asarray(length, np.int64)
    total = int(length.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    nz = length > 0
    first, length = first[nz], length[nz]
    step = np.ones(total, np.int64)
    starts = np.concatenate(([0], np.cumsum(length)[:-1]))
    step[0] = first[0]
    step[starts[1:]] = first[1:] - (first[:-1] + length[:-1] - 1)
    return np.cumsum(step)

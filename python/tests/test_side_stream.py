"""Sums on a side stream (RankRuntime.side_stream, FCP_SIDE_STREAM): off without CUDA, and every sum
of a phase (forward merge windows, backward dK/dV adds and dQ windows, every add branch) goes
through `RankRuntime._sums`, the one place that moves it to the side stream on a GPU. The GPU check
(same outputs with and without it) is scripts/gpu/side-check.py (run 12)."""
import unittest
from contextlib import contextmanager

from fcp_torch import replay
from fcp_torch.plan import plan_from_json
from fcp_torch.runtime import RankRuntime

from . import synth


def _counting(rt):
    calls = {"n": 0}
    inner = rt._sums

    @contextmanager
    def sums(*inputs):
        calls["n"] += 1
        with inner(*inputs):
            yield

    rt._sums = sums
    return calls


class SideStreamTest(unittest.TestCase):
    def test_off_without_cuda(self):
        plan = plan_from_json(synth.chunk_plan([70, 9, 33], 4))
        from fcp_torch.plan import rank_program

        rt = RankRuntime(rank_program(plan, 0), kernel="math", side_stream=True)
        self.assertFalse(rt.side_stream)
        rt._join_sums()  # nothing queued: a no-op
        self.assertIsNone(rt._side)

    def test_every_sum_goes_through_sums(self):
        plan = plan_from_json(synth.chunk_plan([70, 9, 33], 4))
        seen = {"fwd": 0, "bwd": 0}
        for window in (1, 8):
            for rank in range(plan.world):
                s = replay.setup(plan, rank, kernel="math", device="cpu", dtype=__import__("torch").float32, merge_window=window)
                rt = s.rt
                calls = _counting(rt)
                replay.iteration(s)
                lay = rt._fwd_layout
                fwd = len(lay.windows) if lay is not None and lay.windows is not None else 0
                bwd = sum(len(rt._launches("backward", i)) for i in range(len(rt.prog.backward.ops)))
                seen["fwd"] += fwd
                seen["bwd"] += bwd
                with self.subTest(window=window, rank=rank):
                    self.assertEqual(calls["n"], fwd + bwd)
        # the plan must have both kinds, or the test proves nothing
        self.assertGreater(seen["fwd"], 0)
        self.assertGreater(seen["bwd"], 0)


if __name__ == "__main__":
    unittest.main()

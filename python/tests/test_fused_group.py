"""Grouped forward merges (fused_group.py, FCP_MERGE_GROUP): the same outputs as per-launch merges
(float32, CPU torch path), and fewer accumulator rows read and written."""
import os
import unittest

import torch

from fcp_torch import fused_group
from fcp_torch.local import run_local
from fcp_torch.plan import plan_from_json, rank_program
from fcp_torch.runtime import RankRuntime

from . import synth
from .test_kvpool import plans
from .test_runtime import MAX, inputs_for, worst_error


def _with_group(n, fn):
    old = os.environ.get("FCP_MERGE_GROUP")
    os.environ["FCP_MERGE_GROUP"] = str(n)
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["FCP_MERGE_GROUP"]
        else:
            os.environ["FCP_MERGE_GROUP"] = old


class GroupedMerges(unittest.TestCase):
    def test_same_results_as_per_launch(self):
        for name, plan in plans():
            x = inputs_for(plan, 7)
            for mode in ("br", "square"):
                with self.subTest(plan=name, mode=mode):
                    a = _with_group(1, lambda: run_local(plan, x, mode=mode))
                    for n in (2, 4):
                        b = _with_group(n, lambda: run_local(plan, x, mode=mode))
                        self.assertLess(worst_error(plan, x, b), MAX)
                        for f in a:
                            for s in range(len(plan.sequences)):
                                torch.testing.assert_close(b[f][s], a[f][s], rtol=1e-6, atol=1e-6)

    def test_fewer_accumulator_rows(self):
        # one rank with many pieces per op: grouped plans touch each slot's accumulator less often
        plan = plan_from_json(synth.owner_plan([300, 260, 90], 1, 1, "causal"))
        prog = rank_program(plan, 0)

        def acc_rows(n):
            def f():
                rt = RankRuntime(prog, None, "cpu", kernel="math", mode="square")
                rt.prepare()
                lay = rt._fwd_layout
                if lay.groups is None:
                    return sum(int(mp.dst.numel()) for per in lay.launches.values() for _, mp in per if mp.rows)
                return sum(int(mp.dst.numel()) for g in lay.groups.values() for _, mp in g)

            return _with_group(n, f)

        one, four = acc_rows(1), acc_rows(4)
        self.assertGreater(one, 0)
        self.assertLess(four, one)

    def test_group_size_is_bounded(self):
        self.assertEqual(_with_group(9, fused_group.group_size), fused_group.MAX_SOURCES)
        self.assertEqual(_with_group(0, fused_group.group_size), 1)


if __name__ == "__main__":
    unittest.main()

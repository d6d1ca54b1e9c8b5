"""The K/V pool inside RankRuntime (kvpool.py): same outputs as one slot per token, rows equal to the
computed peak, and no pool row read after its slot died (dead rows are poisoned with NaN)."""
import os
import unittest

import numpy as np
import torch

import fcp_torch.local as local_mod
from fcp_torch.liveness import issue_order, lifetimes
from fcp_torch.local import run_local
from fcp_torch.plan import plan_from_json, rank_program, read_plan
from fcp_torch.runtime import RankRuntime

from . import synth
from .test_runtime import MAX, inputs_for, worst_error


class PoisonRuntime(RankRuntime):
    """After each issue event, fills the pool rows of slots whose lifetime ended there with NaN
    (K, V and the float32 dK/dV with their incoming partials): a later read of such a row before
    its new slot is written (received or zeroed) turns the outputs into NaN."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._dead = {}
        for ph in ("forward", "backward"):
            ev = issue_order(self.prog, ph, self.local)
            lt = lifetimes(self.prog, ph, self.kvspace[ph], self.base_space, self.local)
            pool_of = self.pool[ph].pool_of
            m = (lt.first >= 0) & (lt.last < lt.events - 1)
            for t, e in enumerate(ev):
                rows = pool_of[m & (lt.last == t)]
                if len(rows):
                    self._dead[(ph, e)] = torch.from_numpy(rows)

    def _poison(self, e):
        rows = self._dead.get((self._phase, e))
        if rows is None:
            return
        for f in ("K", "V", "dK", "dV", "dK_in", "dV_in"):
            x = self._bufs.get(f)
            if x is not None:
                x.index_fill_(0, rows.to(x.device), float("nan"))

    def _run_op(self, i):
        super()._run_op(i)
        self._poison(("op", i))

    def _post(self, g, spec):
        super()._post(g, spec)
        # gloo-style completion: the group's receives land later; a slot whose last event is this
        # post is only sent here (its message is already copied)
        self._poison(("post", g))


DATA = os.path.join(os.path.dirname(__file__), "data")


def plans():
    # CLI plans (tests/data/README.md) whose backward reuses rows: the zero-on-reuse path runs
    yield "ring-4", read_plan(os.path.join(DATA, "kvpool-ring-4.json.gz"))
    yield "bytescale-4", read_plan(os.path.join(DATA, "kvpool-bytescale-4.json.gz"))
    yield "owner-4", plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], 4, 2, "causal"))
    yield "chunk-4", plan_from_json(synth.chunk_plan([70, 9, 33, 120], 4))
    yield "chunk-4-full", plan_from_json(synth.chunk_plan([37, 5, 64, 3, 9], 4, "full"))


class KVPoolRuntime(unittest.TestCase):
    def test_same_results_as_one_slot_per_token(self):
        for name, plan in plans():
            x = inputs_for(plan, 3)
            for mode in ("br", "square"):
                with self.subTest(plan=name, mode=mode):
                    a = run_local(plan, x, mode=mode, kv_pool=False)
                    b = run_local(plan, x, mode=mode, kv_pool=True)
                    self.assertLess(worst_error(plan, x, b), MAX)
                    for f in a:
                        for s in range(len(plan.sequences)):
                            torch.testing.assert_close(b[f][s], a[f][s], rtol=1e-6, atol=1e-6)

    def test_pool_rows_are_the_peak_and_rows_are_reused(self):
        reused = 0
        zeroed = 0
        for name, plan in plans():
            for r in range(plan.world):
                prog = rank_program(plan, r)
                rt = RankRuntime(prog, None, "cpu", kernel="math", kv_pool=True)
                for ph in ("forward", "backward"):
                    lt = lifetimes(prog, ph, rt.kvspace[ph], rt.base_space)
                    self.assertEqual(rt.kv_rows[ph], lt.peak(), (name, r, ph))
                    self.assertLessEqual(rt.kv_rows[ph], rt.kvspace[ph].size)
                    reused += rt.kvspace[ph].size - rt.kv_rows[ph]
                    zeroed += len(rt.pool[ph].zero_at)
                    for L in (L for i in range(len(getattr(prog, ph).ops)) for L in rt._launches(ph, i)):
                        self.assertTrue(bool((L.kidx < rt.kv_rows[ph]).all()))
                rt.prepare()
        self.assertGreater(reused, 0, "the test plans must reuse rows, or the poison test checks nothing")
        self.assertGreater(zeroed, 0, "some backward must hand rows on, or the zeroing is untested")

    def test_no_row_read_after_its_slot_died(self):
        real = local_mod.RankRuntime
        local_mod.RankRuntime = PoisonRuntime
        try:
            for name, plan in plans():
                x = inputs_for(plan, 5)
                with self.subTest(plan=name):
                    got = run_local(plan, x, kv_pool=True)
                    for f in got:
                        self.assertTrue(all(bool(torch.isfinite(t).all()) for t in got[f]), (name, f))
                    self.assertLess(worst_error(plan, x, got), MAX)
        finally:
            local_mod.RankRuntime = real

    def test_poison_catches_a_missing_zeroing(self):
        # the check must be able to fail: without zeroing rows passed to new slots, the old slot's
        # (poisoned) dK/dV reaches the new slot's gradient on some plan
        class NoZero(PoisonRuntime):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                for pl in self.pool.values():
                    pl.zero_at.clear()

        real = local_mod.RankRuntime
        local_mod.RankRuntime = NoZero
        caught = 0
        try:
            for _, plan in plans():
                got = run_local(plan, inputs_for(plan, 5), kv_pool=True)
                caught += not all(bool(torch.isfinite(t).all()) for t in got["dk"] + got["dv"])
        finally:
            local_mod.RankRuntime = real
        self.assertGreater(caught, 0)

    def test_replay_pool_matches_sizes(self):
        plan = plan_from_json(synth.chunk_plan([400, 300, 500], 3))
        prog = rank_program(plan, 2)
        rt = RankRuntime(prog, None, "cpu", kernel="math", local=True, kv_pool=True)
        for ph in ("forward", "backward"):
            lt = lifetimes(prog, ph, rt.kvspace[ph], rt.base_space, local=True)
            self.assertEqual(rt.kv_rows[ph], lt.peak())
        self.assertTrue(np.all([rt.kv_rows[ph] <= rt.kvspace[ph].size for ph in rt.kv_rows]))


if __name__ == "__main__":
    unittest.main()

"""Liveness of K/V slots and the pool allocator: property tests on random lifetimes and on plans."""
import unittest

import numpy as np

from fcp_torch.liveness import Lifetimes, allocate, check_allocation, issue_order, lifetimes
from fcp_torch.plan import plan_from_json, rank_program
from fcp_torch.runtime import RankRuntime

from . import synth


def random_lifetimes(rng, n, T):
    first = rng.integers(0, T, n)
    last = np.minimum(T - 1, first + rng.integers(0, max(1, T // 3), n))
    # runs: neighbours often share a lifetime, as the tokens of one received range do
    for i in range(1, n):
        if rng.random() < 0.7:
            first[i], last[i] = first[i - 1], last[i - 1]
    dead = rng.random(n) < 0.05
    first[dead] = last[dead] = -1
    return Lifetimes(first.astype(np.int64), last.astype(np.int64), T)


def brute_peak(lt):
    return max(int(((lt.first <= t) & (lt.last >= t) & (lt.first >= 0)).sum()) for t in range(lt.events))


class AllocatorProperties(unittest.TestCase):
    def test_random_lifetimes(self):
        rng = np.random.default_rng(0)
        for case in range(200):
            lt = random_lifetimes(rng, int(rng.integers(1, 300)), int(rng.integers(1, 40)))
            pool_of, size = allocate(lt)
            self.assertEqual(check_allocation(lt, pool_of), [], case)
            # the pool is exactly the computed live set, which is the brute-force peak
            self.assertEqual(size, lt.peak(), case)
            self.assertEqual(size, brute_peak(lt), case)
            used = pool_of[pool_of >= 0]
            self.assertTrue(len(used) == 0 or (used.min() >= 0 and used.max() < size))
            # no slot is read after its row was handed on: every event touching a slot lies in its
            # lifetime, and the row has no other live owner then (checked per event)
            for t in range(lt.events):
                alive = np.nonzero((lt.first <= t) & (lt.last >= t) & (lt.first >= 0))[0]
                self.assertEqual(len(np.unique(pool_of[alive])), len(alive), (case, t))

    def test_checker_rejects_shared_rows(self):
        lt = Lifetimes(np.array([0, 1, 5]), np.array([3, 4, 6]), 7)
        pool_of, size = allocate(lt)
        self.assertEqual(size, 2)
        self.assertEqual(check_allocation(lt, pool_of), [])
        broken = pool_of.copy()
        broken[1] = broken[0]  # slots 0 and 1 are both alive at events 1-3
        self.assertTrue(check_allocation(lt, broken))
        missing = pool_of.copy()
        missing[2] = -1
        self.assertTrue(check_allocation(lt, missing))

    def test_rows_are_reused(self):
        # three ranges one after the other: one range's rows serve all three
        lt = Lifetimes(np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 1, 2, 2]), 3)
        pool_of, size = allocate(lt)
        self.assertEqual(size, 2)
        self.assertEqual(sorted(set(pool_of.tolist())), [0, 1])


class PlanLiveness(unittest.TestCase):
    def test_plans(self):
        for pj in (synth.owner_plan([40, 9, 70, 3], 4, 2, "causal"), synth.chunk_plan([70, 9, 33, 120], 4)):
            plan = plan_from_json(pj)
            for r in range(plan.world):
                prog = rank_program(plan, r)
                rt = RankRuntime(prog, None, "cpu", kernel="math")
                for ph in ("forward", "backward"):
                    ev = issue_order(prog, ph)
                    self.assertEqual(sorted(j for w, j in ev if w == "op"), list(range(len(getattr(prog, ph).ops))))
                    lt = lifetimes(prog, ph, rt.kvspace[ph], rt.base_space)
                    pool_of, size = allocate(lt)
                    self.assertEqual(check_allocation(lt, pool_of), [])
                    self.assertEqual(size, lt.peak())
                    self.assertLessEqual(size, rt.kvspace[ph].size)
                    # every slot an op reads is alive at that op's event
                    pp = getattr(prog, ph)
                    for t, (w, j) in enumerate(ev):
                        if w == "op":
                            op = pp.ops[j]
                            idx = rt.kvspace[ph].index(op.seq, op.kv_start, op.kv_length)
                            self.assertTrue(np.all((lt.first[idx] <= t) & (lt.last[idx] >= t)))

    def test_ring_pool_is_smaller_than_the_space(self):
        plan = plan_from_json(synth.chunk_plan([400, 300, 500], 4))
        prog = rank_program(plan, 3)
        rt = RankRuntime(prog, None, "cpu", kernel="math")
        lt = lifetimes(prog, "forward", rt.kvspace["forward"], rt.base_space)
        _, size = allocate(lt)
        self.assertLess(size, rt.kvspace["forward"].size)


if __name__ == "__main__":
    unittest.main()

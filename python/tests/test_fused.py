"""The fused path's torch fallback (merge plans, CSR merge) against the original merges, float32."""
import os
import unittest

import numpy as np
import torch

from fcp_torch.fused import Fused, gather_rows_torch, merge_csr_torch, merge_plans
from fcp_torch.kernels import merge_into, merge_slice
from fcp_torch.local import run_local
from fcp_torch.plan import plan_from_json

from . import synth
from .test_runtime import inputs_for

TOL = 1e-6


def rel(a, b):
    a, b = a.double(), b.double()
    fin = torch.isfinite(b)
    assert torch.equal(fin, torch.isfinite(a)), "infinite entries differ"
    return float((a[fin] - b[fin]).norm() / (b[fin].norm() + 1e-300))


class MergeTest(unittest.TestCase):
    def run_case(self, seed, n_slots, sizes, H=3, D=8, prefill=False):
        rng = np.random.default_rng(seed)
        g = torch.Generator().manual_seed(seed)
        launches = [rng.integers(0, n_slots, n) for n in sizes]
        plans = merge_plans(launches, n_slots, "cpu")
        o0 = torch.zeros(n_slots, H, D)
        l0 = torch.full((n_slots, H), float("-inf"))
        if prefill:  # accumulators already holding a partial (e.g. of an earlier phase call)
            m = torch.from_numpy(rng.random(n_slots) < 0.5)
            o0[m] = torch.randn(int(m.sum()), H, D, generator=g)
            l0[m] = torch.randn(int(m.sum()), H, generator=g)
            for mp in plans:
                mp.first_b.zero_()
                mp.first.zero_()
                mp.simple = False
        a = (o0.clone(), l0.clone())
        r = (o0.clone(), l0.clone())
        for idx, mp in zip(launches, plans):
            o = torch.randn(len(idx), H, D, generator=g)
            lse = torch.randn(H, len(idx), generator=g).t() * 4  # strided, as flash returns it
            merge_csr_torch(a[0], a[1], o, lse, mp)
            merge_into(r[0], r[1], torch.from_numpy(idx), o, lse.contiguous())
        self.assertLessEqual(rel(a[0], r[0]), TOL)
        self.assertLessEqual(rel(a[1], r[1]), TOL)
        return plans

    def test_repeated_rows_and_first_touch(self):
        for seed in range(20):
            rng = np.random.default_rng(100 + seed)
            n = int(rng.integers(1, 60))
            plans = self.run_case(seed, n, [int(x) for x in rng.integers(0, 3 * n, int(rng.integers(1, 6)))])
            # first flags: each slot is first exactly once over the phase
            firsts = np.concatenate([mp.dst.numpy()[mp.first_b.numpy()] for mp in plans])
            self.assertEqual(len(firsts), len(np.unique(firsts)))

    def test_prefilled_accumulators(self):
        for seed in range(10):
            self.run_case(seed, 40, [30, 70, 5], prefill=True)

    def test_simple_scatter(self):
        # unique rows, first touch: the copy fast path
        plans = merge_plans([np.array([5, 2, 7])], 10, "cpu")
        self.assertTrue(plans[0].simple)
        self.run_case(7, 10, [0, 3])

    def test_equals_slice_merge(self):
        g = torch.Generator().manual_seed(3)
        a = (torch.zeros(20, 2, 4), torch.full((20, 2), float("-inf")))
        r = (a[0].clone(), a[1].clone())
        segs = [(0, 10), (5, 10), (2, 3)]
        plans = merge_plans([np.arange(s, s + n) for s, n in segs], 20, "cpu")
        for (s, n), mp in zip(segs, plans):
            o, lse = torch.randn(n, 2, 4, generator=g), torch.randn(n, 2, generator=g)
            merge_csr_torch(a[0], a[1], o, lse, mp)
            merge_slice(r[0], r[1], s, o, lse)
        self.assertLessEqual(rel(a[0], r[0]), TOL)
        self.assertLessEqual(rel(a[1], r[1]), TOL)

    def test_detects_a_wrong_first_flag(self):
        # A merge plan that claims a slot is empty when it is not loses that slot's earlier partial.
        g = torch.Generator().manual_seed(1)
        plans = merge_plans([np.array([1, 2]), np.array([1, 2])], 4, "cpu")
        plans[1].first_b.fill_(True)
        a = (torch.zeros(4, 1, 2), torch.full((4, 1), float("-inf")))
        r = (a[0].clone(), a[1].clone())
        for mp in plans:
            o, lse = torch.randn(2, 1, 2, generator=g), torch.randn(2, 1, generator=g)
            merge_csr_torch(a[0], a[1], o, lse, mp)
            merge_into(r[0], r[1], mp.row_dst, o, lse)
        self.assertGreater(rel(a[0], r[0]), 1e-3)

    def test_gather_fallback(self):
        x = [torch.randn(9, 2, 3), torch.randn(9, 2, 3)]
        idx = torch.tensor([3, 3, 0, 8])
        for got, src in zip(gather_rows_torch(x, idx), x):
            self.assertTrue(torch.equal(got, src[idx]))

    def test_cpu_uses_the_torch_fallback(self):
        f = Fused("cpu")
        self.assertEqual(f.backend, "torch")
        self.assertIn("triton", f.errors)


class RuntimeFusedTest(unittest.TestCase):
    def test_fused_equals_legacy_runtime(self):
        # Whole plans through the runtime: the fused path's fallback against the original merges.
        for plan_json in (synth.owner_plan([40, 9, 70, 3], 4, 2, "causal"), synth.chunk_plan([70, 9, 33], 3)):
            plan = plan_from_json(plan_json)
            x = inputs_for(plan, 4)
            old = os.environ.get("FCP_FUSED")
            try:
                os.environ["FCP_FUSED"] = "legacy"
                ref = run_local(plan, x, kernel="math", mode="square")
                os.environ["FCP_FUSED"] = "torch"
                got = run_local(plan, x, kernel="math", mode="square")
            finally:
                if old is None:
                    os.environ.pop("FCP_FUSED", None)
                else:
                    os.environ["FCP_FUSED"] = old
            for f in ("o", "dq", "dk", "dv"):
                self.assertLessEqual(rel(torch.cat(got[f]), torch.cat(ref[f])), TOL, f)


if __name__ == "__main__":
    unittest.main()

"""Piece decomposition, the math kernel, LSE merges and token spaces."""
import math
import unittest

import numpy as np
import torch

from fcp_torch.kernels import decompose, math_backward, math_forward, merge_into, piece_pairs
from fcp_torch.plan import PlanError, attended_pairs
from fcp_torch.reference import reference_sequence
from fcp_torch.spaces import TokenSpace, ranges_index


def masked(L, qs, ql, ks, kl, causal):
    m = torch.zeros(L, L, dtype=torch.bool)
    for q in range(qs, qs + ql):
        for k in range(ks, ks + kl):
            if not causal or k <= q:
                m[q, k] = True
    return m


class DecomposeTest(unittest.TestCase):
    def test_pieces_cover_exactly_the_attended_pairs(self):
        rng = np.random.default_rng(1)
        for mode in ("br", "square"):
            for _ in range(200):
                L = 50
                qs, ks = (int(x) for x in rng.integers(0, 40, 2))
                ql, kl = (int(x) for x in rng.integers(1, L - max(qs, ks) + 1, 2))
                for causal in (True, False):
                    p = decompose([0], [qs], [ql], [ks], [kl], causal, mode)
                    cover = torch.zeros(L, L, dtype=torch.int32)
                    for i in range(len(p)):
                        a, n, b, m, c = int(p.q0[i]), int(p.lq[i]), int(p.k0[i]), int(p.lk[i]), bool(p.causal[i])
                        if c:
                            self.assertEqual(b + m, a + n, "causal pieces end where their queries end")
                            if mode == "square":
                                self.assertEqual((a, n), (b, m))
                        blk = torch.ones(n, m, dtype=torch.int32)
                        if c:
                            blk = torch.tril(blk, diagonal=m - n)
                        cover[a : a + n, b : b + m] += blk
                    want = masked(L, qs, ql, ks, kl, causal).int()
                    self.assertTrue(torch.equal(cover, want), (mode, causal, qs, ql, ks, kl))
                    self.assertEqual(int(piece_pairs(p).sum()), int(attended_pairs(causal, [qs], [ql], [ks], [kl])[0]))

    def test_merged_pieces_equal_whole_attention(self):
        torch.manual_seed(0)
        L, H, Hk, D = 40, 4, 2, 8
        q, k, v, do = torch.randn(L, H, D), torch.randn(L, Hk, D), torch.randn(L, Hk, D), torch.randn(L, H, D)
        scale = 1 / math.sqrt(D)
        o_ref, dq_ref, dk_ref, dv_ref = reference_sequence(q, k, v, do, True)
        # tasks: every query block against key ranges cut at odd points, keys past the queries too
        tasks = [(0, 13, 0, 20), (13, 14, 0, 9), (13, 14, 9, 31), (27, 13, 0, 40)]
        for mode in ("br", "square"):
            o = torch.zeros(L, H, D)
            lse = torch.full((L, H), float("-inf"))
            pieces = decompose([0] * 4, *zip(*[(t[0], t[1], t[2], t[3]) for t in tasks]), True, mode)
            for i in range(len(pieces)):
                a, n, b, m, c = int(pieces.q0[i]), int(pieces.lq[i]), int(pieces.k0[i]), int(pieces.lk[i]), bool(pieces.causal[i])
                oo, ll = math_forward(q[a : a + n], k[b : b + m], v[b : b + m], c, scale)
                merge_into(o, lse, torch.arange(a, a + n), oo, ll)
            self.assertLess(float((o.double() - o_ref).norm() / o_ref.norm()), 1e-6)
            dq, dk, dv = torch.zeros(L, H, D), torch.zeros(L, Hk, D), torch.zeros(L, Hk, D)
            for i in range(len(pieces)):
                a, n, b, m, c = int(pieces.q0[i]), int(pieces.lq[i]), int(pieces.k0[i]), int(pieces.lk[i]), bool(pieces.causal[i])
                x = math_backward(q[a : a + n], k[b : b + m], v[b : b + m], o[a : a + n], do[a : a + n], lse[a : a + n], c, scale)
                dq[a : a + n] += x[0]
                dk[b : b + m] += x[1]
                dv[b : b + m] += x[2]
            for got, ref in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
                self.assertLess(float((got.double() - ref).norm() / ref.norm()), 1e-5)

    def test_merge_handles_repeats_and_empty_rows(self):
        o = torch.zeros(3, 1, 2)
        lse = torch.full((3, 1), float("-inf"))
        idx = torch.tensor([0, 0, 1])
        part_o = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]], [[2.0, 2.0]]])
        part_l = torch.tensor([[0.0], [0.0], [float("-inf")]])
        merge_into(o, lse, idx, part_o, part_l)
        self.assertTrue(torch.allclose(o[0], torch.tensor([[0.5, 0.5]])))
        self.assertAlmostEqual(float(lse[0, 0]), math.log(2.0), places=6)
        self.assertTrue(torch.equal(o[1], torch.zeros(1, 2)))
        self.assertTrue(torch.isinf(lse[1, 0]) and torch.isinf(lse[2, 0]))
        self.assertFalse(torch.isnan(o).any())


class SpaceTest(unittest.TestCase):
    def test_merged_intervals_and_lookup(self):
        sp = TokenSpace([1, 0, 1, 1], [10, 0, 0, 5], [5, 4, 5, 2])  # seq 1: [0,5)+[5,7)+[10,15)
        self.assertEqual(sp.size, 4 + 7 + 5)
        np.testing.assert_array_equal(sp.locate([0, 1, 1], [2, 3, 12], [2, 4, 3]), [2, 7, 13])
        np.testing.assert_array_equal(sp.index([1], [4], [3]), [8, 9, 10])
        with self.assertRaises(PlanError) as e:
            sp.locate([1], [6], [5])  # crosses the gap [7, 10)
        self.assertEqual(e.exception.code, "plan.rule3.missing")

    def test_ranges_index(self):
        np.testing.assert_array_equal(ranges_index(np.array([5, 0, 9]), np.array([2, 0, 3])), [5, 6, 9, 10, 11])
        self.assertEqual(len(ranges_index(np.array([], np.int64), np.array([], np.int64))), 0)


if __name__ == "__main__":
    unittest.main()

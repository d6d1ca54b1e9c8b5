"""Launches bounded by gathered rows (kernels.split_rows, RankRuntime.launch_rows; issue 17): the
split covers every piece once, in order, within the cap, and a runtime with capped launches computes
what the uncapped one does (float32, against the float64 reference too)."""
import unittest

import numpy as np
import torch

from fcp_torch.autograd import FcpAttention
from fcp_torch.kernels import decompose, plan_launches, split_rows
from fcp_torch.plan import plan_from_json, rank_program
from fcp_torch.runtime import RankRuntime

from . import synth
from .test_runtime import MAX, inputs_for, worst_error


class SplitRowsTest(unittest.TestCase):
    def test_groups_cover_every_piece_in_order_within_the_cap(self):
        rng = np.random.default_rng(3)
        for trial in range(50):
            n = int(rng.integers(0, 40))
            lq, lk = rng.integers(1, 60, n), rng.integers(1, 60, n)
            cap = int(rng.integers(1, 300))
            groups = split_rows(lq, lk, cap)
            with self.subTest(trial=trial):
                flat = np.concatenate(groups) if groups else np.zeros(0, np.int64)
                self.assertEqual(flat.tolist(), list(range(n)))
                for g in groups:
                    rows = int((lq[g] + lk[g]).sum())
                    self.assertTrue(rows <= cap or len(g) == 1, (rows, cap, len(g)))
                # greedy: no two neighbouring groups would fit together
                for a, b in zip(groups, groups[1:]):
                    self.assertGreater(int((lq[a] + lk[a]).sum() + lq[b[0]] + lk[b[0]]), cap)

    def test_no_cap_is_one_group(self):
        self.assertEqual([g.tolist() for g in split_rows(np.array([5, 6]), np.array([7, 8]), None)], [[0, 1]])

    def test_capped_launches_hold_the_same_pieces(self):
        plan = plan_from_json(synth.owner_plan([300, 41, 129, 7], 1, 2))
        prog = rank_program(plan, 0)
        rt = RankRuntime(prog)
        op = prog.forward.ops[0]
        p = decompose(op.seq, op.q_start, op.q_length, op.kv_start, op.kv_length, True, "br")
        qf = rt.qspace.locate(p.seq, p.q0, p.lq)
        kf = rt.kvspace["forward"].locate(p.seq, p.k0, p.lk)
        avail = {"math": True, "flash": False, "cudnn": False}
        whole = plan_launches(p, qf, kf, "auto", "cpu", avail)
        capped = plan_launches(p, qf, kf, "auto", "cpu", avail, max_rows=64)
        self.assertGreater(len(capped), len(whole))
        key = lambda Ls: sorted((int(a), int(b)) for L in Ls for a, b in zip(L.qf, L.kf))  # noqa: E731
        self.assertEqual(key(capped), key(whole))
        self.assertEqual(sum(L.pairs for L in capped), sum(L.pairs for L in whole))
        for L in capped:
            self.assertTrue(int((L.lq + L.lk).sum()) <= 64 or len(L.lq) == 1)


class CappedRuntimeTest(unittest.TestCase):
    def _run(self, plan, x, rows):
        att = FcpAttention.from_plan(plan, rank=0)
        rt = att.runtime
        # multi-piece varlen launches on the CPU: the `auto` policy without flash/cuDNN (math pieces)
        rt.kernel, rt.launch_rows = "auto", rows
        prog = rt.prog
        pick = lambda f: torch.cat([x[f][s][a : a + n] for s, a, n in zip(prog.user_seq, prog.user_start, prog.user_length)])  # noqa: E731
        q, k, v = (pick(f).requires_grad_(True) for f in ("q", "k", "v"))
        o = att(q, k, v)
        o.backward(pick("dO"))
        launches = sum(len(rt._launches(ph, i)) for ph in ("forward", "backward") for i in range(len(getattr(prog, ph).ops)))
        got = {"o": [], "dq": [], "dk": [], "dv": []}
        pos = 0
        for n in prog.user_length.tolist():
            for f, t in (("o", o.detach()), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
                got[f].append(t[pos : pos + n])
            pos += n
        return got, launches

    def test_capped_equals_uncapped_and_the_reference(self):
        for mask in ("causal", "full"):
            plan = plan_from_json(synth.owner_plan([211, 5, 96, 40], 1, 5, mask))
            x = inputs_for(plan, 6)
            ref, n0 = self._run(plan, x, None)
            got, n1 = self._run(plan, x, 48)
            with self.subTest(mask=mask):
                self.assertGreater(n1, n0)  # the cap did split launches
                self.assertLess(worst_error(plan, x, got), MAX)
                for f in ref:
                    a, b = torch.cat(ref[f]), torch.cat(got[f])
                    self.assertLessEqual(float((a - b).norm() / b.norm()), 1e-6, f)


if __name__ == "__main__":
    unittest.main()

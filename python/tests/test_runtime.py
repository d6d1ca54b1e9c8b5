"""The runtime end to end, every rank in one process (threads), against the float64 reference."""
import os
import tempfile
import unittest

import numpy as np
import torch

from fcp_torch.autograd import FcpAttention
from fcp_torch.io import generate_rows, read_input_rows, write_outputs
from fcp_torch.local import run_local
from fcp_torch.plan import PlanError, plan_from_json, rank_program
from fcp_torch.reference import reference_sequence
from fcp_torch.runtime import RankRuntime

from . import synth

MAX = 1e-5


def inputs_for(plan, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = {f: [] for f in ("q", "k", "v", "dO")}
    for L in plan.sequences.tolist():
        for f in out:
            h = plan.q_heads if f in ("q", "dO") else plan.kv_heads
            out[f].append(torch.rand(L, h, plan.head_dim, generator=g) * 2 - 1)
    return out


def worst_error(plan, x, got):
    """Largest over outputs of ||got - ref|| / ||ref||, norms over all sequences together."""
    num = {f: 0.0 for f in ("o", "dq", "dk", "dv")}
    den = dict(num)
    for s in range(len(plan.sequences)):
        ref = reference_sequence(x["q"][s], x["k"][s], x["v"][s], x["dO"][s], plan.causal)
        for f, r in zip(num, ref):
            num[f] += float((got[f][s].double() - r).pow(2).sum())
            den[f] += float(r.pow(2).sum())
    return max((num[f] / den[f]) ** 0.5 for f in num)


class LocalRuntimeTest(unittest.TestCase):
    def test_owner_plans(self):
        for world in (1, 2, 3, 4):
            for mask in ("causal", "full"):
                for seed in (1, 2):
                    plan = plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], world, seed, mask))
                    x = inputs_for(plan, seed)
                    for mode in ("br", "square"):
                        with self.subTest(world=world, mask=mask, seed=seed, mode=mode):
                            got = run_local(plan, x, mode=mode)
                            self.assertLess(worst_error(plan, x, got), MAX)

    def test_chunk_plans(self):
        for world in (1, 2, 4):
            for mask in ("causal", "full"):
                plan = plan_from_json(synth.chunk_plan([37, 5, 64, 3, 9], world, mask))
                x = inputs_for(plan, world)
                with self.subTest(world=world, mask=mask):
                    self.assertLess(worst_error(plan, x, run_local(plan, x)), MAX)

    def test_missing_data_is_reported(self):
        p = synth.owner_plan([30, 12], 2, 3)
        tr = p["forward"]["transfers"]
        keep = [i for i, k in enumerate(tr["kind"]) if k != "kv"]  # drop every K/V fetch
        p["forward"]["transfers"] = {k: [v[i] for i in keep] for k, v in tr.items()}
        p["forward"]["sendAfter"] = {"transfer": [], "compute": []}
        plan = plan_from_json(p)
        with self.assertRaises(PlanError) as e:
            run_local(plan, inputs_for(plan), timeout=5)
        self.assertEqual(e.exception.code, "plan.rule3.kvMissing")


class AutogradTest(unittest.TestCase):
    def test_gradients_through_torch_autograd(self):
        plan = plan_from_json(synth.owner_plan([23, 40], 1, 4))
        att = FcpAttention.from_plan(plan, rank=0)
        prog = att.runtime.prog
        x = inputs_for(plan, 9)
        rows = lambda f: torch.cat([x[f][s][a : a + n] for s, a, n in zip(prog.user_seq, prog.user_start, prog.user_length)])  # noqa: E731
        q, k, v = (rows(f).requires_grad_(True) for f in ("q", "k", "v"))
        o = att(q, k, v)
        o.backward(rows("dO"))
        got = {"o": [], "dq": [], "dk": [], "dv": []}
        pos = 0
        for s, a, n in zip(prog.user_seq, prog.user_start, prog.user_length):
            for f, t in (("o", o.detach()), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
                got[f].append(t[pos : pos + n])
            pos += n
        self.assertLess(worst_error(plan, x, got), MAX)

    def test_shape_is_checked(self):
        plan = plan_from_json(synth.owner_plan([23], 1, 4))
        rt = RankRuntime(rank_program(plan, 0))
        with self.assertRaises(PlanError) as e:
            rt.forward(torch.zeros(5, 4, 16), torch.zeros(5, 2, 16), torch.zeros(5, 2, 16))
        self.assertEqual(e.exception.code, "run.shape")


class IoTest(unittest.TestCase):
    def test_generated_inputs_do_not_depend_on_the_split(self):
        whole = generate_rows(7, 4, 2, 8, [1], [0], [3000])
        parts = generate_rows(7, 4, 2, 8, [1, 1, 1], [0, 1000, 1030], [1000, 30, 1970])
        for f in whole:
            self.assertTrue(torch.equal(whole[f], parts[f]))

    def test_input_file_rows(self):
        seqs = np.array([5, 3])
        H, Hk, D = 2, 1, 4
        d = tempfile.mkdtemp()
        path = os.path.join(d, "in.bin")
        data = {f: [np.random.rand(L, H if f in ("q", "dO") else Hk, D).astype(np.float32) for L in seqs] for f in ("q", "k", "v", "dO")}
        with open(path, "wb") as fh:
            for f in ("q", "k", "v", "dO"):
                for a in data[f]:
                    fh.write(a.tobytes())
        rows = read_input_rows(path, seqs, H, Hk, D, [1, 0], [1, 2], [2, 3])
        np.testing.assert_array_equal(rows["k"].numpy(), np.concatenate([data["k"][1][1:3], data["k"][0][2:5]]))
        write_outputs(d, 0, (torch.ones(2, 2), torch.zeros(1)), {"rank": 0})
        self.assertEqual(os.path.getsize(os.path.join(d, "rank0.bin")), 5 * 4)


if __name__ == "__main__":
    unittest.main()

"""Whole-sequence fusion (fusion.fuse_sequences) and zero-copy buffers (zerocopy.py): the world-1 path.

Both must compute what the plain path computes (float32 math kernel, within 1e-6), fall back where
their conditions fail, and never let the caller's tensors be changed under the backward's feet.
"""
import unittest

import numpy as np
import torch

from fcp_torch import zerocopy
from fcp_torch.autograd import FcpAttention
from fcp_torch.fusion import covers_square, fuse_sequences, fuse_tasks
from fcp_torch.plan import plan_from_json, rank_program
from fcp_torch.runtime import RankRuntime

from . import synth

TOL = 1e-6


def _user_inputs(prog, seed):
    g = torch.Generator().manual_seed(seed)
    U = prog.user_tokens
    q = torch.rand(U, prog.q_heads, prog.head_dim, generator=g) * 2 - 1
    k = torch.rand(U, prog.kv_heads, prog.head_dim, generator=g) * 2 - 1
    v = torch.rand(U, prog.kv_heads, prog.head_dim, generator=g) * 2 - 1
    do = torch.rand(U, prog.q_heads, prog.head_dim, generator=g) * 2 - 1
    return q, k, v, do


def _run(prog, x, **kw):
    rt = RankRuntime(prog, kernel="math", **kw)
    q, k, v, do = (t.clone() for t in x)
    o, st = rt.forward_with_state(q, k, v)
    o = o.clone()
    return rt, (o, *rt.backward(do, st))


def _rel(a, b):
    return float((a.double() - b.double()).norm() / (b.double().norm() + 1e-300))


def _launch_count(rt):
    return sum(len(rt._launches(ph, i)) for ph in ("forward", "backward") for i in range(len(getattr(rt.prog, ph).ops)))


class SequenceFusionTest(unittest.TestCase):
    def test_fused_sequences_equal_the_tasks(self):
        fused_any = False
        for mask in ("causal", "full"):
            for seed in (1, 2, 3, 5):
                plan = plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], 1, seed, mask))
                prog = rank_program(plan, 0)
                x = _user_inputs(prog, seed)
                rt0, ref = _run(prog, x, fuse_sequences=False, zero_copy=False)
                rt1, got = _run(prog, x, fuse_sequences=True, zero_copy=False)
                fused_any |= _launch_count(rt1) < _launch_count(rt0)
                for name, a, b in zip(("o", "dq", "dk", "dv"), got, ref):
                    with self.subTest(mask=mask, seed=seed, out=name):
                        self.assertLess(_rel(a, b), TOL)
        self.assertTrue(fused_any, "no plan had a sequence to fuse: the test would prove nothing")

    def test_world1_tasks_become_one_per_sequence(self):
        plan = plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], 1, 3, "causal"))
        prog = rank_program(plan, 0)
        op = prog.forward.ops[0]
        cols = fuse_sequences(*fuse_tasks(op.seq, op.q_start, op.q_length, op.kv_start, op.kv_length), prog.sequences, True)
        self.assertEqual(sorted(cols[0].tolist()), list(range(len(prog.sequences))))
        np.testing.assert_array_equal(cols[1], 0)
        np.testing.assert_array_equal(cols[2], prog.sequences[cols[0]])

    def test_falls_back_unless_the_square_is_tiled_exactly(self):
        # a causal 8-token sequence: diagonal squares [0,4) and [4,8), rectangle [4,8) x [0,4)
        qs, ql, ks, kl = [0, 4, 4], [4, 4, 4], [0, 0, 4], [4, 4, 4]
        self.assertTrue(covers_square(True, 8, qs, ql, ks, kl))
        self.assertFalse(covers_square(True, 8, qs[:2], ql[:2], ks[:2], kl[:2]), "a missing diagonal square")
        self.assertFalse(covers_square(True, 9, qs, ql, ks, kl), "the sequence is longer than the tiles")
        # same pair count as the square, but one block twice and one block never
        self.assertFalse(covers_square(True, 8, [0, 4, 4, 4], [4, 4, 2, 2], [0, 0, 4, 4], [4, 4, 4, 4]))
        self.assertFalse(covers_square(True, 8, [0, 4, 4], [4, 4, 4], [0, 0, 0], [4, 4, 8]), "overlapping tiles")
        # the pair count of the square exactly, one tile overlapping another ([4,6) x [4,6) twice)
        self.assertTrue(covers_square(True, 8, [0, 4, 4, 6], [4, 4, 4, 2], [0, 0, 4, 6], [4, 4, 2, 2]))
        self.assertFalse(covers_square(True, 8, [0, 4, 4, 4], [4, 4, 4, 2], [0, 0, 4, 4], [4, 4, 2, 2]))
        self.assertFalse(covers_square(False, 8, qs, ql, ks, kl), "full mask: the upper rectangle is missing")
        # fuse_sequences leaves a sequence that is not tiled as it was, fuses the one that is
        seq = [0, 0, 1, 1, 1]
        out = fuse_sequences(seq, [0, 4, 0, 4, 4], [4, 4, 4, 4, 4], [0, 0, 0, 0, 4], [4, 4, 4, 4, 4], [8, 8], True)
        self.assertEqual(out[0].tolist(), [0, 0, 1])
        self.assertEqual(out[2].tolist(), [4, 4, 8])
        # one task alone is never rewritten (nothing to fuse)
        one = fuse_sequences([0], [0], [8], [0], [8], [8], True)
        self.assertEqual([c.tolist() for c in one], [[0], [0], [8], [0], [8]])


class ZeroCopyTest(unittest.TestCase):
    def test_world1_aliases_and_equals_the_copying_path(self):
        plan = plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], 1, 2, "causal"))
        prog = rank_program(plan, 0)
        x = _user_inputs(prog, 7)
        _, ref = _run(prog, x, zero_copy=False)
        rt = RankRuntime(prog, kernel="math")
        zc = zerocopy.plan(rt)
        self.assertEqual((zc.q, zc.kv, zc.state_kv, zc.out, zc.do, zc.bwd_kv), (True,) * 6)
        q, k, v, do = (t.clone() for t in x)
        o, st = rt.forward_with_state(q, k, v)
        self.assertIs(st["Q"], q)
        self.assertIs(st["K"], k)
        self.assertIs(o, st["Ofinal"])
        self.assertTrue(st["aliased"])
        got = (o.clone(), *rt.backward(do, st))
        for name, a, b in zip(("o", "dq", "dk", "dv"), got, ref):
            with self.subTest(out=name):
                self.assertLess(_rel(a, b), TOL)
        # the caller's inputs are read, never written
        for a, b in zip((q, k, v, do), x):
            self.assertTrue(torch.equal(a, b))

    def test_off_where_rows_arrive_or_layouts_differ(self):
        plan = plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], 2, 1, "causal"))
        for r in range(2):
            rt = RankRuntime(rank_program(plan, r), kernel="math")
            zc = zerocopy.plan(rt)
            with self.subTest(rank=r):
                self.assertFalse(zc.kv, "a rank that receives K/V cannot use the caller's k/v as its K/V space")
        plan1 = plan_from_json(synth.owner_plan([37, 5], 1, 1, "causal"))
        self.assertEqual(zerocopy.plan(RankRuntime(rank_program(plan1, 0), kernel="math", zero_copy=False)), zerocopy.ZeroCopy())
        self.assertEqual(zerocopy.plan(RankRuntime(rank_program(plan1, 0), kernel="math", kv_pool=True)), zerocopy.ZeroCopy())

    def test_in_place_change_before_backward_is_an_error(self):
        plan = plan_from_json(synth.owner_plan([23, 40], 1, 4))
        att = FcpAttention.from_plan(plan, rank=0)
        prog = att.runtime.prog
        x = _user_inputs(prog, 3)
        for victim in ("q", "o"):
            q, k, v = (t.clone().requires_grad_(True) for t in x[:3])
            o = att(q, k, v)
            with torch.no_grad():
                (q if victim == "q" else o).mul_(2.0)
            with self.subTest(victim=victim), self.assertRaises(RuntimeError):
                o.backward(x[3])
        # unchanged inputs: the backward runs
        q, k, v = (t.clone().requires_grad_(True) for t in x[:3])
        att(q, k, v).backward(x[3])
        self.assertIsNotNone(q.grad)


class LaunchOrderTest(unittest.TestCase):
    def test_largest_first_equals_the_plan_order(self):
        import os
        from unittest import mock

        from fcp_torch.local import run_local

        from .test_runtime import inputs_for

        for world in (1, 2, 4):
            plan = plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], world, world, "causal"))
            for r in range(world):
                rt = RankRuntime(rank_program(plan, r), kernel="math", local=True)
                for i in range(len(rt.prog.forward.ops)):
                    pairs = [L.pairs for L in rt._launches("forward", i)]
                    with self.subTest(world=world, rank=r, op=i):
                        self.assertEqual(pairs, sorted(pairs, reverse=True))
            x = inputs_for(plan, 2)
            got = {}
            for order in ("size", "plan"):
                with mock.patch.dict(os.environ, {"FCP_LAUNCH_ORDER": order}):
                    got[order] = run_local(plan, x)
            for f in ("o", "dq", "dk", "dv"):
                for s in range(len(plan.sequences)):
                    with self.subTest(world=world, out=f, seq=s):
                        self.assertLess(_rel(got["size"][f][s], got["plan"][f][s]), TOL)


if __name__ == "__main__":
    unittest.main()

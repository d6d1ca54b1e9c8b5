"""The fused path's torch fallback (merge plans, CSR merge) against the original merges, float32."""
import os
import unittest

import numpy as np
import torch

from fcp_torch.fused import Fused, gather_rows_torch, merge_csr_torch, merge_plans
from fcp_torch.kernels import merge_into, merge_slice
from fcp_torch.local import run_local
from fcp_torch.plan import plan_from_json, rank_program

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

    def test_forward_layout_invariants(self):
        # Single-partial slots are written directly, exactly once; every slot where partials meet or
        # whose O travels (`out`) has a float32 accumulator row; `out` messages address those rows.
        from fcp_torch.fused import prepare_merges
        from fcp_torch.runtime import RankRuntime

        for world in (1, 4):
            plan = plan_from_json(synth.owner_plan([40, 9, 70, 3], world, 2, "causal"))
            saw_out, direct_rows = False, 0
            for r in range(world):
                rt = RankRuntime(rank_program(plan, r), None, "cpu", torch.float32, "math", "square")
                rt.prepare()
                lay = prepare_merges(rt)
                nq = rt.qspace.size
                acc = np.zeros(nq, bool)
                acc[lay.acc_slots.numpy()] = True
                cnt = np.zeros(nq, np.int64)
                direct = np.zeros(nq, np.int64)
                for i in range(len(rt.prog.forward.ops)):
                    launches = rt._launches("forward", i)
                    for L, (dr, mp) in zip(launches, lay.launches[id(launches)]):
                        np.add.at(cnt, L.qidx.numpy(), 1)
                        if dr is not None:
                            np.add.at(direct, dr.dst.numpy(), 1)
                            rows = np.arange(len(L.qidx)) if dr.rows is None else dr.rows.numpy()
                            self.assertTrue(np.array_equal(L.qidx.numpy()[rows], dr.dst.numpy()))
                        if mp.rows:
                            self.assertTrue(np.all(acc[L.qidx.numpy()[mp.sel.numpy() if mp.sel is not None else slice(None)]]))
                self.assertTrue(np.all(acc[cnt >= 2]))
                self.assertTrue(np.array_equal(direct, ((cnt == 1) & ~acc).astype(np.int64)))
                direct_rows += lay.direct_rows
                for g in range(len(rt.prog.forward.groups)):
                    sp = rt._group("forward", g)
                    for side in (sp.sends, sp.recvs):
                        for parts in side.values():
                            for part in parts:
                                if part.field == "O":
                                    saw_out = True
                                    self.assertTrue(bool((part.idx < len(lay.acc_slots)).all()))
            self.assertEqual(saw_out, world > 1)
            self.assertGreater(direct_rows, 0)

    def test_world1_forward_equals_legacy(self):
        # Output, final O and LSE of the forward state: the split layout against the original merges.
        from fcp_torch.runtime import RankRuntime

        plan = plan_from_json(synth.owner_plan([40, 9, 70, 3], 1, 2, "causal"))
        prog = rank_program(plan, 0)
        g = torch.Generator().manual_seed(3)
        q = torch.randn(prog.user_tokens, plan.q_heads, plan.head_dim, generator=g)
        k = torch.randn(prog.user_tokens, plan.kv_heads, plan.head_dim, generator=g)
        v = torch.randn(prog.user_tokens, plan.kv_heads, plan.head_dim, generator=g)
        outs = []
        for fused in (False, True):
            rt = RankRuntime(prog, None, "cpu", torch.float32, "math", "square")
            if not fused:
                rt.fused = None
            o, st = rt.forward_with_state(q, k, v)
            outs.append((o, st["Ofinal"], st["LSE"]))
        for a, b in zip(*outs):
            self.assertLessEqual(rel(a, b), TOL)


class DkvWireTest(unittest.TestCase):
    def test_pack_roundtrip_keeps_float32_bits(self):
        from fcp_torch import fused

        x = torch.randn(5, 2, 8, dtype=torch.float32)
        for wire in (torch.bfloat16, torch.float16):
            w = fused.pack_part(x, True, wire)
            self.assertEqual(w.dtype, wire)
            self.assertEqual(w.numel(), fused.wire_elems(x.numel(), True, wire))
            msg = torch.cat([torch.zeros(6, dtype=wire), w])  # a part after another in one message
            self.assertTrue(torch.equal(fused.unpack_part(msg[6:], True, wire).view(5, 2, 8), x))
            odd = torch.cat([torch.zeros(3, dtype=wire), w])  # unaligned slice: copied, same bits
            self.assertTrue(torch.equal(fused.unpack_part(odd[3:], True, wire).view(5, 2, 8), x))
            # K/V and `out` parts keep the wire dtype; a float32 wire carries everything as is
            self.assertEqual(fused.pack_part(x, False, wire).dtype, wire)
        self.assertEqual(fused.wire_elems(10, True, torch.float32), 10)

    def test_bf16_ring_partials_lose_less(self):
        # A ring-like chunk plan over 8 ranks in bf16: dK/dV partials hop up to 7 times. With float32
        # partials on the wire the dK/dV error against float64 is below the bf16-partials error.
        from fcp_torch import fused
        from fcp_torch.reference import reference_sequence

        plan = plan_from_json(synth.chunk_plan([300, 90, 200], 8))
        x = inputs_for(plan, 2)
        ref = [reference_sequence(x["q"][s], x["k"][s], x["v"][s], x["dO"][s], plan.causal) for s in range(len(plan.sequences))]

        def err(got, i, f):
            num = sum(float((got[f][s].double() - ref[s][i]).pow(2).sum()) for s in range(len(ref)))
            return (num / sum(float(r[i].pow(2).sum()) for r in ref)) ** 0.5

        orig = fused.f32_on_wire
        res = {}
        try:
            for on in (True, False):
                fused.f32_on_wire = orig if on else (lambda kind_dkv, wire: False)
                got = run_local(plan, x, dtype=torch.bfloat16, kernel="math")
                res[on] = {f: err(got, i, f) for i, f in ((2, "dk"), (3, "dv"))}
        finally:
            fused.f32_on_wire = orig
        for f in ("dk", "dv"):
            self.assertLess(res[True][f], res[False][f] * 0.97, (f, res))
            self.assertLess(res[True][f], 1e-2, (f, res))


if __name__ == "__main__":
    unittest.main()

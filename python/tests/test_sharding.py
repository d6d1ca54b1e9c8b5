"""The model-facing API: shard/gather of packed batches, softmax scale, and its bad-input errors
(raised with codes before any collective call)."""
import math
import os
import tempfile
import unittest

import numpy as np
import torch
import torch.distributed as dist

import fcp_torch
from fcp_torch.plan import PlanError, plan_from_json, user_rows
from fcp_torch.serve_client import PlannerClient

from . import synth

LENGTHS = [37, 5, 64, 20, 9]


class ShardTest(unittest.TestCase):
    def test_every_token_on_exactly_one_rank_with_its_position(self):
        for world in (1, 2, 3):
            plan = plan_from_json(synth.owner_plan(LENGTHS, world, 2))
            seen = np.zeros(sum(LENGTHS), int)
            base = np.concatenate([[0], np.cumsum(LENGTHS)])
            for r in range(world):
                sh = fcp_torch.shard(LENGTHS, plan, rank=r)
                idx, pos, seq = sh.index.numpy(), sh.position_ids.numpy(), sh.seq_ids.numpy()
                np.add.at(seen, idx, 1)
                np.testing.assert_array_equal(idx - base[seq], pos)
                self.assertEqual(len(idx), int(user_rows(plan, r)[2].sum()))
            np.testing.assert_array_equal(seen, 1)

    def test_take_and_gather_round_trip_on_one_rank(self):
        plan = plan_from_json(synth.owner_plan(LENGTHS, 1, 2))
        sh = fcp_torch.shard(LENGTHS, plan)
        x = torch.randn(sum(LENGTHS), 3)
        self.assertTrue(torch.equal(fcp_torch.gather(sh.take(x), sh), x))

    def test_bad_inputs_have_codes(self):
        plan = plan_from_json(synth.owner_plan(LENGTHS, 2, 2))
        cases = [
            (lambda: fcp_torch.shard([37, 5, 64, 20], plan, rank=0), "run.batch"),
            (lambda: fcp_torch.shard(LENGTHS, plan, rank=2), "run.rank"),
            (lambda: fcp_torch.shard(LENGTHS, plan, rank=0).take(torch.zeros(3, 1)), "run.tokens"),
            (lambda: fcp_torch.shard(LENGTHS, 42, rank=0), "run.plan"),
            (lambda: fcp_torch.shard(LENGTHS, plan, cp_group=object()), "run.noGroup"),
            (lambda: PlannerClient(command=["/nonexistent/fcp", "serve"]), "serve.command"),
        ]
        for fn, code in cases:
            with self.subTest(code):
                with self.assertRaises(PlanError) as e:
                    fn()
                self.assertEqual(e.exception.code, code)
        old = os.environ.get("FCP_CLI")
        os.environ["FCP_CLI"] = "/nonexistent/fcp"
        try:
            with self.assertRaises(PlanError) as e:
                PlannerClient()
            self.assertEqual(e.exception.code, "serve.command")
        finally:
            if old is None:
                del os.environ["FCP_CLI"]
            else:
                os.environ["FCP_CLI"] = old

    def test_a_plan_for_another_world_than_the_group(self):
        """One gloo process: a 2-rank plan is refused (run.world) before any collective."""
        plan = plan_from_json(synth.owner_plan(LENGTHS, 2, 2))
        store = os.path.join(tempfile.mkdtemp(), "store")
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        try:
            for fn in (lambda: fcp_torch.FcpAttention.from_plan(plan), lambda: fcp_torch.shard(LENGTHS, plan)):
                with self.assertRaises(PlanError) as e:
                    fn()
                self.assertEqual(e.exception.code, "run.world")
            g = dist.new_group([0])
            with self.assertRaises(PlanError) as e:
                fcp_torch.FcpAttention.from_plan(plan, cp_group=g)
            self.assertEqual(e.exception.code, "run.world")
            one = plan_from_json(synth.owner_plan(LENGTHS, 1, 2))
            sh = fcp_torch.shard(LENGTHS, one, cp_group=g)  # a one-rank group works
            self.assertEqual(sh.index.numel(), sum(LENGTHS))
        finally:
            dist.destroy_process_group()

    def test_cp_group_from_a_device_mesh(self):
        """Duck-typed device meshes: a 1-D mesh (get_group()), (mesh, dim) of a 2-D one; a 2-D mesh
        without its dimension and a bad dimension are run.group; the group's world is checked."""
        store = os.path.join(tempfile.mkdtemp(), "store")
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        try:
            g = dist.new_group([0])

            class Mesh1D:
                def get_group(self, mesh_dim=None):
                    return g

            class Mesh2D:
                def get_group(self, mesh_dim=None):
                    if mesh_dim is None:
                        raise RuntimeError("found 2 dimensions, pass mesh_dim")
                    return {"dp": dist.group.WORLD, "cp": g}[mesh_dim]

            one = plan_from_json(synth.owner_plan(LENGTHS, 1, 2))
            two = plan_from_json(synth.owner_plan(LENGTHS, 2, 2))
            for grp in (Mesh1D(), (Mesh2D(), "cp")):
                sh = fcp_torch.shard(LENGTHS, one, cp_group=grp)
                self.assertIs(sh.group, g)
                self.assertEqual(sh.index.numel(), sum(LENGTHS))
                att = fcp_torch.FcpAttention.from_plan(one, cp_group=grp)
                self.assertIs(att.runtime.comm.group, g)
                with self.assertRaises(PlanError) as e:
                    fcp_torch.shard(LENGTHS, two, cp_group=grp)
                self.assertEqual(e.exception.code, "run.world")
            for bad in (Mesh2D(), (Mesh2D(), "tp"), (g, 0, 1)):
                with self.assertRaises(PlanError) as e:
                    fcp_torch.FcpAttention.from_plan(one, cp_group=bad)
                self.assertEqual(e.exception.code, "run.group")
        finally:
            dist.destroy_process_group()

    def test_softmax_scale(self):
        plan = plan_from_json(synth.owner_plan([23, 40], 1, 4))
        sh = fcp_torch.shard([23, 40], plan)
        att = sh.attention(softmax_scale=0.3)
        g = torch.Generator().manual_seed(5)
        q, k, v = (torch.randn(63, h, 16, generator=g) for h in (4, 2, 2))
        o = att(q[sh.index], k[sh.index], v[sh.index])
        ref, at = [], 0
        for L in (23, 40):
            qs, ks, vs = q[at : at + L], k[at : at + L].repeat_interleave(2, 1), v[at : at + L].repeat_interleave(2, 1)
            s = torch.einsum("ihd,jhd->hij", qs, ks) * 0.3
            s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
            ref.append(torch.einsum("hij,jhd->ihd", s.softmax(-1), vs))
            at += L
        ref = torch.cat(ref)[sh.index]
        self.assertLess(float((o - ref).norm() / ref.norm()), 1e-5)
        self.assertNotAlmostEqual(0.3, 1 / math.sqrt(16))


if __name__ == "__main__":
    unittest.main()

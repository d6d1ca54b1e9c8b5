"""Plan reading, chunk expansion and rank programs."""
import gzip
import json
import os
import tempfile
import unittest

import numpy as np

from fcp_torch.plan import PlanError, attended_pairs, plan_from_json, rank_program, read_plan

from . import synth


def brute_pairs(causal, qs, ql, ks, kl):
    return sum(max(0, min(ks + kl, q + 1) - ks) if causal else kl for q in range(qs, qs + ql))


class PlanReadTest(unittest.TestCase):
    def test_json_and_gzip_read_the_same(self):
        p = synth.owner_plan([30, 7], 2, 1)
        d = tempfile.mkdtemp()
        a = synth.write(p, os.path.join(d, "a.json"))
        b = os.path.join(d, "b.json.gz")
        with open(b, "wb") as f:
            f.write(gzip.compress(json.dumps(p).encode()))
        pa, pb = read_plan(a), read_plan(b)
        self.assertEqual(pa.world, 2)
        np.testing.assert_array_equal(pa.tasks["qStart"], pb.tasks["qStart"])
        np.testing.assert_array_equal(pa.forward.transfers["kind"], pb.forward.transfers["kind"])

    def test_errors_have_codes(self):
        p = synth.owner_plan([30], 1, 1)
        with self.assertRaises(PlanError) as e:
            plan_from_json({**p, "format": "fcp-plan/0"})
        self.assertEqual(e.exception.code, "plan.format")
        bad = json.loads(json.dumps(p))
        del bad["tasks"]["qStart"]
        with self.assertRaises(PlanError) as e:
            plan_from_json(bad)
        self.assertEqual(e.exception.code, "plan.schema")
        bad = json.loads(json.dumps(p))
        bad["backward"]["pushStream"] = 1
        with self.assertRaises(PlanError) as e:
            plan_from_json(bad)
        self.assertEqual(e.exception.code, "plan.schema")
        ok = json.loads(json.dumps(p))
        ok["backward"]["pushStream"] = True
        self.assertTrue(plan_from_json(ok).backward.push_stream)
        self.assertFalse(plan_from_json(p).backward.push_stream)
        with self.assertRaises(PlanError) as e:
            read_plan("/nonexistent/plan.json")
        self.assertEqual(e.exception.code, "io.read")
        with self.assertRaises(PlanError) as e:
            rank_program(plan_from_json(p), 3)
        self.assertEqual(e.exception.code, "run.rank")

    def test_attended_pairs_matches_brute_force(self):
        rng = np.random.default_rng(0)
        for _ in range(300):
            qs, ql, ks, kl = (int(x) for x in rng.integers(0, 40, 4))
            for causal in (True, False):
                self.assertEqual(int(attended_pairs(causal, [qs], [ql], [ks], [kl])[0]), brute_pairs(causal, qs, ql, ks, kl))


class ChunkExpansionTest(unittest.TestCase):
    def test_chunk_rows_expand_to_parts(self):
        seqs = [37, 5, 64, 3]
        plan = plan_from_json(synth.chunk_plan(seqs, 3))
        P = 6
        for r in range(3):
            prog = rank_program(plan, r)
            # user rows: parts r and P-1-r of every sequence, empty parts skipped
            want = []
            for s, L in enumerate(seqs):
                for part in sorted({r, P - 1 - r}):
                    x = synth.part_range(L, P, part)
                    if x:
                        want.append((s, x[0], x[1]))
            got = sorted(zip(prog.user_seq.tolist(), prog.user_start.tolist(), prog.user_length.tolist()))
            self.assertEqual(got, sorted(want))
            # every expanded task is attended and lies in the rank's home parts
            for op in prog.forward.ops:
                pairs = attended_pairs(True, op.q_start, op.q_length, op.kv_start, op.kv_length)
                self.assertTrue(np.all(pairs > 0))
            # every transfer of the rank names it as sender or receiver
            for g in prog.forward.groups + prog.backward.groups:
                self.assertTrue(np.all((g.src == r) | (g.dst == r)))

    def test_expanded_tasks_cover_every_pair_once(self):
        seqs = [37, 5, 64, 3]
        for mask in ("causal", "full"):
            plan = plan_from_json(synth.chunk_plan(seqs, 4, mask))
            total = 0
            for r in range(4):
                prog = rank_program(plan, r)
                total += prog.attended_pairs("forward")
            want = sum(L * (L + 1) // 2 if mask == "causal" else L * L for L in seqs)
            self.assertEqual(total, want)


if __name__ == "__main__":
    unittest.main()

"""Deferred sums (deferred.py) and task fusion (fusion.py): window invariants, the same outputs as
the per-launch runtime (float32, <= 1e-6), and checks shown to reject broken variants."""
import os
import unittest

import numpy as np
import torch

from fcp_torch import deferred
from fcp_torch.fusion import fuse_ops, fuse_tasks
from fcp_torch.local import run_local
from fcp_torch.plan import Op, plan_from_json

from . import synth
from .test_runtime import inputs_for

TOL = 1e-6


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / (b.norm() + 1e-300))


def window_violations(ws, slots, rows, op_of, ops, max_rows, barriers):
    """What is wrong with a window list (empty when nothing): each launch with rows in exactly one
    window, in run order; at most `ops` ops and `max_rows` held rows a window (a lone launch may be
    larger); no window spans a barrier; (source, row) of every CSR entry = its concatenated row."""
    bad = []
    seen = [i for w in ws for i in w.launches]
    want = [i for i, s in enumerate(slots) if len(s)]
    if seen != want:
        bad.append("launches not covered once, in order")
    for w in ws:
        wops = sorted(set(int(op_of[i]) for i in w.launches))
        if len(wops) > ops:
            bad.append(f"window of {len(wops)} ops")
        held = sum(rows[i] for i in w.launches)
        if max_rows is not None and held > max_rows and len(w.launches) > 1:
            bad.append(f"window holds {held} rows")
        for b in barriers:
            if wops[0] <= b < wops[-1]:
                bad.append(f"window spans barrier {b}")
        if w.end_launch != w.launches[-1]:
            bad.append("window ends before its last launch")
        off = np.cumsum([0] + [rows[i] for i in w.launches])
        if not np.array_equal(off[w.src_k.numpy()] + w.src_r.numpy(), w.plan.src.numpy()):
            bad.append("(source, row) pairs differ from the plan's rows")
        # every destination slot gets exactly the rows that the window's launches send to it
        dst = w.plan.dst.numpy()
        ptr = w.plan.ptr.numpy()
        got = np.repeat(dst, np.diff(ptr))
        cat = np.concatenate([slots[i] for i in w.launches])
        if not np.array_equal(cat[w.plan.src.numpy()], got):
            bad.append("rows sent to the wrong slots")
    return bad


def random_case(rng):
    n_l = int(rng.integers(1, 14))
    op_of = np.sort(rng.integers(0, max(1, n_l // 2 + 1), n_l))
    n_slots = int(rng.integers(5, 40))
    slots = [rng.integers(0, n_slots, int(rng.integers(0, 12))) if rng.random() > 0.2 else np.zeros(0, np.int64) for _ in range(n_l)]
    rows = [len(s) for s in slots]
    barriers = sorted(set(rng.integers(0, int(op_of[-1]) + 1, int(rng.integers(0, 3))).tolist()))
    ops = int(rng.integers(1, 5))
    max_rows = None if rng.random() < 0.5 else int(rng.integers(1, 30))
    return slots, rows, op_of, n_slots, ops, max_rows, barriers


class WindowTest(unittest.TestCase):
    def test_window_invariants(self):
        for seed in range(200):
            slots, rows, op_of, n, ops, mr, bars = random_case(np.random.default_rng(seed))
            ws = deferred.windows(slots, [None] * len(slots), rows, op_of, n, "cpu", ops, mr, bars)
            self.assertEqual(window_violations(ws, slots, rows, op_of, ops, mr, bars), [], seed)

    def test_check_rejects_broken_windows(self):
        # the same check catches windows built without the barriers, and a wrong row mapping
        caught_barrier = caught_rows = False
        for seed in range(200):
            slots, rows, op_of, n, ops, mr, bars = random_case(np.random.default_rng(seed))
            if not bars:
                continue
            ws = deferred.windows(slots, [None] * len(slots), rows, op_of, n, "cpu", ops + 3, None, ())
            caught_barrier |= any("barrier" in v for v in window_violations(ws, slots, rows, op_of, ops + 3, None, bars))
            ws = deferred.windows(slots, [None] * len(slots), rows, op_of, n, "cpu", ops, mr, bars)
            for w in ws:
                if w.plan.rows > 1:
                    w.src_r = torch.roll(w.src_r, 1)
            caught_rows |= bool(window_violations(ws, slots, rows, op_of, ops, mr, bars))
        self.assertTrue(caught_barrier)
        self.assertTrue(caught_rows)

    def test_first_touch_once(self):
        # a slot's accumulator is empty (written, not read) in exactly one window: its first
        rng = np.random.default_rng(5)
        slots = [rng.integers(0, 20, 15) for _ in range(8)]
        ws = deferred.windows(slots, [None] * 8, [15] * 8, np.arange(8) // 2, 20, "cpu", 2, None)
        firsts = np.concatenate([w.plan.dst.numpy()[w.plan.first_b.numpy()] for w in ws])
        self.assertEqual(sorted(firsts.tolist()), sorted(set(np.concatenate(slots).tolist())))

    def test_torch_window_merge_equals_per_launch(self):
        from fcp_torch.fused import merge_csr_torch, merge_plans

        for seed in range(20):
            rng = np.random.default_rng(seed)
            g = torch.Generator().manual_seed(seed)
            n, H, D = 30, 3, 8
            slots = [rng.integers(0, n, int(rng.integers(1, 25))) for _ in range(6)]
            os_ = [torch.randn(len(s), H, D, generator=g) for s in slots]
            ls = [torch.randn(H, len(s), generator=g).t() * 3 for s in slots]
            ref = [torch.zeros(n, H, D), torch.full((n, H), float("-inf"))]
            for s, o, lse, mp in zip(slots, os_, ls, merge_plans(slots, n, "cpu")):
                merge_csr_torch(ref[0], ref[1], o, lse, mp)
            got = [torch.zeros(n, H, D), torch.full((n, H), float("-inf"))]
            sums, want = torch.zeros(n, H, D), torch.zeros(n, H, D)
            for s, o in zip(slots, os_):
                want.index_add_(0, torch.from_numpy(s), o)
            for w in deferred.windows(slots, [None] * 6, [len(s) for s in slots], [0, 0, 1, 2, 2, 3], n, "cpu", 2, None):
                deferred.merge_window_torch(got[0], got[1], [os_[i] for i in w.launches], [ls[i] for i in w.launches], w)
                deferred.add_window_torch(sums, [os_[i] for i in w.launches], w)
            fin = torch.isfinite(ref[1])
            self.assertTrue(torch.equal(fin, torch.isfinite(got[1])))
            self.assertLessEqual(rel(got[0], ref[0]), TOL)
            self.assertLessEqual(rel(got[1][fin], ref[1][fin]), TOL)
            self.assertLessEqual(rel(sums, want), TOL)


def pairs_of(causal, seq, qs, ql, ks, kl):
    out = set()
    for s, a, n, b, m in zip(*(np.asarray(x).tolist() for x in (seq, qs, ql, ks, kl))):
        for i in range(a, a + n):
            for j in range(b, b + m):
                if not causal or j <= i:
                    out.add((s, i, j))
    return out


def pair_count(causal, *cols):
    n = 0
    for s, a, ln, b, m in zip(*(np.asarray(x).tolist() for x in cols)):
        for i in range(a, a + ln):
            n += sum(1 for j in range(b, b + m) if not causal or j <= i)
    return n


def random_tasks(rng):
    """Tasks of a few query blocks against disjoint K/V blocks of one or two sequences (as a plan's)."""
    rows = []
    for s in range(int(rng.integers(1, 3))):
        B = int(rng.integers(2, 7))
        bl = int(rng.integers(1, 5))
        for qb in rng.choice(B, int(rng.integers(1, B + 1)), replace=False).tolist():
            for kb in range(qb + 1):
                if rng.random() < 0.6:
                    rows.append((s, qb * bl, bl, kb * bl, bl))
    rng.shuffle(rows)
    return [np.array([r[i] for r in rows], np.int64) for i in range(5)] if rows else [np.zeros(0, np.int64)] * 5


class FusionTest(unittest.TestCase):
    def test_fused_tasks_cover_the_same_pairs(self):
        fewer = 0
        for seed in range(100):
            cols = random_tasks(np.random.default_rng(seed))
            f = fuse_tasks(*cols)
            self.assertEqual(pairs_of(True, *f), pairs_of(True, *cols))
            self.assertEqual(pair_count(True, *f), pair_count(True, *cols))  # no pair twice
            # fused K/V ranges of one query range never touch (else they would have been fused)
            key = list(zip(*(x.tolist() for x in f[:3])))
            for i in range(1, len(key)):
                if key[i] == key[i - 1]:
                    self.assertLess(f[3][i - 1] + f[4][i - 1], f[3][i])
            fewer += len(f[0]) < len(cols[0])
        self.assertGreater(fewer, 20)

    def test_check_rejects_fusion_across_gaps(self):
        # a broken fusion that also bridges gaps between K/V ranges attends pairs no task had
        def broken(seq, qs, ql, ks, kl):
            o = np.lexsort((ks, ql, qs, seq))
            seq, qs, ql, ks, kl = seq[o], qs[o], ql[o], ks[o], kl[o]
            same = np.zeros(len(seq), bool)
            same[1:] = (seq[1:] == seq[:-1]) & (qs[1:] == qs[:-1]) & (ql[1:] == ql[:-1])
            head = np.nonzero(~same)[0]
            last = np.concatenate((head[1:], [len(seq)])) - 1
            return seq[head], qs[head], ql[head], ks[head], (ks + kl)[last] - ks[head]

        caught = 0
        for seed in range(100):
            cols = random_tasks(np.random.default_rng(seed))
            if len(cols[0]) and pairs_of(True, *broken(*cols)) != pairs_of(True, *cols):
                caught += 1
        self.assertGreater(caught, 10)

    def test_fused_ranges_are_views_of_the_kv_space(self):
        # the rank's K/V space lays each sequence's ranges out contiguously by position: every fused
        # task's K/V range is one slot range (a view), and ranges of one space never share a slot
        from fcp_torch.plan import PlanError
        from fcp_torch.spaces import TokenSpace

        bridged = 0
        for seed in range(100):
            cols = random_tasks(np.random.default_rng(seed))
            if not len(cols[0]):
                continue
            sp = TokenSpace(cols[0], cols[3], cols[4])
            f = fuse_tasks(*cols)
            first = sp.locate(f[0], f[3], f[4])  # raises PlanError if a range straddles two intervals
            for a, s_, k0, n in zip(first.tolist(), f[0].tolist(), f[3].tolist(), f[4].tolist()):
                i = int(np.nonzero((sp.seq == s_) & (sp.start <= k0) & (sp.end >= k0 + n))[0][0])
                self.assertEqual(a, int(sp.offset[i]) + k0 - int(sp.start[i]))
            self.assertTrue(np.all(sp.offset[1:] - sp.offset[:-1] == sp.end - sp.start))  # no overlap
            # a fusion that bridged a gap would read slots the rank does not hold: locate refuses it
            o = np.lexsort((cols[3], cols[0]))
            s0, k0, k1 = cols[0][o], cols[3][o], cols[3][o] + cols[4][o]
            gap = np.nonzero((s0[1:] == s0[:-1]) & (k0[1:] > k1[:-1]))[0]
            if len(gap):
                j = int(gap[0])
                with self.assertRaises(PlanError):
                    sp.locate([s0[j]], [k0[j]], [k1[j + 1] - k0[j]])
                bridged += 1
        self.assertGreater(bridged, 5)

    def test_fuse_ops_keeps_index_and_after(self):
        ops = [Op(i, a, *[np.array(x, np.int64) for x in ([0, 0], [8, 8], [4, 4], [0, 4 * i + 4], [4, 4])]) for i, a in enumerate([0, 2])]
        out = fuse_ops(ops)
        self.assertEqual([(o.index, o.after) for o in out], [(0, 0), (1, 2)])
        self.assertEqual(out[0].kv_length.tolist(), [8])  # [0, 4) and [4, 8) fused
        self.assertEqual(out[1].kv_length.tolist(), [4, 4])  # [0, 4) and [8, 12): a gap


class RunsTest(unittest.TestCase):
    def test_zero_runs(self):
        from fcp_torch.fused import _runs

        rng = np.random.default_rng(0)
        for _ in range(50):
            s = np.nonzero(rng.random(60) < 0.5)[0]
            r = _runs(s, 1000)
            self.assertEqual(np.concatenate([np.arange(a, e) for a, e in r] or [np.zeros(0, int)]).tolist(), s.tolist())
            self.assertTrue(all(r[i][1] < r[i + 1][0] for i in range(len(r) - 1)))  # maximal runs
            if len(r) > 1:
                self.assertIsNone(_runs(s, len(r) - 1))


class RuntimeTest(unittest.TestCase):
    def test_runtime_equals_per_launch(self):
        plans = (
            synth.owner_plan([40, 9, 70, 3], 4, 2, "causal"),
            synth.owner_plan([140, 9, 70, 3], 1, 2, "causal"),
            synth.chunk_plan([70, 9, 33], 3),
            synth.owner_plan([50, 20], 2, 3, "full"),
        )
        envs = ({}, {"FCP_MERGE_WINDOW": "3", "FCP_FUSE_TASKS": "0"}, {"FCP_MERGE_WINDOW": "2", "FCP_WINDOW_ROWS": "30"}, {"FCP_MERGE_WINDOW": "1"},
                {"FCP_WINDOW_ROWS": "0"}, {"FCP_MERGE_WINDOW": "4", "FCP_KV_POOL": "1"})
        keys = ("FCP_FUSED", "FCP_MERGE_WINDOW", "FCP_WINDOW_ROWS", "FCP_FUSE_TASKS", "FCP_KV_POOL", "FCP_SOLO_PAIRS")
        old = {k: os.environ.get(k) for k in keys}
        try:
            for pj in plans:
                plan = plan_from_json(pj)
                x = inputs_for(plan, 4)
                for k in keys:
                    os.environ.pop(k, None)
                # the reference: per-launch merges and adds, no task fusion (run 9's runtime)
                os.environ.update(FCP_FUSED="torch", FCP_MERGE_WINDOW="1", FCP_FUSE_TASKS="0")
                ref = run_local(plan, x, kernel="math", mode="square")
                for k in ("FCP_MERGE_WINDOW", "FCP_FUSE_TASKS"):
                    del os.environ[k]
                for env in envs:
                    os.environ.update(env)
                    got = run_local(plan, x, kernel="math", mode="square")
                    for k in env:
                        del os.environ[k]
                    for f in ("o", "dq", "dk", "dv"):
                        self.assertLessEqual(rel(torch.cat(got[f]), torch.cat(ref[f])), TOL, (env, f))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    unittest.main()

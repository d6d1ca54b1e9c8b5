"""fcp_torch.check: broken plans are refused with the validator's codes before any collective call."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

from fcp_torch.autograd import FcpAttention
from fcp_torch.check import check_plan
from fcp_torch.local import run_local
from fcp_torch.plan import PlanError, plan_from_json

from . import synth


class RecordingComm:
    """A communicator that fails the test if the runtime ever posts a group through it."""

    rank, world, stream = 0, 2, None

    def __init__(self):
        self.calls = 0

    def post(self, *a, **k):
        self.calls += 1
        raise AssertionError("a collective was posted for a broken plan")

    def wait(self, *a, **k):
        self.calls += 1
        raise AssertionError("a collective was awaited for a broken plan")


def _drop_transfer(p, phase, i):
    t = p[phase]["transfers"]
    for c in t.values():
        del c[i]
    sa = p[phase]["sendAfter"]
    keep = [j for j, x in enumerate(sa["transfer"]) if x != i]
    sa["compute"] = [sa["compute"][j] for j in keep]
    sa["transfer"] = [sa["transfer"][j] - (sa["transfer"][j] > i) for j in keep]


def _first(p, phase, kind):
    return p[phase]["transfers"]["kind"].index(kind)


def _drop_send_after(p, phase, kind):
    sa = p[phase]["sendAfter"]
    j = next(j for j, t in enumerate(sa["transfer"]) if p[phase]["transfers"]["kind"][t] == kind)
    del sa["transfer"][j], sa["compute"][j]


BASE = synth.owner_plan([37, 5, 64, 20, 9], 2, 3)

CASES = {
    "drop a dkv transfer": (lambda p: _drop_transfer(p, "backward", _first(p, "backward", "dkv")), "plan.rule4.dkvLost"),
    "drop a dkv sendAfter": (lambda p: _drop_send_after(p, "backward", "dkv"), "plan.rule4.dkvRace"),
    "drop an out sendAfter": (lambda p: _drop_send_after(p, "forward", "out"), "plan.rule4.outEarly"),
    "drop a forward out": (lambda p: _drop_transfer(p, "forward", _first(p, "forward", "out")), "plan.rule4.outMissing"),
    "drop a kv fetch": (lambda p: _drop_transfer(p, "forward", _first(p, "forward", "kv")), "plan.rule3.kvMissing"),
    "drop an in": (lambda p: _drop_transfer(p, "forward", _first(p, "forward", "in")), "plan.rule3.qMissing"),
    "src -1": (lambda p: p["forward"]["transfers"]["src"].__setitem__(0, -1), "plan.structure.rank"),
    "dst = world": (lambda p: p["backward"]["transfers"]["dst"].__setitem__(0, 2), "plan.structure.rank"),
    "a transfer to itself": (lambda p: p["forward"]["transfers"]["dst"].__setitem__(0, p["forward"]["transfers"]["src"][0]), "plan.structure.selfTransfer"),
    "kind dkv in the forward": (lambda p: p["forward"]["transfers"]["kind"].__setitem__(0, "dkv"), "plan.structure.kind"),
    "unknown kind": (lambda p: p["forward"]["transfers"]["kind"].__setitem__(0, "kvv"), "plan.structure.kind"),
    "heads that do not divide": (lambda p: p["model"].update(qHeads=5), "plan.structure.model"),
    "absurd world": (lambda p: p.update(world=10**6), "plan.limit.world"),
    "a task dropped from its op": (lambda p: p["forward"]["compute"].update(taskIds=p["forward"]["compute"]["taskIds"][:-1], taskOffsets=p["forward"]["compute"]["taskOffsets"][:-1] + [p["forward"]["compute"]["taskOffsets"][-1] - 1]), "plan.rule2.taskNotRun"),
    "an op waiting for a later group": (lambda p: p["forward"]["compute"]["after"].__setitem__(0, max(p["forward"]["groupOfRound"])), None),
    "a task shortened": (lambda p: p["tasks"]["kvLength"].__setitem__(0, p["tasks"]["kvLength"][0] - 1) if p["tasks"]["kvLength"][0] > 1 else None, "plan.rule2.pairMissing"),
    "a non-integer length": (lambda p: p["tasks"]["qLength"].__setitem__(0, 1.5), "plan.schema"),
    "a column cut short": (lambda p: p["tasks"]["qStart"].pop(), "plan.structure.columns"),
}


class CheckTest(unittest.TestCase):
    def test_valid_plans_pass(self):
        for world in (1, 2, 3, 4):
            for mask in ("causal", "full"):
                check_plan(plan_from_json(synth.owner_plan([37, 5, 64, 20, 1], world, 2, mask)))
                check_plan(plan_from_json(synth.chunk_plan([37, 5, 64, 3, 9], world, mask)))

    def test_broken_plans_are_refused_before_any_collective(self):
        check_plan(plan_from_json(BASE))
        for name, (edit, code) in CASES.items():
            with self.subTest(name):
                p = copy.deepcopy(BASE)
                edit(p)
                comm = RecordingComm()
                with self.assertRaises(PlanError) as e:
                    FcpAttention.from_plan(plan_from_json(p), rank=0, comm=comm)
                if code is not None:
                    self.assertEqual(e.exception.code, code, e.exception.message)
                self.assertTrue(e.exception.code.startswith(("plan.", "run.")), e.exception.code)
                self.assertEqual(comm.calls, 0)

    def test_run_local_refuses_before_starting_ranks(self):
        p = copy.deepcopy(BASE)
        _drop_transfer(p, "backward", _first(p, "backward", "dkv"))
        with self.assertRaises(PlanError) as e:
            run_local(plan_from_json(p), {f: [torch.zeros(1)] for f in ("q", "k", "v", "dO")})
        self.assertEqual(e.exception.code, "plan.rule4.dkvLost")

    def test_worker_reports_src_minus_one_as_one_coded_line(self):
        """Issue 11 item 13: a transfer with src -1 gave an IndexError traceback in every worker."""
        p = copy.deepcopy(BASE)
        p["forward"]["transfers"]["src"][0] = -1
        d = tempfile.mkdtemp()
        path = os.path.join(d, "plan.json")
        with open(path, "w") as f:
            json.dump(p, f)
        env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        r = subprocess.run(
            [sys.executable, "-m", "fcp_torch.worker", "--plan", path, "--out", d],
            env=env, cwd=pkg, capture_output=True, text=True, timeout=120,
        )
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertEqual(json.loads(lines[0][len("FCP_ERROR "):])["code"], "plan.structure.rank")


if __name__ == "__main__":
    unittest.main()

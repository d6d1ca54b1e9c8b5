"""The `fcp serve` client against the real planner (skipped without a Node source tree)."""
import os
import tempfile
import unittest

from fcp_torch.plan import PlanError, rank_program
from fcp_torch.serve_client import PlannerClient, default_command


def _command():
    try:
        return default_command()
    except PlanError:
        return None


@unittest.skipIf(_command() is None, "no fcp binary and no node_modules/.bin/tsx")
class ServeClientTest(unittest.TestCase):
    def test_plans_in_the_background_and_reports_errors(self):
        d = tempfile.mkdtemp()
        with PlannerClient() as planner:
            model = {"qHeads": 4, "kvHeads": 2, "headDim": 8}
            f1 = planner.submit(strategy="fcp", batch=[100, 30, 7], world=2, model=model, options={"blockSize": 32})
            f2 = planner.submit(strategy="ring", batch=[50], world=2, model=model, output=os.path.join(d, "p.json.gz"))
            f3 = planner.submit(strategy="nope", world=2)
            p1, p2 = f1.result(timeout=60), f2.result(timeout=60)
            self.assertEqual((p1.strategy, p1.world, list(p1.sequences)), ("fcp", 2, [100, 30, 7]))
            self.assertEqual(p2.strategy, "ring")
            self.assertTrue(os.path.exists(os.path.join(d, "p.json.gz")))
            rank_program(p1, 1)
            with self.assertRaises(PlanError) as e:
                f3.result(timeout=60)
            self.assertEqual(e.exception.code, "strategy.unknown")
            # the same batch signature again: the cached plan, no second request
            again = planner.submit(strategy="fcp", batch=[100, 30, 7], world=2, model=model, options={"blockSize": 32})
            self.assertIs(again.result(timeout=60), p1)
            self.assertEqual(planner.cache_hits, 1)
            other = planner.submit(strategy="fcp", batch=[100, 30, 8], world=2, model=model, options={"blockSize": 32})
            self.assertEqual(list(other.result(timeout=60).sequences), [100, 30, 8])
            self.assertEqual(planner.cache_hits, 1)


if __name__ == "__main__":
    unittest.main()

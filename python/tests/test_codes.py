"""Every error code the package raises belongs to a family declared in src/core/codes.ts."""
import re
import unittest
from pathlib import Path

from fcp_torch.codes import FAMILIES, is_code

ROOT = Path(__file__).resolve().parents[1] / "fcp_torch"
# Literal codes at the places the package raises coded errors.
CODE = re.compile(r"""(?:PlanError|_fail|FcpRunError|RunError|_error|fail)\(\s*f?["']([a-z]+\.[A-Za-z0-9_.{}]+)["']""")


class CodesTest(unittest.TestCase):
    def test_families_loaded(self):
        self.assertIn("plan", FAMILIES)
        self.assertIn("run", FAMILIES)
        self.assertFalse(is_code("nofamily.x"))
        self.assertFalse(is_code("plan"))
        self.assertTrue(is_code("plan.rule3.kvMissing"))

    def test_every_raised_code_has_a_declared_family(self):
        found = set()
        for f in ROOT.glob("*.py"):
            found.update(CODE.findall(f.read_text()))
        self.assertGreater(len(found), 20, "the scan finds the package's codes")
        bad = sorted(c for c in found if not is_code(c.split("{")[0] + ("x" if c.endswith(".") else "")))
        self.assertEqual(bad, [], "codes of undeclared families")


if __name__ == "__main__":
    unittest.main()

"""spawn_ranks (fcp_torch.launch): rank environment, a failing rank ends the others, timeouts."""
import sys
import time
import unittest

from fcp_torch.launch import LaunchError, spawn_ranks

PY = sys.executable


class SpawnRanks(unittest.TestCase):
    def test_every_rank_gets_its_environment(self):
        code = (
            "import os, sys; e = os.environ; "
            "ok = e['RANK'] == e['LOCAL_RANK'] and e['WORLD_SIZE'] == '3' and e['MASTER_ADDR'] == '127.0.0.1' "
            "and int(e['MASTER_PORT']) > 0 and e['NCCL_NVLS_ENABLE'] == '0' and e['FCP_X'] == 'y'; "
            "sys.exit(0 if ok else 3)"
        )
        res = spawn_ranks([PY, "-c", code], 3, {"FCP_X": "y"}, timeout=60)
        self.assertEqual(res.codes, [0, 0, 0])
        self.assertIsNone(res.failed)

    def test_per_rank_commands(self):
        res = spawn_ranks(lambda r: [PY, "-c", f"import sys; sys.exit({r})"], 3, timeout=60)
        self.assertIn(res.failed, (1, 2))  # ranks 1 and 2 exit with their rank number
        # (rank 0 exits with 0 unless the failure was seen first and ended it)
        self.assertTrue(res.codes[1] != 0 and res.codes[2] != 0)

    def test_a_failing_rank_ends_the_others_at_once(self):
        t = time.time()
        res = spawn_ranks(lambda r: [PY, "-c", "import sys; sys.exit(5)" if r == 0 else "import time; time.sleep(60)"], 3, timeout=60)
        self.assertLess(time.time() - t, 30)
        self.assertEqual(res.failed, 0)
        self.assertEqual(res.codes[0], 5)
        self.assertTrue(all(c != 0 for c in res.codes[1:]))  # killed, not left running

    def test_timeout_ends_every_rank(self):
        t = time.time()
        with self.assertRaises(LaunchError) as cm:
            spawn_ranks([PY, "-c", "import time; time.sleep(60)"], 2, timeout=1.0)
        self.assertEqual(cm.exception.code, "run.timeout")
        self.assertLess(time.time() - t, 30)


if __name__ == "__main__":
    unittest.main()

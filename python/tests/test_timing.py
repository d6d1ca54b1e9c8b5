"""fcp_torch.timing.time_ms on the CPU: warm-up calls are not timed, one time per rep."""
import time
import unittest

from fcp_torch.timing import time_ms


class TimeMs(unittest.TestCase):
    def test_reps_and_warmup(self):
        calls = []
        ts = time_ms(lambda: calls.append(1) or time.sleep(0.01), "cpu", reps=3, warmup=2)
        self.assertEqual(len(calls), 5)
        self.assertEqual(len(ts), 3)
        self.assertTrue(all(9.0 <= t < 1000.0 for t in ts), ts)  # each call sleeps 10 ms


if __name__ == "__main__":
    unittest.main()

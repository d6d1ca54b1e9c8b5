"""One timer for GPU and CPU work: CUDA events around each call on a CUDA device (the device's own
clock, no host synchronisation inside the timed region), the host clock elsewhere. Shared by the
rank replay (replay.graph_forward) and the GPU script (scripts/gpu/h200.py, bench)."""
from __future__ import annotations

import time
from typing import Callable, List

import torch


def time_ms(fn: Callable[[], object], device, reps: int = 3, warmup: int = 0) -> List[float]:
    """Milliseconds of each of `reps` calls of fn(), after `warmup` untimed calls."""
    cuda = torch.device(device).type == "cuda"
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize(device)
    ts: List[float] = []
    for _ in range(reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e3)
    return ts

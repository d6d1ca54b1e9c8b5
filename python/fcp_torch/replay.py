"""Rank replay: one rank's compute ops of a plan, all data local, timed (kernels as the runtime calls them).

Used by scripts/gpu/h200.py: pick the heaviest and a median rank by attended pairs, execute their
forward and backward compute ops with every K/V range resident (no transfers), and report time and
MFU = useful FLOPs / (peak x time), FLOPs counted on attended pairs only (docs/design.md).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List

import numpy as np
import torch

from . import fused as _fused
from .liveness import live_set_bytes
from .plan import Plan, attended_pairs, expand_chunks, rank_program
from .runtime import RankRuntime
from .timing import time_ms

PEAK_TFLOPS = 989.0


def rank_pairs(plan: Plan, batch_rows: int = 512) -> np.ndarray:
    """Attended (query, key) pairs of every rank's tasks (chunk tasks summed over their sets)."""
    t = plan.tasks
    pairs = attended_pairs(plan.causal, t["qStart"], t["qLength"], t["kvStart"], t["kvLength"]).astype(np.float64)
    out = np.bincount(t["rank"], weights=pairs, minlength=plan.world).astype(np.float64)
    ct = plan.chunk_tasks
    if ct is not None and len(ct["rank"]):
        offs, seqs = plan.seq_sets["offsets"], plan.seq_sets["seqs"]
        for s in np.unique(ct["set"]):
            rows = np.nonzero(ct["set"] == s)[0]
            L = plan.sequences[seqs[offs[s] : offs[s + 1]]][None, :]
            for a in range(0, len(rows), batch_rows):
                r = rows[a : a + batch_rows]
                P = ct["parts"][r][:, None]
                c = -(-L // P)
                qs = ct["qPart"][r][:, None] * c
                ks = ct["kvPart"][r][:, None] * c
                ql = np.clip(np.minimum(qs + c, L) - qs, 0, None)
                kl = np.clip(np.minimum(ks + c, L) - ks, 0, None)
                pr = attended_pairs(plan.causal, qs.ravel(), ql.ravel(), ks.ravel(), kl.ravel()).reshape(ql.shape)
                np.add.at(out, ct["rank"][r], pr.sum(1).astype(np.float64))
    return out


def pick_ranks(pairs: np.ndarray) -> Dict[str, int]:
    """The heaviest rank and a median rank (by attended pairs)."""
    order = np.argsort(pairs, kind="stable")
    return {"heaviest": int(order[-1]), "median": int(order[len(order) // 2])}


def _fill(rt: RankRuntime, seed: int, nk: int) -> Dict[str, torch.Tensor]:
    g = torch.Generator(device=rt.device)
    g.manual_seed(seed)
    dev, dt = rt.device, rt.dtype
    nq = rt.qspace.size
    b = {
        "Q": torch.randn(nq, rt.H, rt.D, device=dev, dtype=dt, generator=g),
        "K": torch.randn(nk, rt.Hk, rt.D, device=dev, dtype=dt, generator=g),
        "V": torch.randn(nk, rt.Hk, rt.D, device=dev, dtype=dt, generator=g),
    }
    return b


@dataclass
class Setup:
    """One replay mode of one rank, ready to run: the runtime, its resident buffers and what setting
    it up measured (peak memory over one warm-up iteration, the first iteration's times)."""

    rt: RankRuntime
    prog: object
    base: Dict[str, torch.Tensor]
    nq: int
    nk: int
    dtype: torch.dtype
    info: dict


def setup(
    plan: Plan,
    rank: int,
    kernel: str = "auto",
    device="cuda",
    dtype=torch.bfloat16,
    seed: int = 0,
    kv_cap: int = 1 << 21,
    merge: str = "fused",
    pool: bool = False,
    pool_max_space: int = 1 << 22,
    launch_rows: "int | str | None" = None,
    merge_window: "int | None" = None,
    window_rows: "int | str | None" = None,
    fuse_tasks: "bool | None" = None,
    solo_pairs: "int | None" = None,
    window_bh: "int | None" = None,
    launch_order: "str | None" = None,
    side_stream: "bool | None" = None,
) -> Setup:
    """Builds a rank's runtime for one mode and runs one warm-up iteration (see replay_rank)."""
    t0 = time.perf_counter()
    prog = rank_program(plan, rank)
    # deferred sums (deferred.py) and task fusion (fusion.py) are read when launches are planned
    # None: the runtime's defaults; window_rows "q" / "2q": that many query spaces' rows
    extra = {"merge_window": merge_window, "window_rows": window_rows, "fuse_tasks": fuse_tasks, "solo_pairs": solo_pairs,
             "launch_order": launch_order, "side_stream": side_stream}
    rt = RankRuntime(prog, None, device, dtype, kernel, local=True, kv_pool=False, **extra)
    if pool and max(rt.kvspace[ph].size for ph in rt.kvspace) <= pool_max_space:
        # the runtime's own K/V pool (kvpool.py): launches read pool rows, rows handed on are zeroed
        rt = RankRuntime(prog, None, device, dtype, kernel, local=True, kv_pool=True, **extra)
    pool_s = time.perf_counter() - t0
    if isinstance(launch_rows, str):  # "q" = "q/2"; "q/N": the query space over N (at least 4096 rows)
        div = int(launch_rows.split("/")[1]) if "/" in launch_rows else 2
        launch_rows = max(rt.qspace.size // div, 4096)
    rt.launch_rows = launch_rows
    if merge == "legacy":
        rt.fused = None
    if window_bh is not None:
        rt.window_bh = window_bh  # heads per program of the deferred-sum kernels (deferred.py)
    prep_s = rt.prepare()
    nq = rt.qspace.size
    nk = max(rt.kv_rows.values())
    if rt.pool is None and nk > kv_cap:
        for launches in rt._launch_cache.values():
            for L in launches:
                L.kidx = L.kidx % kv_cap
                if L.k_range is not None and L.k_range[1] > kv_cap:
                    L.k_range = None
                if L.kf is not None and np.any(L.kf + L.lk > kv_cap):
                    L.qf = L.kf = None  # slice-wise accumulation would cross the folded buffer's end
        nk = kv_cap
    mem0 = 0
    if rt.cuda:
        torch.cuda.synchronize(rt.device)
        torch.cuda.empty_cache()
        mem0 = torch.cuda.memory_allocated(rt.device)
        torch.cuda.reset_peak_memory_stats(rt.device)
    s = Setup(rt, prog, _fill(rt, seed, nk), nq, nk, dtype, {})
    f, b, _, _ = iteration(s)
    peak = None
    if rt.cuda:
        torch.cuda.synchronize(rt.device)
        peak = torch.cuda.max_memory_allocated(rt.device) - mem0
    s.info = {
        "pool_rows": dict(rt.kv_rows) if rt.pool is not None else None,
        "launch_rows": launch_rows,
        "first_iteration": {"forward_ms": f, "backward_ms": b},
        "peak_bytes": peak,
        "live_set_bytes": live_set_bytes(prog, nq, {"forward": nk, "backward": nk}),
        "setup_s": time.perf_counter() - t0,
        "pool_s": pool_s,
        "prepare_s": prep_s,
        "merge": merge if rt.fused is not None or merge == "legacy" else "legacy",
        "merge_window": rt.merge_window,
        "window_rows": rt.window_rows,
        "fuse_tasks": rt.fuse_tasks,
        "solo_pairs": rt.solo_pairs,
        "window_bh": getattr(rt, "window_bh", None),
        "side_stream": rt.side_stream,
        "deferred_backend": _deferred_backend(rt),
        "fused_errors": dict(rt.fused.errors) if rt.fused is not None else None,
    }
    return s


def _deferred_backend(rt) -> "str | None":
    if rt.merge_window <= 1 or rt.fused is None:
        return None
    from .deferred import backend

    return backend(rt.fused)


def iteration(s: Setup):
    """One forward and backward of the rank's compute ops: (forward wall ms, backward wall ms,
    forward op ms, backward op ms), op times from CUDA events around each op."""
    rt, base, nq, nk = s.rt, s.base, s.nq, s.nk
    dev = rt.device
    bf = _forward_bufs(rt, base, nq)
    f = rt._run_phase("forward", bf)
    ofinal, lse = _finish_forward(rt, bf, s.dtype)
    del bf  # the float32 O is not needed by the backward
    bb = {
        "Q": base["Q"], "K": base["K"], "V": base["V"], "Ofinal": ofinal, "LSE": lse,
        "dO": torch.randn_like(base["Q"]),
        "dQ": torch.zeros(nq, rt.H, rt.D, device=dev, dtype=torch.float32),
        "dK": torch.zeros(nk, rt.Hk, rt.D, device=dev, dtype=torch.float32),
        "dV": torch.zeros(nk, rt.Hk, rt.D, device=dev, dtype=torch.float32),
    }
    b = rt._run_phase("backward", bb)
    return f.wall_ms, b.wall_ms, f.compute_ms, b.compute_ms


def _spread(xs: List[float]) -> dict:
    if not xs:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"median": float(np.median(xs)), "min": float(min(xs)), "max": float(max(xs)), "n": len(xs)}


def replay_modes(plan: Plan, rank: int, modes: Dict[str, dict], reps: int = 5, profile: bool = True, **common) -> Dict[str, dict]:
    """Times several modes of one rank interleaved: every mode is set up (and warmed up) first, then
    each of `reps` rounds runs every mode once (end to end, then kernel-only when `profile`), the
    order rotated by one each round so that no mode is always first after another's iteration.
    Per mode: median, min and max over the rounds of forward/backward end-to-end and kernel-only
    time, and kernel share = median kernel-only / median end-to-end (runs 4-8 ran each mode once,
    in a fixed order, and its first mode measured up to 20 % faster)."""
    names = list(modes)
    setups = {n: setup(plan, rank, **{**common, **modes[n]}) for n in names}
    runs: Dict[str, dict] = {n: {"fw": [], "bw": [], "fo": [], "bo": [], "kf": [], "kb": []} for n in names}
    for r in range(reps):
        for n in names[r % len(names):] + names[: r % len(names)]:
            s, acc = setups[n], runs[n]
            f, b, fo, bo = iteration(s)
            acc["fw"].append(f)
            acc["bw"].append(b)
            acc["fo"].append(fo)
            acc["bo"].append(bo)
            if profile and s.rt.cuda:
                k = _profile_kernels(s.rt, s.base, s.nq, s.nk, s.dtype)
                acc["kf"].append(sum(v for k_, v in k.items() if k_.startswith("forward")))
                acc["kb"].append(sum(v for k_, v in k.items() if k_.startswith("backward")))
    out: Dict[str, dict] = {}
    for n in names:
        out[n] = _result(setups[n], rank, runs[n])
    return out


def _result(s: Setup, rank: int, acc: dict) -> dict:
    rt, prog = s.rt, s.prog
    pairs_f = prog.attended_pairs("forward")
    pairs_b = prog.attended_pairs("backward")
    flops_f = 4.0 * pairs_f * prog.q_heads * prog.head_dim
    flops_b = 2.5 * 4.0 * pairs_b * prog.q_heads * prog.head_dim
    fw, bw = _spread(acc["fw"]), _spread(acc["bw"])
    kf, kb = _spread(acc["kf"]), _spread(acc["kb"])
    st = rt.stats
    lay = getattr(rt, "_fwd_layout", None)
    return {
        "rank": rank,
        "kernel": rt.kernel,
        "mode": rt.mode,
        "pairs": pairs_f,
        "ops": {"forward": len(prog.forward.ops), "backward": len(prog.backward.ops)},
        "launches": {"forward": st["forward"].launch_kinds, "backward": st["backward"].launch_kinds},
        "query_tokens": s.nq,
        "kv_tokens": rt.kvspace["forward"].size,
        "kv_folded_to": s.nk,
        "forward_ms": fw["median"],
        "backward_ms": bw["median"],
        "forward_spread": fw,
        "backward_spread": bw,
        "forward_op_ms": _spread(acc["fo"])["median"],
        "backward_op_ms": _spread(acc["bo"])["median"],
        "kernel_forward": kf,
        "kernel_backward": kb,
        "kernel_share": {
            "forward": kf["median"] / fw["median"] if kf["n"] else None,
            "backward": kb["median"] / bw["median"] if kb["n"] else None,
            # per round (kernel-only run next to its end-to-end run), min and max
            "forward_rounds": [a / b for a, b in zip(acc["kf"], acc["fw"])],
            "backward_rounds": [a / b for a, b in zip(acc["kb"], acc["bw"])],
        },
        "forward_mfu": flops_f / (PEAK_TFLOPS * 1e12 * fw["median"] / 1e3),
        "backward_mfu": flops_b / (PEAK_TFLOPS * 1e12 * bw["median"] / 1e3),
        "fused_backend": rt.fused.backend if rt.fused is not None else None,
        "fwd_acc_rows": int(lay.acc_slots.numel()) if lay is not None else None,
        "fwd_direct_rows": lay.direct_rows if lay is not None else None,
        **s.info,
    }


def replay_rank(
    plan: Plan,
    rank: int,
    kernel: str = "auto",
    device="cuda",
    dtype=torch.bfloat16,
    iters: int = 2,
    warmup: int = 1,
    seed: int = 0,
    kv_cap: int = 1 << 21,
    profile: bool = False,
    merge: str = "fused",
    pool: bool = False,
    pool_max_space: int = 1 << 22,
    launch_rows: "int | str | None" = None,
    graph: bool = False,
) -> dict:
    """Times one rank's forward and backward compute ops (median over `iters` after `warmup`; one
    mode alone: `replay_modes` interleaves several).

    Every K/V token the rank's tasks read is resident. A ring rank reads the whole batch (8M tokens
    at 256 ranks: 34 GB of K/V plus 69 GB of float32 dK/dV), so K/V slots are folded modulo `kv_cap`
    tokens: the kernels and gathers do the same work on the same shapes; the values are random anyway.

    `merge`: "fused" (fused.py: Triton merges and gathers where the probe passes) or "legacy" (the
    original torch merges). `pool`: the runtime's K/V pool (RankRuntime(kv_pool=True): rows reused
    by liveness in the issue order of a real run, transfers included), buffers sized by the computed
    peak; spaces larger than `pool_max_space` tokens are folded instead (the host-side allocation of
    a 256-rank ring rank takes a minute). Peak memory is `torch.cuda.max_memory_allocated` over the
    first (warm-up) iteration, beside the computed live set (`liveness.live_set_bytes`).

    `launch_rows`: the most gathered rows of one launch (RankRuntime.launch_rows); "q" = half the
    rank's query space (at least 4096), "q/N" its N-th part, which bounds a launch's temporaries to
    a fraction of the live set.

    `graph`: also capture the forward phase as one CUDA graph and time its replays against eager
    calls on the same buffers (`graph_forward`; issue 17's optional capture when shapes repeat).
    """
    s = setup(plan, rank, kernel, device, dtype, seed, kv_cap, merge, pool, pool_max_space, launch_rows)
    acc: Dict[str, list] = {"fw": [], "bw": [], "fo": [], "bo": [], "kf": [], "kb": []}
    for it in range(max(warmup - 1, 0) + iters):  # setup() ran the first warm-up iteration
        f, b, fo, bo = iteration(s)
        if it >= warmup - 1:
            for k_, v in zip(("fw", "bw", "fo", "bo"), (f, b, fo, bo)):
                acc[k_].append(v)
    kernel_ms = _profile_kernels(s.rt, s.base, s.nq, s.nk, dtype) if profile and s.rt.cuda else None
    if kernel_ms:
        acc["kf"].append(sum(v for k_, v in kernel_ms.items() if k_.startswith("forward")))
        acc["kb"].append(sum(v for k_, v in kernel_ms.items() if k_.startswith("backward")))
    res = _result(s, rank, acc)
    res["kernel_only_ms"] = kernel_ms
    res["graph"] = graph_forward(s.rt, s.base, s.nq) if graph and s.rt.cuda else None
    return res


def _forward_bufs(rt: RankRuntime, base, nq: int) -> Dict[str, torch.Tensor]:
    """Forward buffers as the runtime's forward makes them: the fused path's split output layout
    (compute-dtype O, float32 only where partials meet), or the original full float32 O."""
    b = {"Q": base["Q"], "K": base["K"], "V": base["V"]}
    if rt.fused is not None:
        return _fused.forward_buffers(rt, b)
    b["O"] = torch.zeros(nq, rt.H, rt.D, device=rt.device, dtype=torch.float32)
    b["LSE"] = torch.full((nq, rt.H), float("-inf"), device=rt.device, dtype=torch.float32)
    return b


def _finish_forward(rt: RankRuntime, b, dtype):
    """(final O in the compute dtype, LSE) for the backward."""
    if rt.fused is not None:
        ofinal, lse, _ = _fused.finish_forward(rt, b, user=False)
        return ofinal, lse
    return b["O"].to(dtype), b["LSE"]


def _profile_kernels(rt: RankRuntime, base, nq: int, nk: int, dtype) -> dict:
    """One more forward and backward with CUDA events around each kernel call only: kernel time per
    kernel kind, against which the replay's op time shows what gathers, merges and adds cost."""
    acc: Dict[str, list] = {}
    kf, kb = rt.kernels.forward, rt.kernels.backward

    def wrap(fn, phase):
        def inner(L, *a):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            out = fn(L, *a)
            e1.record()
            acc.setdefault(f"{phase}:{L.kernel}", []).append((e0, e1))
            return out

        return inner

    rt.kernels.forward, rt.kernels.backward = wrap(kf, "forward"), wrap(kb, "backward")
    try:
        dev = rt.device
        bf = _forward_bufs(rt, base, nq)
        rt._run_phase("forward", bf)
        ofinal, lse = _finish_forward(rt, bf, dtype)
        bb = {"Q": base["Q"], "K": base["K"], "V": base["V"], "Ofinal": ofinal, "LSE": lse,
              "dO": torch.randn_like(base["Q"]),
              "dQ": torch.zeros(nq, rt.H, rt.D, device=dev, dtype=torch.float32),
              "dK": torch.zeros(nk, rt.Hk, rt.D, device=dev, dtype=torch.float32),
              "dV": torch.zeros(nk, rt.Hk, rt.D, device=dev, dtype=torch.float32)}
        rt._run_phase("backward", bb)
        torch.cuda.synchronize(dev)
    finally:
        rt.kernels.forward, rt.kernels.backward = kf, kb
    return {k: sum(a.elapsed_time(b) for a, b in v) for k, v in acc.items()}


def graph_forward(rt: RankRuntime, base, nq: int, reps: int = 5) -> dict:
    """The forward phase captured once as a CUDA graph and replayed, against eager runs of the same
    phase on the same buffers (median ms of `reps`, CUDA events). With the same plan every step the
    shapes repeat, so one capture per plan could replace the Python-side launches; the values of
    repeated replays are not checked here (the merges accumulate into the same buffers), only time.
    Returns the two times, or the error when the phase cannot be captured."""
    dev = rt.device
    bf = _forward_bufs(rt, base, nq)

    def timed(fn) -> float:
        return float(np.median(time_ms(fn, dev, reps=reps)))

    time_ops = rt.time_ops
    rt.time_ops = False  # timing events per op are not capturable, and eager runs match the graph
    real_sync = torch.cuda.synchronize
    try:
        rt._run_phase("forward", bf)
        real_sync(dev)
        eager = timed(lambda: rt._run_phase("forward", bf))
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream(dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        torch.cuda.synchronize = lambda *a, **k: None  # the phase's host-clock syncs cannot be captured
        try:
            with torch.cuda.graph(g, stream=s):
                rt._run_phase("forward", bf)
        finally:
            torch.cuda.synchronize = real_sync
        real_sync(dev)
        g.replay()
        real_sync(dev)
        replay = timed(g.replay)
        del g
        return {"eager_forward_ms": eager, "graph_forward_ms": replay, "speedup": eager / replay}
    except Exception as e:  # noqa: BLE001 - a phase that cannot be captured is a result too
        torch.cuda.synchronize = real_sync
        return {"error": f"{type(e).__name__}: {str(e)[:500]}"}
    finally:
        rt.time_ops = time_ops

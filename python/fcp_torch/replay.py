"""Rank replay: one rank's compute ops of a plan, all data local, timed (kernels as the runtime calls them).

Used by scripts/gpu/h200.py: pick the heaviest and a median rank by attended pairs, execute their
forward and backward compute ops with every K/V range resident (no transfers), and report time and
MFU = useful FLOPs / (peak x time), FLOPs counted on attended pairs only (docs/design.md).
"""
from __future__ import annotations

import time
from typing import Dict, List

import numpy as np
import torch

from . import fused as _fused
from .liveness import allocate, check_allocation, lifetimes, live_set_bytes
from .plan import Plan, attended_pairs, expand_chunks, rank_program
from .runtime import RankRuntime

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
    """Times one rank's forward and backward compute ops (median over `iters` after `warmup`).

    Every K/V token the rank's tasks read is resident. A ring rank reads the whole batch (8M tokens
    at 256 ranks: 34 GB of K/V plus 69 GB of float32 dK/dV), so K/V slots are folded modulo `kv_cap`
    tokens: the kernels and gathers do the same work on the same shapes; the values are random anyway.

    `merge`: "fused" (fused.py: Triton merges and gathers where the probe passes) or "legacy" (the
    original torch merges). `pool`: K/V rows reused by liveness (liveness.py; lifetimes in the issue
    order of a real run, transfers included), buffers sized by the computed peak; spaces larger than
    `pool_max_space` tokens are folded instead (the host-side allocation of a 256-rank ring rank takes
    a minute). Peak memory is `torch.cuda.max_memory_allocated` over the timed iterations, beside the
    computed live set (`liveness.live_set_bytes`).

    `launch_rows`: the most gathered rows of one launch (RankRuntime.launch_rows); "q" = half the
    rank's query space (at least 4096), "q/N" its N-th part, which bounds a launch's temporaries to
    a fraction of the live set.

    `graph`: also capture the forward phase as one CUDA graph and time its replays against eager
    calls on the same buffers (`graph_forward`; issue 17's optional capture when shapes repeat).
    """
    t0 = time.perf_counter()
    prog = rank_program(plan, rank)
    rt = RankRuntime(prog, None, device, dtype, kernel, local=True)
    if isinstance(launch_rows, str):  # "q" = "q/2"; "q/N": the query space over N (at least 4096 rows)
        div = int(launch_rows.split("/")[1]) if "/" in launch_rows else 2
        launch_rows = max(rt.qspace.size // div, 4096)
    rt.launch_rows = launch_rows
    if merge == "legacy":
        rt.fused = None
    prep_s = rt.prepare()
    expand_s = time.perf_counter() - t0 - prep_s
    nq, nk = rt.qspace.size, rt.kvspace["forward"].size
    pool_rows = None
    pool_s = 0.0
    if pool and max(rt.kvspace[ph].size for ph in rt.kvspace) <= pool_max_space:
        tp = time.perf_counter()
        pool_rows = {ph: apply_pool(rt, ph) for ph in ("forward", "backward")}
        nk = max(pool_rows.values())
        pool_s = time.perf_counter() - tp
    elif nk > kv_cap:
        for launches in rt._launch_cache.values():
            for L in launches:
                L.kidx = L.kidx % kv_cap
                if L.k_range is not None and L.k_range[1] > kv_cap:
                    L.k_range = None
                if L.kf is not None and np.any(L.kf + L.lk > kv_cap):
                    L.qf = L.kf = None  # slice-wise accumulation would cross the folded buffer's end
        nk = kv_cap
    if rt.cuda:
        torch.cuda.synchronize(rt.device)
        torch.cuda.empty_cache()
        mem0 = torch.cuda.memory_allocated(rt.device)
        torch.cuda.reset_peak_memory_stats(rt.device)
    base = _fill(rt, seed, nk)
    dev = rt.device
    fw: List[float] = []
    bw: List[float] = []
    fk: List[float] = []
    bk: List[float] = []
    first = {}
    for it in range(warmup + iters):
        bf = _forward_bufs(rt, base, nq)
        f = rt._run_phase("forward", bf)
        ofinal, lse = _finish_forward(rt, bf, dtype)
        del bf  # the float32 O is not needed by the backward
        bb = {
            "Q": base["Q"],
            "K": base["K"],
            "V": base["V"],
            "Ofinal": ofinal,
            "LSE": lse,
            "dO": torch.randn_like(base["Q"]),
            "dQ": torch.zeros(nq, rt.H, rt.D, device=dev, dtype=torch.float32),
            "dK": torch.zeros(nk, rt.Hk, rt.D, device=dev, dtype=torch.float32),
            "dV": torch.zeros(nk, rt.Hk, rt.D, device=dev, dtype=torch.float32),
        }
        b = rt._run_phase("backward", bb)
        if it == 0:
            first = {"forward_ms": f.wall_ms, "backward_ms": b.wall_ms}
        if it >= warmup:
            fw.append(f.wall_ms)
            bw.append(b.wall_ms)
            fk.append(f.compute_ms)
            bk.append(b.compute_ms)
        del bb, ofinal, lse
    peak_bytes = None
    if rt.cuda:
        torch.cuda.synchronize(rt.device)
        peak_bytes = torch.cuda.max_memory_allocated(rt.device) - mem0
    kernel_ms = None
    if profile and rt.cuda:
        kernel_ms = _profile_kernels(rt, base, nq, nk, dtype)
    graph_res = graph_forward(rt, base, nq) if graph and rt.cuda else None
    pairs_f = prog.attended_pairs("forward")
    pairs_b = prog.attended_pairs("backward")
    flops_f = 4.0 * pairs_f * prog.q_heads * prog.head_dim
    flops_b = 2.5 * 4.0 * pairs_b * prog.q_heads * prog.head_dim
    med = lambda xs: float(np.median(xs)) if xs else float("nan")  # noqa: E731
    st = rt.stats
    return {
        "rank": rank,
        "kernel": kernel,
        "mode": rt.mode,
        "pairs": pairs_f,
        "ops": {"forward": len(prog.forward.ops), "backward": len(prog.backward.ops)},
        "launches": {"forward": st["forward"].launch_kinds, "backward": st["backward"].launch_kinds},
        "query_tokens": nq,
        "kv_tokens": rt.kvspace["forward"].size,
        "kv_folded_to": nk,
        "forward_ms": med(fw),
        "backward_ms": med(bw),
        "forward_op_ms": med(fk),
        "backward_op_ms": med(bk),
        "first_iteration": first,
        "forward_mfu": flops_f / (PEAK_TFLOPS * 1e12 * med(fw) / 1e3),
        "backward_mfu": flops_b / (PEAK_TFLOPS * 1e12 * med(bw) / 1e3),
        "kernel_only_ms": kernel_ms,
        "merge": merge if rt.fused is not None or merge == "legacy" else "legacy",
        "fused_backend": rt.fused.backend if rt.fused is not None else None,
        "pool_rows": pool_rows,
        "launch_rows": launch_rows,
        "graph": graph_res,
        # fused path: query rows with a float32 accumulator (partials meet) / rows written directly
        "fwd_acc_rows": int(rt._fwd_layout.acc_slots.numel()) if getattr(rt, "_fwd_layout", None) is not None else None,
        "fwd_direct_rows": rt._fwd_layout.direct_rows if getattr(rt, "_fwd_layout", None) is not None else None,
        "pool_s": pool_s,
        "peak_bytes": peak_bytes,
        "live_set_bytes": live_set_bytes(prog, nq, {"forward": nk, "backward": nk}),
        "expand_s": expand_s,
        "prepare_s": prep_s,
    }


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


def apply_pool(rt: RankRuntime, phase: str) -> int:
    """Remaps the K/V rows of a phase's cached launches to pool rows (liveness.allocate); returns the pool size."""
    lt = lifetimes(rt.prog, phase, rt.kvspace[phase], rt.base_space)
    pool_of, size = allocate(lt)
    bad = check_allocation(lt, pool_of)
    assert not bad, bad
    for i in range(len(getattr(rt.prog, phase).ops)):
        for L in rt._launches(phase, i):
            k = pool_of[L.kidx.cpu().numpy()]
            assert np.all(k >= 0), "a launch reads a K/V slot outside every lifetime"
            L.kidx = torch.from_numpy(k).to(rt.device)
            contig = len(k) > 0 and bool(np.all(np.diff(k) == 1))
            L.k_range = (int(k[0]), int(k[-1]) + 1) if contig else None
            if L.kf is not None:
                starts = np.concatenate(([0], np.cumsum(L.lk)[:-1])).astype(np.int64)
                seg_ok = all(np.all(np.diff(k[a : a + n]) == 1) for a, n in zip(starts.tolist(), L.lk.tolist()))
                if seg_ok:
                    L.kf = k[starts]
                else:
                    L.qf = L.kf = None  # slice-wise adds need contiguous rows per segment
    return size


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
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        return float(np.median(ts))

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

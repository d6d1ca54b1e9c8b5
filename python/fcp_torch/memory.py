"""Peak memory of one rank running a plan with this runtime, estimated before anything is allocated.

The twin of src/plan/memory.ts (same model, same integer bytes; test/executors/torch-memory.test.ts
compares them on shared plans). The model follows what runtime.py allocates, per rank:

- token spaces: `nq` slots for the rank's user and home tokens (Q, O, LSE, dO, dQ), `nk` per phase
  for every token whose K/V it ever holds (own, received), merged into disjoint intervals as
  spaces.TokenSpace does;
- kept for backward, per layer (`kept`): Q and the final O in the compute dtype, LSE in float32, the
  rank's own K/V (the autograd context of each call);
- forward (fused.py): Q, K, V and O (compute dtype), LSE (float32), float32 O/LSE accumulator rows
  only where partials meet (plus O_in when outputs arrive),
  the messages of the groups posted so far (send, float32 staging of accumulated fields, receive
  buffers: the runtime keeps them until the phase ends) with each op's kernel workspace, in the
  runtime's order of posts and ops, then the outputs;
- backward: dO (and the incoming gradient), K/V again (the phase's space), float32 dQ/dK/dV
  accumulators (and their _in buffers), messages, workspace, outputs;
- workspace, `math` kernel (CPU): one launch per piece; the forward holds ~3 float32 score matrices
  [H, lq, lk] at once (scores, exp argument, probabilities), the backward ~5 (scores, probabilities,
  dP, dS and a temporary), plus masks; `gpu` kernels (flash, cuDNN): no score matrix, the outputs
  of the op's pieces and a float32 gradient copy bounded by fused.ADD_CHUNK_ELEMS;
- messages on the device, or (`messages="host"`, comm.StagedComm) only around each group's post.
  Checked on an H200 in run 8 (docs/gpu.md, "Memory estimate"): +0.6 to +1.7 % over
  torch.cuda.max_memory_allocated on three plans, once the runtime let go of its last phase's
  buffers and the measurement stopped holding every layer's input gradients (run 7: 23-65 %).

Peak of L layers sharing one FcpAttention: (L-1) * kept + max(forward, kept + backward).
`check_memory(plan, budget_bytes, ...)` raises PlanError `run.memory` when a rank's peak exceeds it.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .plan import KIND_DKV, KIND_IN, KIND_KV, KIND_OUT, Plan, PlanError, rank_program

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
F32 = 4
# fused.ADD_CHUNK_ELEMS (kept here so the estimate needs no torch import path beyond plan.py)
ADD_CHUNK_ELEMS = 1 << 24
MESSAGES = ("device", "host")


def _union_size(seq, start, length) -> int:
    """Tokens in the union of ranges (spaces.TokenSpace.size, without building the space)."""
    seq = np.asarray(seq, np.int64)
    start = np.asarray(start, np.int64)
    length = np.asarray(length, np.int64)
    keep = length > 0
    seq, start, end = seq[keep], start[keep], (start + length)[keep]
    if not len(seq):
        return 0
    o = np.lexsort((start, seq))
    seq, start, end = seq[o], start[o], end[o]
    total, cs, ca, cb = 0, int(seq[0]), int(start[0]), int(end[0])
    for s, a, b in zip(seq[1:].tolist(), start[1:].tolist(), end[1:].tolist()):
        if s == cs and a <= cb:
            cb = max(cb, b)
        else:
            total += cb - ca
            cs, ca, cb = s, a, b
    return total + cb - ca


def _pieces(causal: bool, qs, ql, ks, kl):
    """(lq, lk, causal) of the `br` kernel pieces of tasks (kernels.decompose, mode br)."""
    qs, ql, ks, kl = (np.asarray(x, np.int64) for x in (qs, ql, ks, kl))
    if not causal:
        m = (ql > 0) & (kl > 0)
        return ql[m], kl[m], np.zeros(int(m.sum()), bool)
    qe, ke = qs + ql, ks + kl
    k_end = np.minimum(ke, qe)
    q0 = np.maximum(qs, ks)
    live = (k_end > ks) & (q0 < qe) & (ql > 0) & (kl > 0)
    full = live & (k_end - 1 <= q0)
    part = live & ~full
    rect = part & (qe > k_end)
    lq = np.concatenate([(qe - q0)[full], (k_end - q0)[part], (qe - k_end)[rect]])
    lk = np.concatenate([(k_end - ks)[full], (k_end - ks)[part], (k_end - ks)[rect]])
    c = np.concatenate([np.zeros(int(full.sum()), bool), np.ones(int(part.sum()), bool), np.zeros(int(rect.sum()), bool)])
    return lq, lk, c


def _workspace(prog, phase: str, kernel: str, e: int) -> List[int]:
    """Largest kernel workspace of each op of the phase, in op order."""
    H, Hk, D = prog.q_heads, prog.kv_heads, prog.head_dim
    QH, KH = H * D, Hk * D
    out: List[int] = []
    for op in getattr(prog, phase).ops:
        lq, lk, c = _pieces(prog.causal, op.q_start, op.q_length, op.kv_start, op.kv_length)
        best = 0
        if not len(lq):
            out.append(0)
            continue
        if kernel == "math":
            score = H * lq * lk * F32
            mask = np.where(c, 2 * lq * lk, 0)
            cast = 0 if e == F32 else 1
            if phase == "forward":
                o = lq * QH * F32
                ws = np.maximum(3 * score + mask + o + cast * (lq * QH + 2 * lk * KH) * F32, 4 * o)
            else:
                grads = (lq * QH + 2 * lk * KH) * F32
                ws = 5 * score + mask + grads + cast * (3 * lq * QH + 2 * lk * KH) * F32
            best = int(ws.max())
        else:  # gpu kernels: the op's launch outputs
            nq, nk = int(lq.sum()), int(lk.sum())
            if phase == "forward":
                best = nq * (QH * e + H * F32)
            else:
                # dq/dk/dv in the compute dtype; fused.add_rows converts them to float32 in chunks
                # of at most ADD_CHUNK_ELEMS elements (none when the compute dtype is float32)
                chunk = 0 if e == F32 else max(min(nq, max(1, ADD_CHUNK_ELEMS // QH)) * QH, min(nk, max(1, ADD_CHUNK_ELEMS // KH)) * KH) * F32
                # the kernel's own workspace for its largest piece, lq x qHeads x headDim x (4 + e)
                # bytes (a float32 dQ accumulator and one compute-dtype row buffer): fitted to the
                # H200's world-1 peaks of run 11 (lq 4096 and 12,248), where zero-copy buffers
                # left it the largest term; 0.6 GB for a 12K-token sequence of 64 x 128 heads
                best = nq * QH * e + 2 * nk * KH * e + chunk + int(lq.max()) * QH * (F32 + e)
        out.append(best)
    return out


FIELDS = {
    "forward": {KIND_IN: ("H", "K", "K"), KIND_KV: ("K", "K"), KIND_OUT: ("H*",)},
    "backward": {KIND_IN: ("H",), KIND_KV: ("K", "K"), KIND_DKV: ("K*", "K*"), KIND_OUT: ("H*", "K*", "K*")},
}


def _messages(prog, phase: str, e: int) -> List[int]:
    """Bytes of the messages of each group of the phase on this rank: sends, float32 staging of
    accumulated fields (marked *), receive buffers from other ranks."""
    H, Hk, D = prog.q_heads, prog.kv_heads, prog.head_dim
    me = prog.rank
    out: List[int] = []
    for g in getattr(prog, phase).groups:
        total = 0
        for i in range(len(g.src)):
            fields = FIELDS[phase].get(int(g.kind[i]), ())
            rows = int(g.length[i])
            for f in fields:
                elems = rows * (H if f[0] == "H" else Hk) * D
                if g.src[i] == me:
                    total += elems * e + (elems * F32 if f.endswith("*") else 0)
                if g.dst[i] == me and g.src[i] != me:
                    total += elems * e
        out.append(total)
    return out


def _live_peak(prog, phase: str, msgs: List[int], ws: List[int], host: bool = False) -> int:
    """Largest (kept messages + kernel workspace) over the phase, following runtime._run_phase: the
    ops a group's sends wait for run before it is posted, then the ops waiting for it; the messages
    of every posted group are kept until the phase ends."""
    pp = getattr(prog, phase)
    ops = pp.ops
    me = prog.rank
    kept = best = ptr = 0
    for g, grp in enumerate(pp.groups):
        sa = grp.send_after[grp.src == me]
        send_after = int(sa.max()) if len(sa) else -1
        while ptr < len(ops) and ptr <= send_after:
            best = max(best, kept + ws[ptr])
            ptr += 1
        # host messages (StagedComm): a group's buffers are on the device only while it is packed
        # and unpacked; device messages stay until the phase ends
        best = max(best, kept + msgs[g])
        if not host:
            kept += msgs[g]
        while ptr < len(ops) and ops[ptr].after < g:
            best = max(best, kept + ws[ptr])
            ptr += 1
    for i in range(ptr, len(ops)):
        best = max(best, kept + ws[i])
    return best


def _acc_rows(prog, causal: bool) -> int:
    """Float32 accumulator rows of the fused forward (fused.prepare_merges): query slots that get two
    or more partial rows over the phase (tasks whose kernel pieces cover them), or whose O travels as
    an `out` partial (sent or received). Every other slot is written once, in the compute dtype."""
    me = prog.rank
    seqs, a_s, b_s, w_s = [], [], [], []
    for op in prog.forward.ops:
        qs, ql, ks, kl = (np.asarray(x, np.int64) for x in (op.q_start, op.q_length, op.kv_start, op.kv_length))
        qe = qs + ql
        if causal:
            q0 = np.maximum(qs, ks)
            live = (np.minimum(ks + kl, qe) > ks) & (q0 < qe) & (ql > 0) & (kl > 0)
        else:
            q0 = qs
            live = (ql > 0) & (kl > 0)
        seqs.append(np.asarray(op.seq, np.int64)[live]); a_s.append(q0[live]); b_s.append(qe[live])
        w_s.append(np.ones(int(live.sum()), np.int64))
    for g in prog.forward.groups:
        m = (g.kind == KIND_OUT) & ((g.src == me) | (g.dst == me))
        seqs.append(np.asarray(g.seq, np.int64)[m]); a_s.append(np.asarray(g.start, np.int64)[m])
        b_s.append((np.asarray(g.start, np.int64) + g.length)[m]); w_s.append(np.full(int(m.sum()), 2, np.int64))
    seq, a, b, w = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (seqs, a_s, b_s, w_s))
    if not len(seq):
        return 0
    # sweep per sequence: +w at a, -w at b; rows where the running count is >= 2
    es = np.concatenate([seq, seq])
    ep = np.concatenate([a, b])
    ew = np.concatenate([w, -w])
    o = np.lexsort((ew, ep, es))  # at one position the ends (negative) come first
    total, cnt, last_s, last_p = 0, 0, None, 0
    for s_, p_, w_ in zip(es[o].tolist(), ep[o].tolist(), ew[o].tolist()):
        if s_ != last_s:
            cnt, last_s = 0, s_
        elif cnt >= 2:
            total += p_ - last_p
        cnt += w_
        last_p = p_
    return total


def _kv_size(prog, phase: str, base) -> int:
    me = prog.rank
    seqs, starts, lens = [base[0]], [base[1]], [base[2]]
    for g in getattr(prog, phase).groups:
        m = (g.dst == me) & np.isin(g.kind, (KIND_KV, KIND_IN, KIND_DKV, KIND_OUT))
        m |= (g.src == me) & (g.kind == KIND_DKV)
        seqs.append(g.seq[m])
        starts.append(g.start[m])
        lens.append(g.length[m])
    return _union_size(np.concatenate(seqs), np.concatenate(starts), np.concatenate(lens))


def _receives(prog, phase: str, kinds) -> bool:
    return any(bool(np.any((g.dst == prog.rank) & np.isin(g.kind, kinds))) for g in getattr(prog, phase).groups)


def _zero_copy(prog, nq: int, nkf: int, nkb: int, nbase: int) -> Dict[str, bool]:
    """zerocopy.plan from the plan alone: which buffers are the caller's tensors (no copy). User and
    slot rows are both sorted by (sequence, start), so equal counts mean the identity."""
    U = prog.user_tokens
    q_id = U == nq
    state_kv = nbase == nkf
    return {
        "q": q_id and not _receives(prog, "forward", (KIND_IN,)),
        "kv": U == nkf and not _receives(prog, "forward", (KIND_IN, KIND_KV)),
        "state_kv": state_kv,
        "out": q_id and not _receives(prog, "forward", (KIND_OUT,)),
        "do": q_id and not _receives(prog, "backward", (KIND_IN,)),
        "bwd_kv": state_kv and nkb == nkf and nbase == nkb and not _receives(prog, "backward", (KIND_KV,)),
    }


def rank_memory(plan: Plan, rank: int, dtype: str = "float32", kernel: str = "math", layers: int = 1, messages: str = "device") -> Dict[str, int]:
    """The estimate of one rank (bytes; keys as in src/plan/memory.ts's RankMemory). `messages`:
    where message buffers live, `device` (LocalComm, NCCL, gloo on CPU tensors) or `host`
    (comm.StagedComm: CUDA tensors over gloo through host copies)."""
    if messages not in MESSAGES:
        raise PlanError("run.messages", f"messages must be device or host (got {messages})")
    if dtype not in DTYPE_BYTES:
        raise PlanError("run.dtype", f"dtype must be one of {', '.join(DTYPE_BYTES)} (got {dtype})")
    if kernel not in ("math", "gpu"):
        raise PlanError("run.kernel", f"memory kernel must be math or gpu (got {kernel})")
    if layers < 1:
        raise PlanError("run.layers", f"layers must be at least 1 (got {layers})")
    e = DTYPE_BYTES[dtype]
    prog = rank_program(plan, rank)
    H, Hk, D = prog.q_heads, prog.kv_heads, prog.head_dim
    QH, KH = H * D, Hk * D
    base = (
        np.concatenate([prog.user_seq, prog.home_seq]),
        np.concatenate([prog.user_start, prog.home_start]),
        np.concatenate([prog.user_length, prog.home_length]),
    )
    nq = _union_size(*prog.q_space_rows())
    nkf, nkb = _kv_size(prog, "forward", base), _kv_size(prog, "backward", base)
    U = prog.user_tokens
    zc = _zero_copy(prog, nq, nkf, nkb, _union_size(*base))
    # kept: Q (unless it is the caller's q), final O, LSE, own K/V (unless the caller's k, v)
    kept = (0 if zc["q"] else nq * QH * e) + nq * QH * e + nq * H * F32 + (0 if zc["state_kv"] and zc["kv"] else 2 * nq * KH * e)
    o_in = _receives(prog, "forward", (KIND_OUT,))
    dq_in = _receives(prog, "backward", (KIND_OUT,))
    dkv_in = _receives(prog, "backward", (KIND_OUT, KIND_DKV))
    half = e != F32
    # forward (fused.forward_with_state): Q, K, V, Obf [nq] in the compute dtype, LSE [nq] float32,
    # float32 accumulator O/LSEc only for the M slots where partials meet (and O_in when outputs arrive)
    M = _acc_rows(prog, prog.causal)
    acc_f = nq * H * F32 + M * (QH + H) * F32 + (M * QH * F32 if o_in else 0)
    kv_f = 0 if zc["kv"] else 2 * nkf * KH * e
    buf_f = (1 if zc["q"] else 2) * nq * QH * e + kv_f + acc_f
    msgs_f, wss_f = _messages(prog, "forward", e), _workspace(prog, "forward", kernel, e)
    msg_f, ws_f = sum(msgs_f), max(wss_f, default=0)
    # finish_forward: accumulator rows cast into Obf; then (accumulators freed) the user output, the
    # received `out` partials added in float32, and the state's own K/V
    ua = min(U, M) if o_in else 0
    out_copy = 0 if zc["out"] else U * QH * e
    state_kv = 0 if zc["state_kv"] else 2 * nq * KH * e
    finish_f = max(M * QH * e, out_copy + ua * QH * (3 * F32 + e) + state_kv - M * (QH + H) * F32)
    fwd = buf_f + max(_live_peak(prog, "forward", msgs_f, wss_f, messages == "host"), finish_f)
    # backward
    acc_b = nq * QH * F32 + 2 * nkb * KH * F32 + (nq * QH * F32 if dq_in else 0) + (2 * nkb * KH * F32 if dkv_in else 0)
    kv_b = 0 if zc["bwd_kv"] else 2 * nkb * KH * e
    buf_b = U * QH * e + (0 if zc["do"] else nq * QH * e) + kv_b + acc_b
    msgs_b, wss_b = _messages(prog, "backward", e), _workspace(prog, "backward", kernel, e)
    msg_b, ws_b = sum(msgs_b), max(wss_b, default=0)
    tmp = max(nq * QH * F32 if dq_in else 0, nkb * KH * F32 if dkv_in else 0)
    # the user-layout gradients; a float32 gather first unless the layout is the identity (zerocopy)
    gather = (0 if zc["do"] else U * QH * F32) if half else 0
    finish_b = U * (QH + 2 * KH) * e + tmp + gather
    bwd = buf_b + max(_live_peak(prog, "backward", msgs_b, wss_b, messages == "host"), finish_b)
    peak = (layers - 1) * kept + max(fwd, kept + bwd)
    return {
        "rank": rank,
        "qTokens": nq,
        "kvTokensForward": nkf,
        "kvTokensBackward": nkb,
        "keptPerLayer": kept,
        "kvResident": max(kv_f, kv_b),
        "accumulators": max(acc_f, acc_b),
        "accumulatorRowsForward": M,
        "messagesForward": msg_f,
        "messagesBackward": msg_b,
        "workspaceForward": ws_f,
        "workspaceBackward": ws_b,
        "forward": fwd,
        "backward": bwd,
        "peak": peak,
    }


def estimate_memory(plan: Plan, dtype: str = "float32", kernel: str = "math", layers: int = 1, ranks: Optional[List[int]] = None, messages: str = "device") -> List[Dict[str, int]]:
    """Per-rank estimates (every rank, or `ranks`)."""
    return [rank_memory(plan, r, dtype, kernel, layers, messages) for r in (range(plan.world) if ranks is None else ranks)]


def check_memory(plan: Plan, budget_bytes: float, rank: Optional[int] = None, dtype: str = "float32", kernel: str = "math", layers: int = 1) -> Dict[str, int]:
    """Raises PlanError `run.memory` when the peak of `rank` (default: every rank, so all ranks
    refuse together) exceeds `budget_bytes`; returns the largest estimate."""
    if not budget_bytes > 0:
        raise PlanError("run.memory", f"the memory budget must be a positive number of bytes (got {budget_bytes})")
    est = estimate_memory(plan, dtype, kernel, layers, None if rank is None else [rank])
    worst = max(est, key=lambda r: r["peak"])
    if worst["peak"] > budget_bytes:
        raise PlanError(
            "run.memory",
            f"rank {worst['rank']} needs about {worst['peak'] / 2**30:.3f} GiB ({layers} layer(s), {dtype}, {kernel} kernels) "
            f"but the budget is {budget_bytes / 2**30:.3f} GiB; use more ranks, smaller blocks or fewer tokens per rank",
        )
    return worst


def main(argv=None) -> int:
    """`python -m fcp_torch.memory --plan P [--dtype D] [--kernel K] [--layers L]`: one JSON line."""
    import argparse
    import json
    import sys

    from .check import check_plan
    from .plan import read_plan

    ap = argparse.ArgumentParser(prog="fcp_torch.memory")
    ap.add_argument("--plan", required=True, action="append")
    ap.add_argument("--dtype", default="bfloat16", choices=tuple(DTYPE_BYTES))
    ap.add_argument("--kernel", default="gpu", choices=("math", "gpu"))
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--messages", default="device", choices=MESSAGES)
    a = ap.parse_args(argv)
    try:
        out = []
        for path in a.plan:
            plan = read_plan(path)
            check_plan(plan)
            out.append(estimate_memory(plan, a.dtype, a.kernel, a.layers, messages=a.messages))
    except PlanError as e:
        sys.stderr.write(f"fcp_torch.memory: error: {e.code}: {e.message}\n")
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

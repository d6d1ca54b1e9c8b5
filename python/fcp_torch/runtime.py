"""One rank's interpreter of a plan: buffers, groups of transfers, compute ops, forward and backward.

Semantics follow docs/design.md and the brief's "plan semantics": per rank, groups run in order; the
transfers of group g start after group g-1 completed and after their `sendAfter` ops; compute ops
run in table order, each after group `after` completed on the rank.

Buffers (see spaces.py): `qspace` holds the rank's user and home tokens (Q, O, LSE, dO, dQ);
`kvspace` of each phase holds every token whose K/V the rank ever has (user, home, received).
Accumulators are float32: O/LSE (forward, online-softmax merge), dQ/dK/dV (backward). Transfers of
accumulated values (`out`, `dkv`) are staged on the compute stream right after the op that finishes
them; what arrives is added to separate "incoming" buffers written only by the communication side,
so the compute stream never waits for a group it does not need.
"""
from __future__ import annotations

import math
import time
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

import os

from . import fused as _fused
from . import kvpool as _kvpool
from .comm import LocalComm
from .fusion import fuse_sequences as _fuse_sequences
from .fusion import fuse_tasks
from .kernels import Kernels, Pieces, decompose, merge_into, merge_slice, plan_launches
from .plan import KIND_DKV, KIND_IN, KIND_KV, KIND_OUT, PhaseProgram, PlanError, RankProgram
from .spaces import TokenSpace

warnings.filterwarnings("ignore", message="index_reduce")

# Fields carried by each transfer kind, per phase: (field, space) with space q or kv.
FIELDS = {
    "forward": {KIND_IN: (("Q", "q"), ("K", "kv"), ("V", "kv")), KIND_KV: (("K", "kv"), ("V", "kv")), KIND_OUT: (("O", "q"),)},
    "backward": {
        KIND_IN: (("dO", "q"),),
        KIND_KV: (("K", "kv"), ("V", "kv")),
        KIND_DKV: (("dK", "kv"), ("dV", "kv")),
        KIND_OUT: (("dQ", "q"), ("dK", "kv"), ("dV", "kv")),
    },
}
ACC_FIELDS = {"O", "dQ", "dK", "dV"}


@dataclass
class MsgPart:
    field: str
    kind: int
    idx: torch.Tensor
    rows: int
    # dkv parts whose ranges overlap: 1 for the first occurrence of a slot, 0 after (the partial moves once)
    first: Optional[torch.Tensor] = None


@dataclass
class GroupSpec:
    sends: Dict[int, List[MsgPart]]
    recvs: Dict[int, List[MsgPart]]
    send_after: int  # last op (rank order) that must finish before this group's sends; -1 none


@dataclass
class PhaseStats:
    wall_ms: float = 0.0
    compute_ms: float = 0.0
    comm_ms: float = 0.0
    ops: int = 0
    launches: int = 0
    pairs: int = 0
    bytes_sent: int = 0
    launch_kinds: Dict[str, int] = field(default_factory=dict)


class RankRuntime:
    """Executes one rank's program. `local=True`: all K/V of the rank's tasks are local (replay)."""

    def __init__(
        self,
        prog: RankProgram,
        comm=None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        kernel: str = "auto",
        mode: Optional[str] = None,
        local: bool = False,
        time_ops: bool = True,
        softmax_scale: Optional[float] = None,
        launch_rows: Optional[int] = None,
        kv_pool: Optional[bool] = None,
        merge_window: Optional[int] = None,
        window_rows: Optional[int] = None,
        fuse_tasks: Optional[bool] = None,
        solo_pairs: Optional[int] = None,
        fuse_sequences: Optional[bool] = None,
        zero_copy: Optional[bool] = None,
        launch_order: Optional[str] = None,
        phase_sync: Optional[str] = None,
        side_stream: Optional[bool] = None,
    ):
        self.prog = prog
        # Deferred sums (deferred.py): forward merges and backward dQ adds of up to `merge_window`
        # consecutive ops in one pass, at most `window_rows` held partial rows; 1 = per launch.
        # Default 8 ops and twice the query space's rows (so held bf16 partials stay within the size
        # of the float32 dQ the backward keeps anyway): H200 run 10, fcp-64/128/256 heaviest rank,
        # forward 83.7/73.9/87.9 -> 76.1/67.6/82.2 ms with task fusion and solo launches below,
        # backward 239.3/212.2/251.5 -> 232.6/205.7/243.5 ms, peak / live set 1.08-1.10 -> 1.13-1.17.
        # `window_rows` 0 or "inf": unbounded. Env: FCP_MERGE_WINDOW, FCP_WINDOW_ROWS.
        self.merge_window = int(merge_window if merge_window is not None else os.environ.get("FCP_MERGE_WINDOW", "8"))
        wr = window_rows if window_rows is not None else os.environ.get("FCP_WINDOW_ROWS", "2q")
        self._window_rows_spec = wr
        # cuDNN pieces of at least this many pairs launched alone (kernels.plan_launches), so their
        # Q/K/V are views, not gathered copies (run 10: fcp-256 forward 83.3 -> 82.2 ms, the 1.9 ms of
        # gathers gone); <= 0: off. Env FCP_SOLO_PAIRS; default 4096 x 2048.
        sp = solo_pairs if solo_pairs is not None else os.environ.get("FCP_SOLO_PAIRS", str(1 << 23))
        self.solo_pairs = int(sp) if sp not in (None, "") and int(sp) > 0 else None
        # Task fusion (fusion.py): an op's tasks of one query range with touching K/V ranges as one
        # task (run 10: fcp-64 forward 80.8 -> 77.5 ms with 4-op windows). Env FCP_FUSE_TASKS.
        self.fuse_tasks = bool(fuse_tasks) if fuse_tasks is not None else os.environ.get("FCP_FUSE_TASKS", "1") == "1"
        # Whole-sequence fusion (fusion.fuse_sequences): an op's tasks tiling a sequence's whole causal
        # square run as one causal launch over the sequence. Env FCP_FUSE_SEQUENCES (default on).
        self.fuse_sequences = (
            bool(fuse_sequences) if fuse_sequences is not None else os.environ.get("FCP_FUSE_SEQUENCES", "1") == "1"
        )
        # Zero-copy buffers where the user layout is the slot layout (zerocopy.py). Env FCP_ZERO_COPY.
        self.zero_copy = bool(zero_copy) if zero_copy is not None else os.environ.get("FCP_ZERO_COPY", "1") == "1"
        # Launch order inside an op: "size" = most pairs first, so the host issues the small launches
        # while the big kernels run (H200 run 11, world 1: kernels_only 13.0 ms of which the GPU was
        # busy 10.7 ms, the small cuDNN shapes first, each waiting for the host); "plan" = as
        # kernels.plan_launches groups them (by shape, ascending). Env FCP_LAUNCH_ORDER.
        self.launch_order = launch_order or os.environ.get("FCP_LAUNCH_ORDER", "size")
        self.phase_sync = phase_sync or os.environ.get("FCP_PHASE_SYNC", "1")
        # Most gathered rows (Q + K/V) of one kernel launch (kernels.split_rows); None: unbounded.
        # Set before prepare(): launches are built once.
        self.launch_rows = launch_rows
        self.comm = comm if comm is not None else LocalComm()
        self.device = torch.device(device)
        self.dtype = dtype
        self.H, self.Hk, self.D = prog.q_heads, prog.kv_heads, prog.head_dim
        self.scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(self.D)
        self.kernels = Kernels(self.device, dtype, self.scale)
        # Fused merges and gathers (fused.py; Triton where its probe passes); None: the original merges.
        self.fused = _fused.make_fused(self.device)
        if kernel == "auto" and self.device.type != "cuda":
            kernel = "math"
        if kernel in ("flash", "cudnn") and not self.kernels.available.get(kernel):
            raise PlanError(
                "run.kernel", f"kernel {kernel} is not usable here: {self.kernels.errors.get(kernel, 'needs CUDA')}"
            )
        self.kernel = kernel
        self.mode = mode or ("square" if kernel in ("cudnn", "auto") else "br")
        self.local = local
        self.time_ops = time_ops
        self.cuda = self.device.type == "cuda"
        # Sums on a side stream (CUDA): the deferred merge / dQ-add windows and the per-launch dK/dV
        # adds run on a second stream that waits for the kernel producing their inputs, so they
        # overlap the next kernels instead of sitting between them on the compute stream (H200 run
        # 11, fcp-256 backward: 3.1 ms of dK/dV adds + 3.0 ms of dQ windows of 6.7 ms outside the
        # kernels). The compute stream waits for the side stream (`_join_sums`, an event, no host
        # sync) before anything else touches the sums: a group post (staging `out`/`dkv`, pool
        # zeroing), an op whose pool rows are zeroed, the phase end. Env FCP_SIDE_STREAM.
        ss = side_stream if side_stream is not None else os.environ.get("FCP_SIDE_STREAM", "1") == "1"
        self.side_stream = bool(ss) and self.cuda
        self._side = None
        self._side_busy = False
        self.stream_comm = self.cuda and getattr(self.comm, "stream", None) is not None
        p = prog
        base = (
            np.concatenate([p.user_seq, p.home_seq]),
            np.concatenate([p.user_start, p.home_start]),
            np.concatenate([p.user_length, p.home_length]),
        )
        self.qspace = TokenSpace(*p.q_space_rows())
        wr = self._window_rows_spec
        if isinstance(wr, str) and wr.endswith("q"):
            wr = int(float(wr[:-1] or 1) * self.qspace.size)
        self.window_rows = None if wr in (None, "", "0", 0, "inf") else int(wr)
        self.kvspace = {ph: self._kv_space(ph, base) for ph in ("forward", "backward")}
        self.user_q = self._t(self.qspace.index(p.user_seq, p.user_start, p.user_length))
        self.user_kv = {ph: self._t(self.kvspace[ph].index(p.user_seq, p.user_start, p.user_length)) for ph in self.kvspace}
        # K/V kept from forward to backward: the rank's own tokens (user and home), not fetched ones.
        self.base_space = TokenSpace(*base)
        bsq, bst, ben = self.base_space.seq, self.base_space.start, self.base_space.end
        self.base_kv = {ph: self._t(self.kvspace[ph].index(bsq, bst, ben - bst)) for ph in self.kvspace}
        # K/V pool (kvpool.py): slots mapped to rows of a pool sized by the phase's peak live set.
        # None: FCP_KV_POOL (default off until measured on the GPU).
        if kv_pool is None:
            kv_pool = os.environ.get("FCP_KV_POOL", "0") == "1"
        self.pool: Optional[Dict[str, _kvpool.PhasePool]] = None
        if kv_pool:
            self.pool = {ph: _kvpool.build(self, ph) for ph in self.kvspace}
            for ph, pl in self.pool.items():
                self.user_kv[ph] = self._t(pl.map(self.user_kv[ph].cpu().numpy()))
                self.base_kv[ph] = self._t(pl.map(self.base_kv[ph].cpu().numpy()))
        # rows of each phase's K/V buffers: the pool's, or one per slot
        self.kv_rows = {ph: (self.pool[ph].rows if self.pool else self.kvspace[ph].size) for ph in self.kvspace}
        self._zero: Dict = {}
        self._launch_cache: Dict[Tuple[str, int], list] = {}
        self._merge_cache: Dict[int, tuple] = {}
        self._group_cache: Dict[Tuple[str, int], GroupSpec] = {}
        # Forward state of the last plain `forward()` call (worker and tests: one call at a time). The
        # autograd path never uses it: each call keeps its own state (`forward_with_state`), so one
        # runtime serves any number of layers and calls (issue 11 item 1).
        self.saved = None
        self.stats: Dict[str, PhaseStats] = {}

    # ------------------------------------------------------------------------------------------
    # setup helpers

    def _t(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)

    def _kv_space(self, phase: str, base) -> TokenSpace:
        pp: PhaseProgram = getattr(self.prog, phase)
        seqs, starts, lens = [base[0]], [base[1]], [base[2]]
        me = self.prog.rank
        for g in pp.groups:
            m = (g.dst == me) & ((g.kind == KIND_KV) | (g.kind == KIND_IN) | (g.kind == KIND_DKV) | (g.kind == KIND_OUT))
            m |= (g.src == me) & (g.kind == KIND_DKV)
            seqs.append(g.seq[m])
            starts.append(g.start[m])
            lens.append(g.length[m])
        if self.local:
            for op in pp.ops:
                seqs.append(op.seq)
                starts.append(op.kv_start)
                lens.append(op.kv_length)
        return TokenSpace(np.concatenate(seqs), np.concatenate(starts), np.concatenate(lens))

    def _launches(self, phase: str, i: int):
        key = (phase, i)
        if key not in self._launch_cache:
            op = getattr(self.prog, phase).ops[i]
            cols = (op.seq, op.q_start, op.q_length, op.kv_start, op.kv_length)
            if self.fuse_tasks:
                cols = fuse_tasks(*cols)
            if self.fuse_sequences:
                cols = _fuse_sequences(*cols, self.prog.sequences, self.prog.causal)
            pieces = decompose(*cols, self.prog.causal, self.mode)
            qfirst = self.qspace.locate(pieces.seq, pieces.q0, pieces.lq)
            kfirst = self.kvspace[phase].locate(pieces.seq, pieces.k0, pieces.lk)
            launches = plan_launches(
                pieces, qfirst, kfirst, self.kernel, self.device, self.kernels.available, self.launch_rows, self.solo_pairs
            )
            if self.launch_order == "size":
                launches = sorted(launches, key=lambda L: -L.pairs)  # stable: ties keep their order
            if self.pool is not None:
                for L in launches:
                    _kvpool.remap_launch(L, self.pool[phase], self.device)
            self._launch_cache[key] = launches
        return self._launch_cache[key]

    def prepare(self) -> float:
        """Builds every launch and message layout ahead of time; returns the seconds it took."""
        t0 = time.perf_counter()
        for ph in ("forward", "backward"):
            pp = getattr(self.prog, ph)
            for i in range(len(pp.ops)):
                launches = self._launches(ph, i)
                scatter = [L for L in launches if not self._sliced(L)]
                if ph == "forward" and scatter:
                    self._merge_index(scatter)
            if ph == "forward" and self.fused is not None:
                _fused.prepare_merges(self)
            if ph == "backward" and self.fused is not None:
                _fused.prepare_adds(self)
            if not self.local:
                for g in range(len(pp.groups)):
                    self._group(ph, g)
        return time.perf_counter() - t0

    def _group(self, phase: str, g: int) -> GroupSpec:
        key = (phase, g)
        if key in self._group_cache:
            return self._group_cache[key]
        grp = getattr(self.prog, phase).groups[g]
        me = self.prog.rank
        fields = FIELDS[phase]
        sends: Dict[int, List[MsgPart]] = {}
        recvs: Dict[int, List[MsgPart]] = {}
        for direction, target in (("send", sends), ("recv", recvs)):
            mine = grp.src == me if direction == "send" else grp.dst == me
            peers = grp.dst if direction == "send" else grp.src
            for p in np.unique(peers[mine]).tolist():
                m = mine & (peers == p)
                parts: List[MsgPart] = []
                for kind in (KIND_IN, KIND_KV, KIND_OUT, KIND_DKV):
                    mk = m & (grp.kind == kind)
                    if not mk.any():
                        continue
                    if kind not in fields:
                        raise PlanError("plan.schema", f"{phase} transfers cannot be of kind {kind}")
                    for f, sp in fields[kind]:
                        space = self.qspace if sp == "q" else self.kvspace[phase]
                        idx = space.index(grp.seq[mk], grp.start[mk], grp.length[mk])
                        if sp == "kv" and self.pool is not None:
                            idx = self.pool[phase].map(idx)
                        first = None
                        if kind == KIND_DKV and direction == "send":
                            _, pos = np.unique(idx, return_index=True)
                            if len(pos) < len(idx):
                                m1 = np.zeros(len(idx), np.float32)
                                m1[pos] = 1.0
                                first = torch.from_numpy(m1).to(self.device).view(-1, 1, 1)
                        parts.append(MsgPart(f, kind, self._t(idx), len(idx), first))
                target[int(p)] = parts
        sa = grp.send_after[grp.src == me]
        spec = GroupSpec(sends, recvs, int(sa.max()) if len(sa) else -1)
        self._group_cache[key] = spec
        return spec

    def _elems(self, f: str) -> int:
        return (self.H if f in ("Q", "O", "dO", "dQ") else self.Hk) * self.D

    # ------------------------------------------------------------------------------------------
    # the phase loop

    def _run_phase(self, phase: str, bufs: Dict[str, torch.Tensor]) -> PhaseStats:
        pp: PhaseProgram = getattr(self.prog, phase)
        st = PhaseStats()
        self._bufs = bufs
        self._phase = phase
        self._st = st
        self._op_events: List = []
        self._comm_events: List = []
        self._keep: List = []
        self._done: Dict[int, object] = {}
        self._pending: Optional[Tuple[int, object, GroupSpec]] = None
        self._completed = -1
        self._held = {}  # deferred.py: launch outputs waiting for their window
        self._zero = self.pool[phase].zero_at if self.pool is not None else {}
        G = 0 if self.local else len(pp.groups)
        # Host synchronisations around the phase, for its wall time and op events. `phase_sync`
        # "auto": none in a phase without groups (world 1; never in a local replay, which times
        # with them): the host then queues the next layer's work while this one runs, and the
        # phase's stats hold no times. Env FCP_PHASE_SYNC ("1" always, "auto").
        sync = self.cuda and not (self.phase_sync == "auto" and G == 0 and not self.local)
        self._timed = self.time_ops and sync
        if sync:
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        ops = pp.ops
        op_ptr = 0
        for g in range(G):
            spec = self._group(phase, g)
            while op_ptr <= spec.send_after:
                if ops[op_ptr].after >= g:
                    raise PlanError(
                        "plan.rule5.sendAfter",
                        f"{phase} group {g} sends after op {ops[op_ptr].index}, which waits for group {ops[op_ptr].after}",
                    )
                self._run_op(op_ptr)
                op_ptr += 1
            self._complete_pending()
            self._post(g, spec)
            while op_ptr < len(ops) and ops[op_ptr].after < g:
                self._run_op(op_ptr)
                op_ptr += 1
        self._complete_pending()
        while op_ptr < len(ops):
            if ops[op_ptr].after >= max(G, 1) and not self.local:
                raise PlanError("plan.schema", f"{phase} op {ops[op_ptr].index} waits for a group that does not exist")
            self._run_op(op_ptr)
            op_ptr += 1
        self._join_sums()
        if self.stream_comm and G:
            torch.cuda.current_stream(self.device).wait_event(self._done[G - 1])
        if sync:
            torch.cuda.synchronize(self.device)
        st.wall_ms = (time.perf_counter() - t0) * 1e3
        if sync and self.time_ops:
            st.compute_ms = sum(a.elapsed_time(b) for a, b in self._op_events)
            st.comm_ms = sum(a.elapsed_time(b) for a, b in self._comm_events)
        self._keep = []
        if self._held:
            raise RuntimeError(f"{phase}: {len(self._held)} deferred partials were never summed")
        # the phase's buffers belong to the caller (its `b`): holding them here kept the last call's
        # dO, K/V, float32 dQ/dK/dV and its state's Q/Ofinal/LSE alive into the next layer's
        # backward (1.0 GB on num-fcp-1, H200 run 8)
        self._bufs = None
        self.stats[phase] = st
        return st

    def _wait_group(self, g: int) -> None:
        """Makes group g (and all before it) complete before what comes next on the compute side."""
        if g < 0 or self.local:
            return
        if self.stream_comm:
            ev = self._done.get(g)
            if ev is None:
                raise PlanError("plan.rule5.order", f"an op waits for group {g}, which has not been posted yet")
            torch.cuda.current_stream(self.device).wait_event(ev)
        else:
            if self._pending is not None and self._pending[0] <= g:
                self._complete_pending()
            if self._completed < g:
                raise PlanError("plan.rule5.order", f"an op waits for group {g}, which has not been posted yet")

    def _run_op(self, i: int) -> None:
        op = getattr(self.prog, self._phase).ops[i]
        self._wait_group(op.after)
        launches = self._launches(self._phase, i)
        st = self._st
        z = self._zero.get(("op", i))
        if z is not None:
            self._join_sums()  # the rows' old slots may still be summed into on the side stream
            _kvpool.zero_rows(self._bufs, z)
        if self.cuda and self._timed:
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
        else:
            t0 = time.perf_counter()
        if self._phase == "forward":
            self._forward_op(launches)
        else:
            self._backward_op(launches)
        if self.cuda and self._timed:
            e1.record()
            self._op_events.append((e0, e1))
        elif not self.cuda:
            st.compute_ms += (time.perf_counter() - t0) * 1e3
        st.ops += 1
        st.launches += len(launches)
        for L in launches:
            st.pairs += L.pairs
            st.launch_kinds[L.kernel] = st.launch_kinds.get(L.kernel, 0) + 1

    @contextmanager
    def _sums(self, *inputs: torch.Tensor):
        """Runs the enclosed sums on the side stream (see `side_stream`) after the work queued so far
        on the compute stream; `inputs` (kernel outputs made on the compute stream) are marked as
        used there, so the caching allocator does not hand their memory on before the sums read
        them. Without the side stream: the compute stream, as before."""
        if not self.side_stream:
            yield
            return
        if self._side is None:
            self._side = torch.cuda.Stream(self.device)
        self._side.wait_stream(torch.cuda.current_stream(self.device))
        for x in inputs:
            if x is not None:
                x.record_stream(self._side)
        with torch.cuda.stream(self._side):
            yield
        self._side_busy = True

    def _join_sums(self) -> None:
        """Makes the compute stream wait for the sums queued on the side stream (no host wait)."""
        if self._side_busy:
            torch.cuda.current_stream(self.device).wait_stream(self._side)
            self._side_busy = False

    # Launches with at most this many segments merge and accumulate slice by slice (no scatter).
    SLICE_SEGMENTS = 16

    def _merge_index(self, launches):
        """Concatenated query slots of the scatter-merged launches of an op and their unique/inverse (cached)."""
        key = tuple(id(L) for L in launches)
        hit = self._merge_cache.get(key)
        if hit is None:
            idx = torch.cat([L.qidx for L in launches])
            hit = (launches, idx, torch.unique(idx, return_inverse=True))
            self._merge_cache[key] = hit
        return hit[1], hit[2]

    @staticmethod
    def _rows(buf: torch.Tensor, rng, idx: torch.Tensor) -> torch.Tensor:
        return buf[rng[0] : rng[1]] if rng is not None else buf.index_select(0, idx)

    def _sliced(self, L) -> bool:
        return L.qf is not None and len(L.lq) <= self.SLICE_SEGMENTS

    def _forward_op(self, launches) -> None:
        if self.fused is not None:
            return _fused.forward_op(self, launches)
        b = self._bufs
        scatter, os_, ls = [], [], []
        for L in launches:
            q = self._rows(b["Q"], L.q_range, L.qidx)
            k = self._rows(b["K"], L.k_range, L.kidx)
            v = self._rows(b["V"], L.k_range, L.kidx)
            o, lse = self.kernels.forward(L, q, k, v)
            if self._sliced(L):
                off = 0
                for a, n in zip(L.qf.tolist(), L.lq.tolist()):
                    merge_slice(b["O"], b["LSE"], a, o[off : off + n], lse[off : off + n])
                    off += n
            else:
                scatter.append(L)
                os_.append(o)
                ls.append(lse)
        if scatter:
            idx, uniq = self._merge_index(scatter)
            merge_into(b["O"], b["LSE"], idx, torch.cat([o.float() for o in os_]), torch.cat(ls), uniq)

    def _backward_op(self, launches) -> None:
        if self.fused is not None:
            return _fused.backward_op(self, launches)
        b = self._bufs
        for L in launches:
            q = self._rows(b["Q"], L.q_range, L.qidx)
            k = self._rows(b["K"], L.k_range, L.kidx)
            v = self._rows(b["V"], L.k_range, L.kidx)
            o = self._rows(b["Ofinal"], L.q_range, L.qidx)
            do = self._rows(b["dO"], L.q_range, L.qidx)
            lse = self._rows(b["LSE"], L.q_range, L.qidx)
            dq, dk, dv = self.kernels.backward(L, q, k, v, o, do, lse)
            if self._sliced(L):
                self._add_sliced(L, dq, dk, dv)
            else:
                b["dQ"].index_add_(0, L.qidx, dq.float())
                b["dK"].index_add_(0, L.kidx, dk.float())
                b["dV"].index_add_(0, L.kidx, dv.float())

    def _add_sliced(self, L, dq, dk, dv) -> None:
        """Adds a sliced launch's dQ, dK, dV back into the rank's buffers, run by run (the fused
        backward in fused.py shares it)."""
        b = self._bufs
        off = 0
        for a, n in zip(L.qf.tolist(), L.lq.tolist()):
            b["dQ"][a : a + n].add_(dq[off : off + n])
            off += n
        off = 0
        for a, n in zip(L.kf.tolist(), L.lk.tolist()):
            b["dK"][a : a + n].add_(dk[off : off + n])
            b["dV"][a : a + n].add_(dv[off : off + n])
            off += n

    # --- groups --------------------------------------------------------------------------------

    def _post(self, g: int, spec: GroupSpec) -> None:
        b = self._bufs
        self._join_sums()  # staged sums, dkv zeroing and pool zeroing read what the side stream wrote
        wire = self.dtype
        # Accumulated values leave from the compute side, right after the ops that finished them.
        staged: Dict[Tuple[int, int], torch.Tensor] = {}
        for p, parts in spec.sends.items():
            for j, part in enumerate(parts):
                if part.field in ACC_FIELDS:
                    staged[(p, j)] = b[part.field].index_select(0, part.idx)
                    if part.first is not None:
                        staged[(p, j)] *= part.first
                    if part.kind == KIND_DKV:
                        b[part.field].index_fill_(0, part.idx, 0.0)
        ctx = torch.cuda.stream(self.comm.stream) if self.stream_comm else nullcontext()
        ev = None
        if self.stream_comm:
            ev = torch.cuda.Event()
            ev.record()
        z = self._zero.get(("post", g))
        with ctx:
            if self.stream_comm:
                self.comm.stream.wait_event(ev)
                c0 = torch.cuda.Event(enable_timing=True) if self.time_ops else None
                if c0 is not None:
                    c0.record()
            if z is not None:
                # pool rows passing to slots this group brings: after the compute stream's last use
                # of their old slots (waited for above), before this group's receives land
                _kvpool.zero_rows(b, z)
            msgs: Dict[int, torch.Tensor] = {}
            for p, parts in spec.sends.items():
                chunks = []
                for j, part in enumerate(parts):
                    if part.field in ACC_FIELDS:
                        x = staged[(p, j)]
                        inc = b.get(part.field + "_in")
                        if inc is not None:
                            y = inc.index_select(0, part.idx)
                            x = x + (y * part.first if part.first is not None else y)
                            if part.kind == KIND_DKV:
                                inc.index_fill_(0, part.idx, 0.0)
                    else:
                        x = b[part.field].index_select(0, part.idx)
                    chunks.append(_fused.pack_part(x, part.kind == KIND_DKV, wire))
                msgs[p] = torch.cat(chunks) if len(chunks) > 1 else chunks[0]
                self._st.bytes_sent += msgs[p].numel() * msgs[p].element_size() if p != self.prog.rank else 0
            sizes = {
                p: sum(_fused.wire_elems(part.rows * self._elems(part.field), part.kind == KIND_DKV, wire) for part in parts)
                for p, parts in spec.recvs.items()
            }
            pg = self.comm.post(g, msgs, sizes, wire, self.device)
            self._keep.append((staged, msgs, pg))
            if self.stream_comm:
                recv = self.comm.wait(pg)
                self._unpack(spec, recv)
                done = torch.cuda.Event(enable_timing=self.time_ops)
                done.record()
                self._done[g] = done
                if c0 is not None:
                    self._comm_events.append((c0, done))
                self._keep.append(recv)
            else:
                self._pending = (g, pg, spec)

    def _complete_pending(self) -> None:
        if self._pending is None:
            return
        g, pg, spec = self._pending
        self._pending = None
        t0 = time.perf_counter()
        recv = self.comm.wait(pg)
        self._unpack(spec, recv)
        self._st.comm_ms += (time.perf_counter() - t0) * 1e3 if not self.stream_comm else 0.0
        self._completed = g

    def _unpack(self, spec: GroupSpec, recv: Dict[int, torch.Tensor]) -> None:
        b = self._bufs
        for p, parts in spec.recvs.items():
            msg = recv[p]
            off = 0
            for part in parts:
                e = self._elems(part.field)
                dkv = part.kind == KIND_DKV
                n = _fused.wire_elems(part.rows * e, dkv, self.dtype)
                x = _fused.unpack_part(msg[off : off + n], dkv, self.dtype).view(part.rows, -1, self.D)
                off += n
                if part.field in ACC_FIELDS:
                    key = part.field + "_in"
                    if key not in b:
                        ref = b[part.field]
                        b[key] = torch.zeros_like(ref)
                    if part.kind == KIND_DKV:
                        b[key].index_add_(0, part.idx, x.float())
                    else:
                        b[key].index_copy_(0, part.idx, x.float())
                else:
                    b[part.field].index_copy_(0, part.idx, x.to(b[part.field].dtype))
            if off != msg.numel():
                raise PlanError("run.message", f"message from rank {p} has {msg.numel()} elements, expected {off}")

    # ------------------------------------------------------------------------------------------
    # public API

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """User-layout q [U, H, D], k/v [U, Hk, D] -> o [U, H, D] (user layout); keeps the state for
        the next :meth:`backward` call without one (one forward/backward at a time)."""
        out, self.saved = self.forward_with_state(q, k, v)
        return out

    def forward_with_state(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """Like :meth:`forward` but returns (o, state) and keeps nothing: pass the state to
        :meth:`backward`. State is Q, final O, LSE and the rank's own K/V of this call only."""
        self._check_user(q, self.H)
        self._check_user(k, self.Hk)
        self._check_user(v, self.Hk)
        if self.fused is not None:
            # fused.py: single-partial rows stay in the compute dtype, float32 only where partials meet
            return _fused.forward_with_state(self, q, k, v)
        nq, nk = self.qspace.size, self.kv_rows["forward"]
        dev, dt = self.device, self.dtype
        b: Dict[str, torch.Tensor] = {
            "Q": torch.zeros(nq, self.H, self.D, device=dev, dtype=dt),
            "K": torch.zeros(nk, self.Hk, self.D, device=dev, dtype=dt),
            "V": torch.zeros(nk, self.Hk, self.D, device=dev, dtype=dt),
            "O": torch.zeros(nq, self.H, self.D, device=dev, dtype=torch.float32),
            "LSE": torch.full((nq, self.H), float("-inf"), device=dev, dtype=torch.float32),
        }
        b["Q"].index_copy_(0, self.user_q, q.to(dev, dt))
        b["K"].index_copy_(0, self.user_kv["forward"], k.to(dev, dt))
        b["V"].index_copy_(0, self.user_kv["forward"], v.to(dev, dt))
        self._run_phase("forward", b)
        o_full = b["O"] + b["O_in"] if "O_in" in b else b["O"]
        out = o_full.index_select(0, self.user_q).to(dt)
        state = {
            "Q": b["Q"],
            "Ofinal": b["O"].to(dt),
            "LSE": b["LSE"],
            "K": b["K"].index_select(0, self.base_kv["forward"]),
            "V": b["V"].index_select(0, self.base_kv["forward"]),
        }
        return out, state

    def backward(self, do: torch.Tensor, state: Optional[Dict[str, torch.Tensor]] = None):
        """User-layout dO [U, H, D] -> (dq, dk, dv) in user layout. `state`: what
        :meth:`forward_with_state` returned for this call (default: the last plain `forward`)."""
        s = state if state is not None else self.saved
        if s is None:
            raise PlanError("run.order", "backward needs the forward state of the same plan")
        self._check_user(do, self.H)
        nq, nk = self.qspace.size, self.kv_rows["backward"]
        dev, dt = self.device, self.dtype
        from . import zerocopy as _zc

        zc = _zc.plan(self)
        b: Dict[str, torch.Tensor] = {
            "Q": s["Q"],
            "Ofinal": s["Ofinal"],
            "LSE": s["LSE"],
            "dQ": torch.zeros(nq, self.H, self.D, device=dev, dtype=torch.float32),
            "dK": torch.zeros(nk, self.Hk, self.D, device=dev, dtype=torch.float32),
            "dV": torch.zeros(nk, self.Hk, self.D, device=dev, dtype=torch.float32),
        }
        # zerocopy.py: the caller's dO and the state's K/V serve as buffers where layouts agree
        d0 = _zc.as_buffer(do, dev, dt) if zc.do else None
        if d0 is None:
            d0 = torch.zeros(nq, self.H, self.D, device=dev, dtype=dt)
            d0.index_copy_(0, self.user_q, do.to(dev, dt))
        b["dO"] = d0
        for f in ("K", "V"):
            if zc.bwd_kv and s[f].shape[0] == nk:
                b[f] = s[f]
            else:
                b[f] = torch.zeros(nk, self.Hk, self.D, device=dev, dtype=dt)
                b[f].index_copy_(0, self.base_kv["backward"], s[f])
        self._run_phase("backward", b)

        def final(f: str, idx: torch.Tensor) -> torch.Tensor:
            x = b[f] + b[f + "_in"] if f + "_in" in b else b[f]
            if (zc.do if f == "dQ" else zc.bwd_kv) and idx.shape[0] == x.shape[0] and f + "_in" not in b:
                return x.to(dt)  # identity layout: one conversion, no gather
            return x.index_select(0, idx).to(dt)

        kv = self.user_kv["backward"]
        return final("dQ", self.user_q), final("dK", kv), final("dV", kv)

    def _check_user(self, x: torch.Tensor, heads: int) -> None:
        want = (self.prog.user_tokens, heads, self.D)
        if tuple(x.shape) != want:
            raise PlanError("run.shape", f"user-layout tensor has shape {tuple(x.shape)}, expected {want}")

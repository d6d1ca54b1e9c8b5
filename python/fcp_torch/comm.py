"""Point-to-point messaging of plan groups.

All transfers between one pair of ranks in one plan group travel as one message (both sides derive
its layout from the plan), and a group's messages are posted as one `batch_isend_irecv` call: one
NCCL group on GPUs. With NCCL the call is issued from a dedicated communication stream so that it
overlaps the compute stream; `wait()` only orders streams, the host never blocks.

Backends:
- `DistComm`: torch.distributed (gloo on CPU tensors, NCCL on CUDA tensors).
- `StagedComm`: CUDA tensors through gloo via host copies, for several ranks sharing one GPU (NCCL
  refuses two ranks on one device).
- `LocalComm`: one rank, no process group (self-messages only).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import torch


class PendingGroup:
    """A posted group: receive buffers per peer and the requests to wait for."""

    def __init__(self, recv: dict, reqs: list, sends: Dict[int, torch.Tensor], staged=None, tag: int = 0):
        self.recv = recv
        self.reqs = reqs
        self.sends = sends  # kept alive until completion
        self.staged = staged
        self.tag = tag


class LocalComm:
    """Single-rank communicator: only messages to oneself."""

    rank = 0
    world = 1
    stream: Optional[torch.cuda.Stream] = None

    def post(self, tag: int, sends: Dict[int, torch.Tensor], recv_sizes: Dict[int, int], dtype, device) -> PendingGroup:
        recv = {}
        for p, n in recv_sizes.items():
            if p != self.rank:
                raise RuntimeError(f"rank {self.rank} expects a message from rank {p} in a one-rank run")
            recv[p] = sends[p]
        return PendingGroup(recv, [], sends)

    def wait(self, pg: PendingGroup) -> Dict[int, torch.Tensor]:
        return pg.recv


class Mailbox:
    """Message queues shared by the ranks of an in-process run (one thread per rank)."""

    def __init__(self, world: int, timeout: float = 60.0):
        import queue
        import threading

        self.world = world
        self.timeout = timeout
        self._lock = threading.Lock()
        self._queues: Dict[tuple, "queue.Queue"] = {}
        self._queue_cls = queue.Queue

    def q(self, src: int, dst: int, tag: int):
        with self._lock:
            key = (src, dst, tag)
            if key not in self._queues:
                self._queues[key] = self._queue_cls()
            return self._queues[key]


class ThreadComm:
    """In-process communicator for tests and tools: ranks are threads sharing a :class:`Mailbox`."""

    def __init__(self, rank: int, mailbox: Mailbox, stream: Optional["torch.cuda.Stream"] = None):
        self.rank = rank
        self.world = mailbox.world
        self.box = mailbox
        # With a CUDA stream the runtime posts groups from it, as with NCCL (stream-ordered waits).
        self.stream = stream

    def post(self, tag: int, sends: Dict[int, torch.Tensor], recv_sizes: Dict[int, int], dtype, device) -> PendingGroup:
        for p, t in sends.items():
            c = t.clone()
            ev = None
            if c.is_cuda:  # the receiver's stream waits for this copy (different threads, different streams)
                ev = torch.cuda.Event()
                ev.record()
            self.box.q(self.rank, p, tag).put((c, ev))
        return PendingGroup(dict(recv_sizes), [], sends, tag=tag)

    def wait(self, pg: PendingGroup) -> Dict[int, torch.Tensor]:
        import queue

        out = {}
        for p, n in pg.recv.items():
            try:
                t, ev = self.box.q(p, self.rank, pg.tag).get(timeout=self.box.timeout)
                if ev is not None:
                    torch.cuda.current_stream(t.device).wait_event(ev)
            except queue.Empty as e:
                raise RuntimeError(f"rank {self.rank}: no message from rank {p} within {self.box.timeout} s") from e
            if t.numel() != n:
                raise RuntimeError(f"rank {self.rank}: message from rank {p} has {t.numel()} elements, expected {n}")
            out[p] = t
        return out


def resolve_group(cp_group):
    """The ProcessGroup behind what a user passes as the context-parallel group.

    None (the default group), a ProcessGroup, a device mesh of one dimension (any object with a
    `get_group()` method, as torch's DeviceMesh), or `(mesh, dim)` for one dimension of a larger mesh
    (`mesh.get_group(dim)`, e.g. `(mesh, "cp")`). Duck-typed: torch 1.13 has no DeviceMesh. A
    many-dimensional mesh without its dimension: PlanError `run.group`.
    """
    from .plan import PlanError

    if cp_group is None:
        return None
    if isinstance(cp_group, tuple):
        if len(cp_group) == 2 and callable(getattr(cp_group[0], "get_group", None)):
            mesh, dim = cp_group
            try:
                return mesh.get_group(dim)
            except (KeyError, IndexError, ValueError, RuntimeError) as e:
                raise PlanError("run.group", f"the device mesh has no dimension {dim!r}: {e}") from e
        raise PlanError("run.group", "cp_group as a tuple must be (device_mesh, dimension)")
    get = getattr(cp_group, "get_group", None)
    if callable(get):
        try:
            return get()
        except (TypeError, RuntimeError, ValueError) as e:
            raise PlanError(
                "run.group",
                f"cp_group is a device mesh of several dimensions; pass (mesh, dim) with the CP dimension ({e})",
            ) from e
    return cp_group


def global_rank(group, rank: int) -> int:
    """The default group's rank of `rank` of `group` (torch >= 2.0 names it get_global_rank)."""
    import torch.distributed as dist

    if group is None:
        return rank
    f = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
    return int(f(group, rank))


class DistComm:
    """torch.distributed point-to-point groups.

    `group`: the context-parallel ProcessGroup (None: the default group). Plan ranks are ranks inside
    the group (0..size-1); torch's P2P calls take default-group ranks, so peers are translated.
    """

    def __init__(self, rank: int, world: int, device: torch.device, group=None):
        import torch.distributed as dist

        self.dist = dist
        self.rank = rank
        self.world = world
        self.device = device
        self.group = group
        self.nccl = dist.get_backend(group) == "nccl"
        self.stream = torch.cuda.Stream(device=device) if device.type == "cuda" else None
        self.peer = [global_rank(group, r) for r in range(world)]

    def post(self, tag: int, sends: Dict[int, torch.Tensor], recv_sizes: Dict[int, int], dtype, device) -> PendingGroup:
        dist = self.dist
        recv: Dict[int, torch.Tensor] = {}
        ops: List = []
        # Ordered by peer so that both sides list the pair's messages identically.
        for p in sorted(set(sends) | set(recv_sizes)):
            if p == self.rank:
                recv[p] = sends[p]
                continue
            g, q = self.group, self.peer[p]
            if p in recv_sizes:
                buf = torch.empty(recv_sizes[p], dtype=dtype, device=device)
                recv[p] = buf
                ops.append(dist.P2POp(dist.irecv, buf, q, g, tag) if not self.nccl else dist.P2POp(dist.irecv, buf, q, g))
            if p in sends:
                t = sends[p]
                ops.append(dist.P2POp(dist.isend, t, q, g, tag) if not self.nccl else dist.P2POp(dist.isend, t, q, g))
        reqs = dist.batch_isend_irecv(ops) if ops else []
        return PendingGroup(recv, reqs, sends)

    def wait(self, pg: PendingGroup) -> Dict[int, torch.Tensor]:
        for r in pg.reqs:
            r.wait()
        return pg.recv


class StagedComm(DistComm):
    """CUDA tensors over gloo: host copies before sending and after receiving."""

    def __init__(self, rank: int, world: int, device: torch.device, group=None):
        super().__init__(rank, world, device, group)
        self.nccl = False
        self.stream = None

    def post(self, tag, sends, recv_sizes, dtype, device) -> PendingGroup:
        host_sends = {p: (t if p == self.rank else t.cpu()) for p, t in sends.items()}
        pg = super().post(tag, host_sends, recv_sizes, dtype, torch.device("cpu"))
        pg.staged = device
        return pg

    def wait(self, pg: PendingGroup) -> Dict[int, torch.Tensor]:
        recv = super().wait(pg)
        return {p: t.to(pg.staged, non_blocking=False) for p, t in recv.items()}

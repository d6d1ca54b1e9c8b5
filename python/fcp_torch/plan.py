"""Reading `fcp-plan/1` files (JSON or gzip) and extracting one rank's program.

This module only interprets plans (planning lives in the TypeScript library). Compact chunk rows
(`seqSets`, `homeChunks`, `userChunks`, `chunkTasks`, `chunkTransfers`, the chunk CSR of compute ops
and the chunk `sendAfter` pairs) are expanded here, vectorised with numpy and filtered to the rank
that asks, so that a 256-rank ring plan never materialises its O(N^2 S) rows at once.

Part i of P of a sequence of length L is tokens [i*c, min((i+1)*c, L)) with c = ceil(L/P); empty
parts are skipped (docs/plan-format.md, "Compact chunk rows").
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

KIND_NAMES = ("in", "kv", "out", "dkv")
KIND_IN, KIND_KV, KIND_OUT, KIND_DKV = 0, 1, 2, 3


class PlanError(Exception):
    """A user-actionable problem with a plan file or run request; `code` is a stable dotted code."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _ints(v, path: str) -> np.ndarray:
    if not isinstance(v, list):
        raise PlanError("plan.schema", f"{path} must be an array of integers")
    if not v:
        return np.zeros(0, np.int64)
    # No silent conversion: 1.5 would become 1, true 1, and 2**70 an overflow.
    a = np.asarray(v)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (a.dtype.kind == "u" and a.max() > np.iinfo(np.int64).max):
        bad = next((i for i, x in enumerate(v) if not _is_int(x)), 0)
        raise PlanError("plan.schema", f"{path} must hold integers ({path}[{bad}] is {str(v[bad])[:40]})")
    return a.astype(np.int64)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63


def _int(v, path: str) -> int:
    if not _is_int(v):
        raise PlanError("plan.schema", f"{path} must be an integer (got {str(v)[:40]})")
    return int(v)


def _kinds(v, path: str) -> np.ndarray:
    if not isinstance(v, list):
        raise PlanError("plan.schema", f"{path} must be an array of kind names")
    out = np.zeros(len(v), dtype=np.int8)
    for i, k in enumerate(v):
        if k not in KIND_NAMES:
            raise PlanError("plan.structure.kind", f"{path}[{i}] is {k!r}; kinds are {', '.join(KIND_NAMES)}")
        out[i] = KIND_NAMES.index(k)
    return out


def _table(obj, path: str, cols, optional=()) -> Dict[str, np.ndarray]:
    if not isinstance(obj, dict):
        raise PlanError("plan.schema", f"{path} must be an object of columns")
    t: Dict[str, np.ndarray] = {}
    for c in list(cols) + list(optional):
        if c not in obj:
            if c in cols:
                raise PlanError("plan.schema", f"{path}.{c} is missing")
            continue
        t[c] = _kinds(obj[c], f"{path}.{c}") if c == "kind" else _ints(obj[c], f"{path}.{c}")
    return t


LAYOUT = ("rank", "seq", "start", "length")
TASKS = ("rank", "seq", "qStart", "qLength", "kvStart", "kvLength")
TRANSFERS = ("round", "src", "dst", "kind", "seq", "start", "length")
CHUNK_LAYOUT = ("rank", "set", "parts", "part")
CHUNK_TASKS = ("rank", "set", "parts", "qPart", "kvPart")
CHUNK_TRANSFERS = ("round", "src", "dst", "kind", "set", "parts", "part")


@dataclass
class Phase:
    transfers: Dict[str, np.ndarray]
    group_of_round: np.ndarray
    compute: Dict[str, np.ndarray]
    send_after: Dict[str, np.ndarray]
    chunk_transfers: Optional[Dict[str, np.ndarray]] = None
    # `pushStream` (docs/plan-format.md): the phase's `out`/`dkv` transfers may run on a second comm
    # stream. This runtime runs them on its one stream, in group order with the rest: a one-stream
    # schedule of such a plan is valid (no op reads a push), only slower than the simulator's.
    push_stream: bool = False

    @property
    def groups(self) -> int:
        return int(self.group_of_round.max()) + 1 if len(self.group_of_round) else 0


@dataclass
class Plan:
    """A plan in memory: numpy int64 columns (kinds int8), as in the file."""

    strategy: str
    world: int
    mask: str
    q_heads: int
    kv_heads: int
    head_dim: int
    bytes_per_element: int
    sequences: np.ndarray
    user_layout: Dict[str, np.ndarray]
    home_layout: Dict[str, np.ndarray]
    tasks: Dict[str, np.ndarray]
    forward: Phase
    backward: Phase
    seq_sets: Optional[Dict[str, np.ndarray]] = None
    home_chunks: Optional[Dict[str, np.ndarray]] = None
    user_chunks: Optional[Dict[str, np.ndarray]] = None
    chunk_tasks: Optional[Dict[str, np.ndarray]] = None
    meta: dict = field(default_factory=dict)

    @property
    def causal(self) -> bool:
        return self.mask == "causal"


def _phase(obj, path: str) -> Phase:
    if not isinstance(obj, dict):
        raise PlanError("plan.schema", f"{path} phase is missing")
    comp = _table(
        obj.get("compute"),
        f"{path}.compute",
        ("rank", "after", "taskOffsets", "taskIds"),
        ("chunkTaskOffsets", "chunkTaskIds"),
    )
    sa = _table(obj.get("sendAfter", {}), f"{path}.sendAfter", (), ("transfer", "compute", "chunkTransfer", "chunkCompute"))
    sa.setdefault("transfer", np.zeros(0, np.int64))
    sa.setdefault("compute", np.zeros(0, np.int64))
    ct = None
    if obj.get("chunkTransfers") is not None:
        ct = _table(obj["chunkTransfers"], f"{path}.chunkTransfers", CHUNK_TRANSFERS)
    gor = _ints(obj.get("groupOfRound"), f"{path}.groupOfRound")
    if len(gor) > 1 and np.any(np.diff(gor) < 0):
        raise PlanError("plan.rule5.groupOrder", f"{path}.groupOfRound must never decrease")
    if obj.get("commGroupOfRound") is not None:
        gor = _chains_as_groups(gor, _ints(obj["commGroupOfRound"], f"{path}.commGroupOfRound"), comp, path)
    push = obj.get("pushStream", False)
    if not isinstance(push, bool):
        raise PlanError("plan.schema", f"{path}.pushStream must be true or false")
    return Phase(_table(obj.get("transfers"), f"{path}.transfers", TRANSFERS), gor, comp, sa, ct, push)


def _chains_as_groups(gor: np.ndarray, comm: np.ndarray, comp: dict, path: str) -> np.ndarray:
    """Chained rounds (docs/plan-format.md, `commGroupOfRound`; src/plan/chains.ts does the same):
    the comm groups become the groups, and every compute op waits for the last comm group of the
    group it named. A rank runs its groups one after another, each one concurrent transfer call,
    so this is exactly the chained execution. Returns the new groupOfRound; rewrites compute.after."""
    if len(comm) != len(gor):
        raise PlanError("plan.rule5.chain", f"{path}.commGroupOfRound has {len(comm)} rounds, groupOfRound {len(gor)}")
    if len(comm) > 1 and np.any(np.diff(comm) < 0):
        raise PlanError("plan.rule5.chain", f"{path}.commGroupOfRound must never decrease")
    groups = int(gor[-1]) + 1 if len(gor) else 0
    last = np.full(groups, -1, np.int64)
    np.maximum.at(last, gor, comm)
    last = np.maximum.accumulate(last) if groups else last
    after = np.asarray(comp["after"], np.int64)
    ok = (after >= 0) & (after < groups)
    comp["after"] = np.where(ok, last[np.clip(after, 0, max(groups - 1, 0))] if groups else after, after)
    return comm


def plan_from_json(o) -> Plan:
    """Builds a :class:`Plan` from parsed JSON, checking the structure the runtime relies on."""
    if not isinstance(o, dict):
        raise PlanError("plan.schema", "a plan file must hold a JSON object")
    if o.get("format") != "fcp-plan/1":
        raise PlanError("plan.format", f"unsupported plan format {o.get('format')!r}; expected 'fcp-plan/1'")
    m = o.get("model")
    if not isinstance(m, dict) or any(k not in m for k in ("qHeads", "kvHeads", "headDim", "bytesPerElement")):
        raise PlanError("plan.schema", "model needs qHeads, kvHeads, headDim, bytesPerElement")
    model = [_int(m[k], f"model.{k}") for k in ("qHeads", "kvHeads", "headDim", "bytesPerElement")]
    if o.get("mask") not in ("causal", "full"):
        raise PlanError("plan.schema", "mask must be 'causal' or 'full'")
    opt = lambda k, cols: _table(o[k], k, cols) if o.get(k) is not None else None  # noqa: E731
    seq_sets = None
    if o.get("seqSets") is not None:
        seq_sets = _table(o["seqSets"], "seqSets", ("offsets", "seqs"), ("padTo",))
    plan = Plan(
        strategy=str(o.get("strategy", "?")),
        world=_int(o.get("world"), "world"),
        mask=o["mask"],
        q_heads=model[0],
        kv_heads=model[1],
        head_dim=model[2],
        bytes_per_element=model[3],
        sequences=_ints(o.get("sequences"), "sequences"),
        user_layout=_table(o.get("userLayout"), "userLayout", LAYOUT),
        home_layout=_table(o.get("homeLayout"), "homeLayout", LAYOUT),
        tasks=_table(o.get("tasks"), "tasks", TASKS),
        forward=_phase(o.get("forward"), "forward"),
        backward=_phase(o.get("backward"), "backward"),
        seq_sets=seq_sets,
        home_chunks=opt("homeChunks", CHUNK_LAYOUT),
        user_chunks=opt("userChunks", CHUNK_LAYOUT),
        chunk_tasks=opt("chunkTasks", CHUNK_TASKS),
        meta=o.get("meta") or {},
    )
    # Sizes, ids and ranks of every row, before anything indexes with them (fcp_torch.check; the
    # rules on the expanded rows are check_plan's, run by every executor before its first collective).
    from .check import check_structure

    check_structure(plan)
    return plan


def read_plan(path: str) -> Plan:
    """Reads a plan file (`.json`, or gzip by name or magic bytes)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PlanError("io.read", f"cannot read plan file {path}: {e.strerror}") from e
    if path.endswith(".gz") or raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError as e:
            raise PlanError("plan.json", f"{path} is not valid gzip") from e
    try:
        o = json.loads(raw)
    except ValueError as e:
        raise PlanError("plan.json", f"{path} is not valid JSON ({e})") from e
    return plan_from_json(o)


# ---------------------------------------------------------------------------------------------
# Chunk expansion


def _csr_expand(offsets: np.ndarray, values: np.ndarray, which: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """For each index w in `which`, the values[offsets[w]:offsets[w+1]]; returns (owner position, value)."""
    lo = offsets[which]
    n = offsets[which + 1] - lo
    owner = np.repeat(np.arange(len(which)), n)
    if owner.size == 0:
        return owner, np.zeros(0, np.int64)
    starts = np.repeat(lo - np.concatenate(([0], np.cumsum(n)[:-1])), n)
    return owner, values[np.arange(owner.size) + starts]


def expand_chunks(plan: Plan, set_ids: np.ndarray, parts: np.ndarray, part: np.ndarray):
    """Expands chunk rows (set, parts, part) over the sequences of each set.

    Returns (row, seq, start, length) arrays, one entry per non-empty part of a sequence, ordered by
    row, then by the sequence's position in its set.
    """
    if plan.seq_sets is None:
        raise PlanError("plan.schema", "chunk rows need the seqSets table")
    offs, seqs = plan.seq_sets["offsets"], plan.seq_sets["seqs"]
    row, seq = _csr_expand(offs, seqs, set_ids)
    L = plan.sequences[seq]
    P = parts[row]
    c = -(-L // P)
    start = part[row] * c
    end = np.minimum(start + c, L)
    keep = end > start
    return row[keep], seq[keep], start[keep], (end - start)[keep]


def _layout_rows(plan: Plan, explicit: Dict[str, np.ndarray], chunks, rank: int):
    sel = explicit["rank"] == rank
    seq, start, length = explicit["seq"][sel], explicit["start"][sel], explicit["length"][sel]
    if chunks is not None:
        rows = np.nonzero(chunks["rank"] == rank)[0]
        if rows.size:
            _, s2, st2, l2 = expand_chunks(plan, chunks["set"][rows], chunks["parts"][rows], chunks["part"][rows])
            seq = np.concatenate([seq, s2])
            start = np.concatenate([start, st2])
            length = np.concatenate([length, l2])
    return seq, start, length


@dataclass
class Group:
    """One rank's transfers of one plan group, with message layouts per peer."""

    index: int
    # per transfer (ordered: explicit transfers by id, then chunk rows by id, expanded by set order)
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    seq: np.ndarray
    start: np.ndarray
    length: np.ndarray
    # op index (in the rank's op order) that must finish before each transfer this rank sends; -1: none
    send_after: np.ndarray


@dataclass
class Op:
    """A compute op of this rank: its tasks (seq, qStart, qLength, kvStart, kvLength) and `after` group."""

    index: int  # row in the phase's compute table
    after: int
    seq: np.ndarray
    q_start: np.ndarray
    q_length: np.ndarray
    kv_start: np.ndarray
    kv_length: np.ndarray


@dataclass
class PhaseProgram:
    ops: List[Op]
    groups: List[Group]  # one per plan group (possibly empty for this rank)


@dataclass
class RankProgram:
    """Everything one rank needs to execute a plan."""

    rank: int
    world: int
    causal: bool
    q_heads: int
    kv_heads: int
    head_dim: int
    sequences: np.ndarray
    user_seq: np.ndarray
    user_start: np.ndarray
    user_length: np.ndarray
    home_seq: np.ndarray
    home_start: np.ndarray
    home_length: np.ndarray
    forward: PhaseProgram
    backward: PhaseProgram

    @property
    def user_tokens(self) -> int:
        return int(self.user_length.sum())

    def q_space_rows(self):
        """(seq, start, length) of every token range this rank ever holds query-sized data of: its
        user and home layouts, and what it receives as `in` or `out` (an `in` lands at its home and
        an `out` at its user rank, both already in the layouts, unless the rank relays it: FCP's
        two-hop reshuffle across nodes)."""
        seqs, starts, lens = [self.user_seq, self.home_seq], [self.user_start, self.home_start], [self.user_length, self.home_length]
        for pp in (self.forward, self.backward):
            for g in pp.groups:
                m = (g.dst == self.rank) & ((g.kind == KIND_IN) | (g.kind == KIND_OUT))
                seqs.append(g.seq[m])
                starts.append(g.start[m])
                lens.append(g.length[m])
        return np.concatenate(seqs), np.concatenate(starts), np.concatenate(lens)

    def attended_pairs(self, phase: str = "forward") -> int:
        """Attended (query, key) pairs of this rank's tasks in `phase` (FLOPs = 4 * pairs * qHeads * headDim)."""
        total = 0
        for op in getattr(self, phase).ops:
            total += int(attended_pairs(self.causal, op.q_start, op.q_length, op.kv_start, op.kv_length).sum())
        return total


def attended_pairs(causal: bool, qs, ql, ks, kl) -> np.ndarray:
    """Vectorised attended pairs of tasks (same formula as src/model/attention.ts)."""
    qs, ql, ks, kl = (np.asarray(x, dtype=np.int64) for x in (qs, ql, ks, kl))
    if not causal:
        return ql * kl
    qe, ke = qs + ql, ks + kl
    a = np.maximum(qs, ks)
    b = np.minimum(qe, ke - 1)
    n1 = np.maximum(b - a, 0)
    # queries in [a, b) attend (q - ks + 1) keys: arithmetic series
    t1 = n1 * ((a - ks + 1) + (b - 1 - ks + 1)) // 2
    c = np.maximum(qs, ke - 1)
    t2 = np.maximum(qe - c, 0) * kl
    out = np.where(n1 > 0, t1, 0) + t2
    return np.where((ql > 0) & (kl > 0), out, 0)


def _phase_tasks(plan: Plan, phase: Phase, rank: int, op_rows: np.ndarray) -> List[Op]:
    comp = phase.compute
    t = plan.tasks
    ops: List[Op] = []
    has_chunks = "chunkTaskOffsets" in comp and plan.chunk_tasks is not None
    if len(op_rows) == 0:
        return ops
    n_ops = len(comp["rank"])
    for off_key, id_key, n in (("taskOffsets", "taskIds", len(t["rank"])), ("chunkTaskOffsets", "chunkTaskIds", -1)):
        if off_key not in comp:
            continue
        offs = comp[off_key]
        if len(offs) != n_ops + 1 or offs[0] != 0 or np.any(np.diff(offs) < 0) or offs[-1] != len(comp[id_key]):
            raise PlanError("plan.schema", f"compute.{off_key} must be a CSR offset column of {n_ops + 1} rows")
        if n < 0:
            n = len(plan.chunk_tasks["rank"]) if plan.chunk_tasks is not None else 0
        _check_ids(comp[id_key], n, f"compute.{id_key}")
    # Explicit tasks of all ops at once.
    owner, tid = _csr_expand(comp["taskOffsets"], comp["taskIds"], op_rows)
    e_seq, e_qs, e_ql = t["seq"][tid], t["qStart"][tid], t["qLength"][tid]
    e_ks, e_kl = t["kvStart"][tid], t["kvLength"][tid]
    if has_chunks:
        cowner, cid = _csr_expand(comp["chunkTaskOffsets"], comp["chunkTaskIds"], op_rows)
        ct = plan.chunk_tasks
        r_q, sq, qst, qln = expand_chunks(plan, ct["set"][cid], ct["parts"][cid], ct["qPart"][cid])
        r_k, sk, kst, kln = expand_chunks(plan, ct["set"][cid], ct["parts"][cid], ct["kvPart"][cid])
        # Align query and key expansions (both skip empty parts independently).
        keyq = r_q * (len(plan.sequences) + 1) + sq
        keyk = r_k * (len(plan.sequences) + 1) + sk
        common, iq, ik = np.intersect1d(keyq, keyk, assume_unique=True, return_indices=True)
        c_row = r_q[iq]
        c_owner = cowner[c_row]
        c_seq, c_qs, c_ql, c_ks, c_kl = sq[iq], qst[iq], qln[iq], kst[ik], kln[ik]
        # Drop fully masked expansions (possible for chunk rows of short sequences).
        live = attended_pairs(plan.causal, c_qs, c_ql, c_ks, c_kl) > 0
        c_owner, c_seq, c_qs, c_ql, c_ks, c_kl = (x[live] for x in (c_owner, c_seq, c_qs, c_ql, c_ks, c_kl))
        c_row = c_row[live]
        # Keep expansion order: by chunk row, then set order (intersect1d sorted by key = row-major).
        owner = np.concatenate([owner, c_owner])
        e_seq = np.concatenate([e_seq, c_seq])
        e_qs = np.concatenate([e_qs, c_qs])
        e_ql = np.concatenate([e_ql, c_ql])
        e_ks = np.concatenate([e_ks, c_ks])
        e_kl = np.concatenate([e_kl, c_kl])
    order = np.argsort(owner, kind="stable")
    owner = owner[order]
    cols = [x[order] for x in (e_seq, e_qs, e_ql, e_ks, e_kl)]
    bounds = np.searchsorted(owner, np.arange(len(op_rows) + 1))
    for i, row in enumerate(op_rows):
        a, b = bounds[i], bounds[i + 1]
        ops.append(Op(int(row), int(comp["after"][row]), *(c[a:b] for c in cols)))
    return ops


def _check_ids(ids: np.ndarray, n: int, what: str) -> None:
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise PlanError("plan.schema", f"{what} refers to row {int(ids.max() if ids.max() >= n else ids.min())} of a table of {n}")


def _phase_program(plan: Plan, phase: Phase, rank: int) -> PhaseProgram:
    comp = phase.compute
    op_rows = np.nonzero(comp["rank"] == rank)[0]
    ops = _phase_tasks(plan, phase, rank, op_rows)
    op_pos = {int(r): i for i, r in enumerate(op_rows)}  # compute row -> index in this rank's op list
    G = phase.groups
    gor = phase.group_of_round
    tr = phase.transfers
    nr = len(gor)
    cols: Dict[str, List[np.ndarray]] = {k: [] for k in ("group", "src", "dst", "kind", "seq", "start", "length", "after", "order")}
    # Explicit transfers touching this rank.
    sel = np.nonzero((tr["src"] == rank) | (tr["dst"] == rank))[0]
    if len(tr["round"]) and (tr["round"].min(initial=0) < 0 or tr["round"].max(initial=-1) >= nr):
        raise PlanError("plan.schema", "a transfer's round is outside groupOfRound")
    sa_map = np.full(len(tr["round"]), -1, np.int64)
    sa = phase.send_after
    n_ops = len(comp["rank"])
    _check_ids(sa["transfer"], len(tr["round"]), "sendAfter.transfer")
    _check_ids(sa["compute"], n_ops, "sendAfter.compute")
    for t_id, c_id in zip(sa["transfer"], sa["compute"]):
        sa_map[t_id] = max(sa_map[t_id], c_id)
    cols["group"].append(gor[tr["round"][sel]])
    for k in ("src", "dst", "kind", "seq", "start", "length"):
        cols[k].append(tr[k][sel])
    cols["after"].append(sa_map[sel])
    cols["order"].append(sel)
    ct = phase.chunk_transfers
    if ct is not None and len(ct["round"]):
        csel = np.nonzero((ct["src"] == rank) | (ct["dst"] == rank))[0]
        csa = np.full(len(ct["round"]), -1, np.int64)
        _check_ids(sa.get("chunkTransfer", np.zeros(0, np.int64)), len(ct["round"]), "sendAfter.chunkTransfer")
        _check_ids(sa.get("chunkCompute", np.zeros(0, np.int64)), n_ops, "sendAfter.chunkCompute")
        for t_id, c_id in zip(sa.get("chunkTransfer", []), sa.get("chunkCompute", [])):
            csa[t_id] = max(csa[t_id], c_id)
        row, seq, start, length = expand_chunks(plan, ct["set"][csel], ct["parts"][csel], ct["part"][csel])
        rows = csel[row]
        cols["group"].append(gor[ct["round"][rows]])
        cols["src"].append(ct["src"][rows])
        cols["dst"].append(ct["dst"][rows])
        cols["kind"].append(ct["kind"][rows])
        cols["seq"].append(seq)
        cols["start"].append(start)
        cols["length"].append(length)
        cols["after"].append(csa[rows])
        # Chunk transfers come after every explicit one, in row order then set order.
        cols["order"].append(len(tr["round"]) + np.arange(len(rows)))
    cat = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}
    order = np.lexsort((cat["order"], cat["group"]))
    cat = {k: v[order] for k, v in cat.items()}
    # sendAfter compute rows -> this rank's op positions (only for transfers this rank sends).
    after_pos = np.array(
        [op_pos.get(int(c), -2) if (c >= 0 and s == rank) else -1 for c, s in zip(cat["after"], cat["src"])],
        dtype=np.int64,
    )
    if np.any(after_pos == -2):
        raise PlanError("plan.rule5.sendAfterRank", "a sendAfter compute op is not on the transfer's sender")
    bounds = np.searchsorted(cat["group"], np.arange(G + 1))
    groups = []
    for g in range(G):
        a, b = bounds[g], bounds[g + 1]
        groups.append(
            Group(
                g,
                cat["src"][a:b],
                cat["dst"][a:b],
                cat["kind"][a:b],
                cat["seq"][a:b],
                cat["start"][a:b],
                cat["length"][a:b],
                after_pos[a:b],
            )
        )
    for op in ops:
        if op.after >= G:
            raise PlanError("plan.schema", f"compute op {op.index} waits for group {op.after} but the phase has {G}")
    return PhaseProgram(ops, groups)


def rank_program(plan: Plan, rank: int) -> RankProgram:
    """Extracts (and expands) everything rank `rank` executes."""
    if not 0 <= rank < plan.world:
        raise PlanError("run.rank", f"rank {rank} is outside the plan's world of {plan.world}")
    us, ust, ul = _layout_rows(plan, plan.user_layout, plan.user_chunks, rank)
    hs, hst, hl = _layout_rows(plan, plan.home_layout, plan.home_chunks, rank)
    # User rows in (seq, start) order: this is the order of the rank's user-layout tensors.
    o = np.lexsort((ust, us))
    return RankProgram(
        rank=rank,
        world=plan.world,
        causal=plan.causal,
        q_heads=plan.q_heads,
        kv_heads=plan.kv_heads,
        head_dim=plan.head_dim,
        sequences=plan.sequences,
        user_seq=us[o],
        user_start=ust[o],
        user_length=ul[o],
        home_seq=hs,
        home_start=hst,
        home_length=hl,
        forward=_phase_program(plan, plan.forward, rank),
        backward=_phase_program(plan, plan.backward, rank),
    )


def user_rows(plan: Plan, rank: int):
    """(seq, start, length) of a rank's user tokens, in the order of its user-layout tensors."""
    us, ust, ul = _layout_rows(plan, plan.user_layout, plan.user_chunks, rank)
    o = np.lexsort((ust, us))
    return us[o], ust[o], ul[o]

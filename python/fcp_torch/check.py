"""The Python runtime's own checks of a plan: everything the runtime relies on, before any collective.

Plans reach the Python API from anywhere (a file, `fcp serve`, a user's own planner), so
`FcpAttention.from_plan`, the worker and the in-process runner do not trust them: a plan that
breaks a rule the runtime relies on would run to the end with wrong outputs (issue 11 item 2).
Every rank checks the whole plan, not only its own part, so that all ranks refuse the same plan
at the same point, before the first collective call (a rank refusing alone leaves its peers
blocked in a receive). Codes are the TypeScript validator's (src/plan/validate.ts) where they
correspond; the first problem found is raised as a :class:`PlanError`.

- :func:`check_structure` (called by `plan_from_json`): sizes and limits (the numbers of
  src/core/limits.ts), ids in range, kinds, ranks of every row, CSR offsets, heads dividing.
- :func:`check_plan`: the structure, then the rules on the expanded rows of every rank:
  rule 1 (each token has one user and one home rank), rule 2 (every attended pair computed
  exactly once, on the query's home rank; every task in one op of each phase, on its rank),
  rule 3 (every op's Q/dO and K/V on its rank by the group it waits for; senders hold what they
  send), rule 4 (O and dQ/dK/dV final before they leave, `out` exactly once to the user rank,
  every dK/dV partial reaching the key's home exactly once: the `dkv` flow), rule 5 (groups,
  `sendAfter` on the sender and never waiting for its own or a later group).

The flow checks cut each sequence at every row boundary into elementary intervals: inside one,
every row applies wholly or not at all, so each check runs once per (row, interval) pair, not per
token (the same idea as validate-outputs.ts; written again here, in numpy).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from .plan import KIND_DKV, KIND_IN, KIND_KV, KIND_OUT, Phase, Plan, PlanError, RankProgram, rank_program

# The limits of src/core/limits.ts that a plan can break (kept equal by hand; see that file for why).
LIMITS = {
    "world": 16384,
    "sequenceLength": 4194304,
    "totalTokens": 268435456,
    "sequences": 4194304,
    "heads": 1024,
    "headDim": 1024,
    "bytesPerElement": 8,
    "parts": 1048576,
    "rounds": 16777216,
}
S = "plan.structure"
INF = np.iinfo(np.int64).max // 4


def _fail(code: str, message: str) -> None:
    raise PlanError(code, message)


def _first(mask: np.ndarray) -> int:
    return int(np.nonzero(mask)[0][0])


def _same_lengths(t: Dict[str, np.ndarray], path: str) -> int:
    lens = {k: len(v) for k, v in t.items()}
    if len(set(lens.values())) > 1:
        _fail(f"{S}.columns", f"the columns of {path} differ in length ({', '.join(f'{k} {n}' for k, n in lens.items())})")
    return next(iter(lens.values()), 0)


def _in_range(v: np.ndarray, lo: int, hi: int, code: str, what: str) -> None:
    bad = (v < lo) | (v >= hi)
    if bad.any():
        i = _first(bad)
        _fail(code, f"{what}[{i}] is {int(v[i])}, not in [{lo}, {hi})")


def _ranges(seq: np.ndarray, start: np.ndarray, length: np.ndarray, L: np.ndarray, what: str, code: str) -> None:
    bad = (start < 0) | (length < 0) | (start + length > L[seq])
    if bad.any():
        i = _first(bad)
        _fail(code, f"{what} row {i}: tokens [{int(start[i])}, {int(start[i] + length[i])}) are outside sequence {int(seq[i])} of length {int(L[seq[i]])}")


def _csr(offs: np.ndarray, n_rows: int, n_values: int, what: str) -> None:
    if len(offs) != n_rows + 1 or (len(offs) and (offs[0] != 0 or offs[-1] != n_values)) or np.any(np.diff(offs) < 0):
        _fail(f"{S}.offsets", f"{what} must be a CSR offset column of {n_rows + 1} rows from 0 to {n_values}")


def check_structure(plan: Plan) -> None:
    """Sizes, limits, ids and ranks of every table (cheap: one pass over the file's rows)."""
    W = plan.world
    if not 1 <= W <= LIMITS["world"]:
        _fail(f"{S}.world" if W < 1 else "plan.limit.world", f"world {W} is not in [1, {LIMITS['world']}]")
    H, Hk, D, B = plan.q_heads, plan.kv_heads, plan.head_dim, plan.bytes_per_element
    for name, v, hi in (("qHeads", H, LIMITS["heads"]), ("kvHeads", Hk, LIMITS["heads"]), ("headDim", D, LIMITS["headDim"]), ("bytesPerElement", B, LIMITS["bytesPerElement"])):
        if not 1 <= v <= hi:
            _fail(f"{S}.model", f"model.{name} is {v}, not in [1, {hi}]")
    if H % Hk:
        _fail(f"{S}.model", f"query heads ({H}) must be a multiple of KV heads ({Hk}) for grouped-query attention")
    L = plan.sequences
    if len(L) == 0 or len(L) > LIMITS["sequences"]:
        _fail(f"{S}.seqLength", f"a plan needs 1 to {LIMITS['sequences']} sequences (got {len(L)})")
    _in_range(L, 1, INF, f"{S}.seqLength", "sequences")
    _in_range(L, 1, LIMITS["sequenceLength"] + 1, "plan.limit.sequenceLength", "sequences")
    if int(L.sum()) > LIMITS["totalTokens"]:
        _fail("plan.limit.totalTokens", f"{int(L.sum())} tokens is above the limit of {LIMITS['totalTokens']}")
    nseq = len(L)
    for name, t in (("userLayout", plan.user_layout), ("homeLayout", plan.home_layout)):
        _same_lengths(t, name)
        _in_range(t["rank"], 0, W, f"{S}.rank", f"{name}.rank")
        _in_range(t["seq"], 0, nseq, f"{S}.seq", f"{name}.seq")
        _ranges(t["seq"], t["start"], t["length"], L, name, "plan.rule1.range")
    t = plan.tasks
    n_tasks = _same_lengths(t, "tasks")
    _in_range(t["rank"], 0, W, f"{S}.rank", "tasks.rank")
    _in_range(t["seq"], 0, nseq, f"{S}.seq", "tasks.seq")
    _ranges(t["seq"], t["qStart"], t["qLength"], L, "tasks (queries)", f"{S}.range")
    _ranges(t["seq"], t["kvStart"], t["kvLength"], L, "tasks (keys)", f"{S}.range")
    n_sets = 0
    if plan.seq_sets is not None:
        ss = plan.seq_sets
        n_sets = max(len(ss["offsets"]) - 1, 0)
        _csr(ss["offsets"], n_sets, len(ss["seqs"]), "seqSets.offsets")
        _in_range(ss["seqs"], 0, nseq, f"{S}.seq", "seqSets.seqs")
        if "padTo" in ss:
            if len(ss["padTo"]) != n_sets:
                _fail(f"{S}.columns", f"seqSets.padTo must have one entry per set ({n_sets}), not {len(ss['padTo'])}")
            _in_range(ss["padTo"], 0, LIMITS["sequenceLength"] + 1, f"{S}.padTo", "seqSets.padTo")
    n_chunk_tasks = 0
    for name, ct, part_cols in (
        ("homeChunks", plan.home_chunks, ("part",)),
        ("userChunks", plan.user_chunks, ("part",)),
        ("chunkTasks", plan.chunk_tasks, ("qPart", "kvPart")),
    ):
        if ct is None:
            continue
        n = _same_lengths(ct, name)
        if name == "chunkTasks":
            n_chunk_tasks = n
        _chunk_rows(ct, name, part_cols, W, n_sets)
    for ph_name in ("forward", "backward"):
        _check_phase_structure(plan, getattr(plan, ph_name), ph_name, n_tasks, n_chunk_tasks, n_sets)


def _chunk_rows(ct: Dict[str, np.ndarray], name: str, part_cols, W: int, n_sets: int) -> None:
    if n_sets == 0 and len(ct["rank"]):
        _fail(f"{S}.set", f"{name} rows need the seqSets table")
    if "rank" in ct:
        _in_range(ct["rank"], 0, W, f"{S}.rank", f"{name}.rank")
    _in_range(ct["set"], 0, n_sets, f"{S}.set", f"{name}.set")
    _in_range(ct["parts"], 1, LIMITS["parts"] + 1, f"{S}.part", f"{name}.parts")
    for c in part_cols:
        bad = (ct[c] < 0) | (ct[c] >= ct["parts"])
        if bad.any():
            i = _first(bad)
            _fail(f"{S}.part", f"{name}.{c}[{i}] is {int(ct[c][i])}, not in [0, parts {int(ct['parts'][i])})")


def _check_phase_structure(plan: Plan, ph: Phase, name: str, n_tasks: int, n_chunk_tasks: int, n_sets: int) -> None:
    W, L, nseq = plan.world, plan.sequences, len(plan.sequences)
    gor = ph.group_of_round
    if len(gor) > LIMITS["rounds"]:
        _fail("plan.limit.rounds", f"{len(gor)} rounds in {name} is above the limit of {LIMITS['rounds']}")
    if len(gor):
        if gor[0] != 0:
            _fail("plan.rule5.groupStart", f"{name}.groupOfRound must start at group 0 (got {int(gor[0])})")
        d = np.diff(gor)
        if np.any(d < 0):
            _fail("plan.rule5.groupOrder", f"{name}.groupOfRound must never decrease")
        if np.any(d > 1):
            _fail("plan.rule5.groupGap", f"{name}.groupOfRound skips a group after round {_first(d > 1)}")
    G = ph.groups
    tr = ph.transfers
    n_tr = _same_lengths(tr, f"{name}.transfers")
    _in_range(tr["round"], 0, max(len(gor), 0), f"{S}.round", f"{name}.transfers.round")
    _in_range(tr["src"], 0, W, f"{S}.rank", f"{name}.transfers.src")
    _in_range(tr["dst"], 0, W, f"{S}.rank", f"{name}.transfers.dst")
    if np.any(tr["src"] == tr["dst"]):
        _fail(f"{S}.selfTransfer", f"{name}.transfers row {_first(tr['src'] == tr['dst'])} goes from a rank to itself")
    _check_kinds(tr["kind"], name, f"{name}.transfers")
    _in_range(tr["seq"], 0, nseq, f"{S}.seq", f"{name}.transfers.seq")
    _ranges(tr["seq"], tr["start"], tr["length"], L, f"{name}.transfers", f"{S}.range")
    n_ctr = 0
    if ph.chunk_transfers is not None:
        ct = ph.chunk_transfers
        n_ctr = _same_lengths(ct, f"{name}.chunkTransfers")
        _in_range(ct["round"], 0, max(len(gor), 0), f"{S}.round", f"{name}.chunkTransfers.round")
        _in_range(ct["src"], 0, W, f"{S}.rank", f"{name}.chunkTransfers.src")
        _in_range(ct["dst"], 0, W, f"{S}.rank", f"{name}.chunkTransfers.dst")
        if np.any(ct["src"] == ct["dst"]):
            _fail(f"{S}.selfTransfer", f"{name}.chunkTransfers row {_first(ct['src'] == ct['dst'])} goes from a rank to itself")
        _check_kinds(ct["kind"], name, f"{name}.chunkTransfers")
        _chunk_rows({k: ct[k] for k in ("set", "parts", "part")}, f"{name}.chunkTransfers", ("part",), W, n_sets)
    comp = ph.compute
    n_ops = len(comp["rank"])
    if len(comp["after"]) != n_ops:
        _fail(f"{S}.columns", f"{name}.compute.after has {len(comp['after'])} rows, rank has {n_ops}")
    _in_range(comp["rank"], 0, W, f"{S}.rank", f"{name}.compute.rank")
    _in_range(comp["after"], -1, max(G, 0), f"{S}.after", f"{name}.compute.after")
    _csr(comp["taskOffsets"], n_ops, len(comp["taskIds"]), f"{name}.compute.taskOffsets")
    _in_range(comp["taskIds"], 0, n_tasks, f"{S}.taskId", f"{name}.compute.taskIds")
    if "chunkTaskOffsets" in comp or "chunkTaskIds" in comp:
        if "chunkTaskOffsets" not in comp or "chunkTaskIds" not in comp:
            _fail(f"{S}.columns", f"{name}.compute needs both chunkTaskOffsets and chunkTaskIds")
        _csr(comp["chunkTaskOffsets"], n_ops, len(comp["chunkTaskIds"]), f"{name}.compute.chunkTaskOffsets")
        _in_range(comp["chunkTaskIds"], 0, n_chunk_tasks, f"{S}.taskId", f"{name}.compute.chunkTaskIds")
    sa = ph.send_after
    for t_col, c_col, n_t in (("transfer", "compute", n_tr), ("chunkTransfer", "chunkCompute", n_ctr)):
        tv, cv = sa.get(t_col, np.zeros(0, np.int64)), sa.get(c_col, np.zeros(0, np.int64))
        if len(tv) != len(cv):
            _fail(f"{S}.columns", f"{name}.sendAfter.{t_col} and .{c_col} differ in length")
        _in_range(tv, 0, n_t, f"{S}.transferId", f"{name}.sendAfter.{t_col}")
        _in_range(cv, 0, n_ops, f"{S}.computeId", f"{name}.sendAfter.{c_col}")
        src = (tr["src"] if t_col == "transfer" else ph.chunk_transfers["src"]) if n_t else np.zeros(0, np.int64)
        if len(tv):
            bad = comp["rank"][cv] != src[tv]
            if bad.any():
                i = _first(bad)
                _fail("plan.rule5.sendAfterRank", f"{name}.sendAfter row {i}: compute op {int(cv[i])} is not on the sender of transfer {int(tv[i])}")


def _check_kinds(kind: np.ndarray, phase: str, what: str) -> None:
    ok = (KIND_IN, KIND_KV, KIND_OUT) if phase == "forward" else (KIND_IN, KIND_KV, KIND_OUT, KIND_DKV)
    bad = ~np.isin(kind, ok)
    if bad.any():
        _fail(f"{S}.kind", f"{what}.kind[{_first(bad)}] is dkv, which only the backward phase has")


# ---------------------------------------------------------------------------------------------
# Rules 1-5 on the expanded rows


class _Cuts:
    """Elementary intervals of the batch: every sequence cut at every row boundary."""

    def __init__(self, L: np.ndarray, seqs: List[np.ndarray], starts: List[np.ndarray], ends: List[np.ndarray]):
        self.base = np.concatenate([[0], np.cumsum(L)]).astype(np.int64)
        pts = [self.base]
        for s, a, b in zip(seqs, starts, ends):
            pts.append(self.base[s] + a)
            pts.append(self.base[s] + b)
        self.cuts = np.unique(np.concatenate(pts))
        self.n = len(self.cuts) - 1
        self.seq = np.searchsorted(self.base, self.cuts[:-1], side="right") - 1
        self.lo_tok = self.cuts[:-1] - self.base[self.seq]  # interval start within its sequence
        self.hi_tok = self.cuts[1:] - self.base[self.seq]

    def span(self, seq, start, end) -> Tuple[np.ndarray, np.ndarray]:
        """(row, interval) pairs of rows [start, end) of their sequences."""
        seq, start, end = (np.asarray(x, np.int64) for x in (seq, start, end))
        lo = np.searchsorted(self.cuts, self.base[seq] + start)
        hi = np.searchsorted(self.cuts, self.base[seq] + end)
        n = np.maximum(hi - lo, 0)
        row = np.repeat(np.arange(len(seq)), n)
        if row.size == 0:
            return row, np.zeros(0, np.int64)
        first = np.concatenate([[0], np.cumsum(n)[:-1]])
        return row, lo[row] + np.arange(row.size) - first[row]

    def where(self, e: int) -> str:
        return f"tokens [{int(self.lo_tok[e])}, {int(self.hi_tok[e])}) of sequence {int(self.seq[e])}"


class _Table:
    """Rows of one kind gathered from every rank: columns of equal length."""

    def __init__(self, **cols):
        self.c = {k: np.asarray(v, np.int64) for k, v in cols.items()}

    def __getitem__(self, k):
        return self.c[k]


def _cat(parts: List[dict], keys) -> _Table:
    return _Table(**{k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64) for k in keys})


def _lookup_min(keys: np.ndarray, vals: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each query key, the smallest value of that key in (keys, vals); INF when absent."""
    if keys.size == 0:
        return np.full(query.shape, INF, np.int64)
    o = np.lexsort((vals, keys))
    k, v = keys[o], vals[o]
    first = np.concatenate([[True], k[1:] != k[:-1]])
    uk, uv = k[first], v[first]
    i = np.clip(np.searchsorted(uk, query), 0, len(uk) - 1)
    return np.where(uk[i] == query, uv[i], INF)


def _owner(cuts: _Cuts, rank, seq, start, length, name: str, rule_path: str) -> np.ndarray:
    """Rank holding each interval under a layout; rule 1: exactly one."""
    row, e = cuts.span(seq, start, np.asarray(start) + np.asarray(length))
    cnt = np.bincount(e, minlength=cuts.n)
    if np.any(cnt == 0):
        _fail("plan.rule1.gap", f"{cuts.where(_first(cnt == 0))} have no {name} rank ({rule_path})")
    if np.any(cnt > 1):
        _fail("plan.rule1.overlap", f"{cuts.where(_first(cnt > 1))} have several {name} ranks ({rule_path})")
    own = np.empty(cuts.n, np.int64)
    own[e] = np.asarray(rank, np.int64)[row]
    return own


def _programs(plan: Plan) -> List[RankProgram]:
    return [rank_program(plan, r) for r in range(plan.world)]


def _gather(progs: List[RankProgram], phase: str):
    """Every rank's ops (one row per task of an op) and sent transfers of a phase, with positions."""
    ops, trs = [], []
    for p in progs:
        pp = getattr(p, phase)
        after = np.array([op.after for op in pp.ops], np.int64)
        # prefix max of `after`: an op runs only after every op before it on its rank
        pmax = np.maximum.accumulate(after) if len(after) else after
        for pos, op in enumerate(pp.ops):
            n = len(op.seq)
            ops.append(
                dict(
                    rank=np.full(n, p.rank),
                    pos=np.full(n, pos),
                    after=np.full(n, op.after),
                    seq=op.seq,
                    qs=op.q_start,
                    qe=op.q_start + op.q_length,
                    ks=op.kv_start,
                    ke=op.kv_start + op.kv_length,
                )
            )
        for g in pp.groups:
            m = g.src == p.rank
            n = int(m.sum())
            S_ = g.send_after[m]
            trs.append(
                dict(
                    group=np.full(n, g.index),
                    src=g.src[m],
                    dst=g.dst[m],
                    kind=g.kind[m],
                    seq=g.seq[m],
                    start=g.start[m],
                    end=g.start[m] + g.length[m],
                    sa=S_,
                    # the latest `after` among the ops up to sendAfter (they all run before the send)
                    sa_after=_sa_after(pmax, S_),
                )
            )
    return (
        _cat(ops, ("rank", "pos", "after", "seq", "qs", "qe", "ks", "ke")),
        _cat(trs, ("group", "src", "dst", "kind", "seq", "start", "end", "sa", "sa_after")),
    )


def _sa_after(pmax: np.ndarray, sa: np.ndarray) -> np.ndarray:
    """Latest `after` of the ops up to each sendAfter position (-1 where there is none)."""
    out = np.full(len(sa), -1, np.int64)
    ok = (sa >= 0) & (sa < len(pmax))
    out[ok] = pmax[sa[ok]]
    return out


def _task_membership(plan: Plan, ph: Phase, name: str) -> None:
    """Rule 2: every task (and chunk task) in exactly one op of the phase, an op of its own rank."""
    comp = ph.compute
    n_ops = len(comp["rank"])
    for off_key, id_key, ranks, label in (
        ("taskOffsets", "taskIds", plan.tasks["rank"], "task"),
        ("chunkTaskOffsets", "chunkTaskIds", plan.chunk_tasks["rank"] if plan.chunk_tasks is not None else None, "chunk task"),
    ):
        if ranks is None or off_key not in comp:
            if ranks is not None and len(ranks):
                _fail("plan.rule2.taskNotRun", f"{name}: chunk task 0 is in no compute op")
            continue
        ids = comp[id_key]
        cnt = np.bincount(ids, minlength=len(ranks))
        if np.any(cnt == 0):
            _fail("plan.rule2.taskNotRun", f"{name}: {label} {_first(cnt == 0)} is in no compute op")
        if np.any(cnt > 1):
            _fail("plan.rule2.taskRunTwice", f"{name}: {label} {_first(cnt > 1)} is in {int(cnt.max())} compute ops")
        op_of = np.repeat(np.arange(n_ops), np.diff(comp[off_key]))
        bad = comp["rank"][op_of] != ranks[ids]
        if bad.any():
            i = _first(bad)
            _fail("plan.rule2.opRank", f"{name}: {label} {int(ids[i])} of rank {int(ranks[ids[i]])} is in compute op {int(op_of[i])} of rank {int(comp['rank'][op_of[i]])}")


def check_plan(plan: Plan) -> None:
    """Raises PlanError (the validator's code) unless the plan keeps every rule the runtime relies on.

    Deterministic and the same on every rank; costs about one expansion of every rank's program.
    A plan that passed is marked (`plan.checked`), so checking it again is free.
    """
    if getattr(plan, "checked", False):
        return
    check_structure(plan)
    for name in ("forward", "backward"):
        _task_membership(plan, getattr(plan, name), name)
    progs = _programs(plan)
    fo, ft = _gather(progs, "forward")
    bo, bt = _gather(progs, "backward")
    # Layout rows of every rank (expanded chunk rows included), then the elementary intervals.
    lay = {k: ([], [], [], []) for k in ("user", "home")}
    for p in progs:
        for k, (s, a, n) in (("user", (p.user_seq, p.user_start, p.user_length)), ("home", (p.home_seq, p.home_start, p.home_length))):
            lay[k][0].append(np.full(len(s), p.rank))
            lay[k][1].append(s)
            lay[k][2].append(a)
            lay[k][3].append(n)
    lay = {k: tuple(np.concatenate(v) for v in cols) for k, cols in lay.items()}
    seqs, starts, ends = [], [], []
    for r, s, a, n in lay.values():
        seqs.append(s), starts.append(a), ends.append(a + n)
    for o in (fo, bo):
        seqs += [o["seq"], o["seq"]]
        starts += [o["qs"], o["ks"]]
        ends += [o["qe"], o["ke"]]
    for t in (ft, bt):
        seqs.append(t["seq"]), starts.append(t["start"]), ends.append(t["end"])
    cuts = _Cuts(plan.sequences, seqs, starts, ends)
    user = _owner(cuts, *lay["user"], "user", "userLayout")
    home = _owner(cuts, *lay["home"], "home", "homeLayout")
    _pairs(plan, cuts, fo, home)
    E = cuts.n
    for name, ops, trs in (("forward", fo, ft), ("backward", bo, bt)):
        _phase_rules(plan, name, cuts, E, ops, trs, user, home)
    plan.checked = True  # type: ignore[attr-defined]


def _pairs(plan: Plan, cuts: _Cuts, ops: _Table, home: np.ndarray) -> None:
    """Rule 2: each query's attended keys are covered exactly once by the tasks, on its home rank."""
    row, e = cuts.span(ops["seq"], ops["qs"], ops["qe"])
    if np.any(home[e] != ops["rank"][row]):
        i = _first(home[e] != ops["rank"][row])
        _fail("plan.rule2.notHome", f"a forward task on rank {int(ops['rank'][row[i]])} computes {cuts.where(e[i])}, whose home is rank {int(home[e[i]])}")
    need = cuts.hi_tok if plan.causal else plan.sequences[cuts.seq]
    ks = ops["ks"][row]
    ke = np.minimum(ops["ke"][row], need[e])
    live = ke > ks
    e, ks, ke = e[live], ks[live], ke[live]
    o = np.lexsort((ks, e))
    e, ks, ke = e[o], ks[o], ke[o]
    first = np.concatenate([[True], e[1:] != e[:-1]]) if len(e) else np.zeros(0, bool)
    prev_end = np.concatenate([[0], ke[:-1]])
    prev_end = np.where(first, 0, prev_end)
    covered = np.zeros(cuts.n, bool)
    covered[e] = True
    if not covered.all():
        _fail("plan.rule2.pairMissing", f"no task computes the queries of {cuts.where(_first(~covered))}")
    if np.any(ks > prev_end):
        i = _first(ks > prev_end)
        _fail("plan.rule2.pairMissing", f"keys [{int(prev_end[i])}, {int(ks[i])}) of the queries of {cuts.where(e[i])} are in no task")
    if np.any(ks < prev_end):
        i = _first(ks < prev_end)
        _fail("plan.rule2.pairOverlap", f"keys from {int(ks[i])} of the queries of {cuts.where(e[i])} are in two tasks")
    last = np.concatenate([e[1:] != e[:-1], [True]]) if len(e) else np.zeros(0, bool)
    short = last & (ke < need[e])
    if short.any():
        i = _first(short)
        _fail("plan.rule2.pairMissing", f"keys [{int(ke[i])}, {int(need[e[i]])}) of the queries of {cuts.where(e[i])} are in no task")


def _phase_rules(plan: Plan, name: str, cuts: _Cuts, E: int, ops: _Table, trs: _Table, user, home) -> None:
    W = plan.world
    bwd = name == "backward"
    tpath = f"{name}.transfers"
    # rule 5: a send never waits for an op that waits for its own group or a later one
    bad = (trs["sa"] >= 0) & (trs["sa_after"] >= trs["group"])
    if bad.any():
        i = _first(bad)
        _fail("plan.rule5.deadlock", f"{tpath}: a transfer of group {int(trs['group'][i])} from rank {int(trs['src'][i])} sends after an op that waits for group {int(trs['sa_after'][i])}")
    trow, te = cuts.span(trs["seq"], trs["start"], trs["end"])
    kind, src, dst, grp = trs["kind"][trow], trs["src"][trow], trs["dst"][trow], trs["group"][trow]
    sa = trs["sa"][trow]
    # Arrivals: (rank, interval) -> first group bringing Q (dO) or K/V.
    key = dst * E + te
    m_in = kind == KIND_IN
    kv_kinds = (kind == KIND_KV) | (m_in if not bwd else np.zeros_like(m_in))
    # inNotHome / senderMissing of `in`: sent by the user rank or by a relay that received it as
    # `in` in an earlier group; received by the home or by a relay that sends it on (FCP's two-hop
    # `in` across nodes).
    got = _lookup_min(key[m_in], grp[m_in], src * E + te)
    bad = m_in & (src != user[te]) & (got >= grp)
    if bad.any():
        i = _first(bad)
        _fail("plan.rule3.senderMissing", f"{tpath}: rank {int(src[i])} sends `in` of {cuts.where(te[i])}, whose user rank is {int(user[te[i]])}, without receiving it first")
    sends_on = _lookup_min((src * E + te)[m_in], grp[m_in], dst * E + te) < INF
    bad = m_in & (dst != home[te]) & ~sends_on
    if bad.any():
        i = _first(bad)
        _fail("plan.rule3.inNotHome", f"{tpath}: `in` of {cuts.where(te[i])} goes to rank {int(dst[i])}, not its home {int(home[te[i]])}, which does not send it on")
    # Op data: Q (forward) / dO (backward) at the op's rank by its `after`.
    orow, oe = cuts.span(ops["seq"], ops["qs"], ops["qe"])
    r_, a_ = ops["rank"][orow], ops["after"][orow]
    arr = _lookup_min(key[m_in], grp[m_in], r_ * E + oe)
    bad = (user[oe] != r_) & (arr > a_)
    if bad.any():
        i = _first(bad)
        what = "dO" if bwd else "Q"
        _fail("plan.rule3.qMissing", f"{name}: an op of rank {int(r_[i])} waiting for group {int(a_[i])} needs {what} of {cuts.where(oe[i])}, which arrives {'never' if arr[i] >= INF else f'in group {int(arr[i])}'}")
    # K/V: local (user; in the backward also home, kept from the forward) or fetched in time.
    krow, ke_ = cuts.span(ops["seq"], ops["ks"], ops["ke"])
    r_, a_ = ops["rank"][krow], ops["after"][krow]
    local = (user[ke_] == r_) | ((home[ke_] == r_) if bwd else False)
    arr = _lookup_min(key[kv_kinds], grp[kv_kinds], r_ * E + ke_)
    bad = ~local & (arr > a_)
    if bad.any():
        i = _first(bad)
        _fail("plan.rule3.kvMissing", f"{name}: an op of rank {int(r_[i])} waiting for group {int(a_[i])} needs K/V of {cuts.where(ke_[i])}, which arrives {'never' if arr[i] >= INF else f'in group {int(arr[i])}'}")
    # Senders of `kv` hold the K/V before their group.
    m_kv = kind == KIND_KV
    if m_kv.any():
        s_local = (user[te] == src) | ((home[te] == src) if bwd else False)
        s_arr = _lookup_min(key[kv_kinds], grp[kv_kinds], src * E + te)
        bad = m_kv & ~s_local & (s_arr >= grp)
        if bad.any():
            i = _first(bad)
            _fail("plan.rule3.senderMissing", f"{tpath}: rank {int(src[i])} sends K/V of {cuts.where(te[i])} in group {int(grp[i])} without holding it")
    # rule 4, `out`: from the home rank, to the user rank, exactly once, after the last op with
    # those queries (forward O; backward dQ, and dK/dV complete: see _dkv_flow). One relay may sit
    # between (FCP's two-hop `out` across nodes): the home sends to a rank that received nothing
    # else of it and sends it on to the user rank in a later group.
    m_out = kind == KIND_OUT
    from_home = m_out & (src == home[te])
    got = _lookup_min(key[m_out], grp[m_out], src * E + te)
    bad = m_out & ~from_home & (got >= grp)
    if bad.any():
        i = _first(bad)
        _fail("plan.rule3.senderMissing", f"{tpath}: `out` of {cuts.where(te[i])} leaves rank {int(src[i])}, not its home {int(home[te[i]])}, which did not receive it first")
    to_user = m_out & (dst == user[te])
    sends_on = _lookup_min((src * E + te)[to_user], grp[to_user], dst * E + te) < INF
    bad = m_out & ~to_user & ~(from_home & sends_on)
    if bad.any():
        i = _first(bad)
        _fail("plan.rule4.outNotUser", f"{tpath}: `out` of {cuts.where(te[i])} goes to rank {int(dst[i])}, not its user rank {int(user[te[i]])} nor a relay that sends it on")
    n_out = np.bincount(te[to_user], minlength=E)
    need_out = user != home
    if np.any(need_out & (n_out == 0)):
        _fail("plan.rule4.outMissing", f"{name}: {cuts.where(_first(need_out & (n_out == 0)))} never reach their user rank (no `out`)")
    if np.any(n_out > 1):
        _fail("plan.rule4.outDuplicate", f"{name}: {cuts.where(_first(n_out > 1))} are sent `out` {int(n_out.max())} times")
    last_q = np.full(E, -1, np.int64)
    np.maximum.at(last_q, oe, ops["pos"][orow])
    bad = from_home & (sa < last_q[te])
    if bad.any():
        i = _first(bad)
        _fail("plan.rule4.outEarly", f"{tpath}: `out` of {cuts.where(te[i])} in group {int(grp[i])} leaves before op {int(last_q[te[i]])} of rank {int(src[i])} finished it (its sendAfter is {int(sa[i])})")
    if bwd:
        _dkv_flow(plan, cuts, E, ops, trow, te, kind, src, dst, grp, sa, home, user, tpath)


def _dkv_flow(plan, cuts: _Cuts, E: int, ops: _Table, trow, te, kind, src, dst, grp, sa, home, user, tpath) -> None:
    """Rule 4 for dK/dV: each op's partial of each key interval follows its `dkv` pushes to the key's
    home, exactly once, and is there before the key's `out` leaves (semantics: validate-outputs.ts)."""
    # Contributions: backward op tasks x the key intervals they attend.
    kae = np.minimum(ops["ke"], ops["qe"]) if plan.causal else ops["ke"]
    crow, ce = cuts.span(ops["seq"], ops["ks"], kae)
    c_rank, c_pos, c_after = ops["rank"][crow], ops["pos"][crow], ops["after"][crow]
    m = kind == KIND_DKV
    p_src, p_dst, p_grp, p_sa, p_e = src[m], dst[m], grp[m], sa[m], te[m]
    # two pushes of one partial in one group
    pk = (p_src * E + p_e) * (int(p_grp.max(initial=0)) + 2) + p_grp
    u, cnt = np.unique(pk, return_counts=True)
    if np.any(cnt > 1):
        j = _first(np.isin(pk, u[cnt > 1]))
        _fail("plan.rule4.dkvDuplicate", f"{tpath}: rank {int(p_src[j])} pushes the dK/dV partial of {cuts.where(p_e[j])} twice in group {int(p_grp[j])}")
    # Pushes sorted by (rank, interval, group): a contribution at (rank, interval) leaves with the
    # first push from there whose group and sendAfter take it.
    o = np.lexsort((p_grp, p_e, p_src))
    p_src, p_dst, p_grp, p_sa, p_e = p_src[o], p_dst[o], p_grp[o], p_sa[o], p_e[o]
    pkey = p_src * E + p_e
    # race: an op after a push's sendAfter that may run before the push (its `after` < the group)
    if len(pkey) and len(ce):
        ckey = c_rank * E + ce
        lo = np.searchsorted(pkey, ckey, "left")
        hi = np.searchsorted(pkey, ckey, "right")
        n = hi - lo
        rr = np.repeat(np.arange(len(ckey)), n)
        if rr.size:
            j = lo[rr] + np.arange(rr.size) - np.concatenate([[0], np.cumsum(n)[:-1]])[rr]
            bad = (c_pos[rr] > p_sa[j]) & (c_after[rr] < p_grp[j])
            if bad.any():
                i = _first(bad)
                _fail("plan.rule4.dkvRace", f"{tpath}: op {int(c_pos[rr[i]])} of rank {int(c_rank[rr[i]])} may add to the dK/dV partial of {cuts.where(ce[rr[i]])} while group {int(p_grp[j[i]])} pushes it")
    # Follow every contribution: first hop from its op's rank needs a push with sendAfter >= pos;
    # then, from a receiving rank, the first push in a later group (incoming partials always move).
    at = c_rank.copy()
    when = np.full(len(ce), -1, np.int64)  # group it arrived in at `at` (-1: local)
    local = np.ones(len(ce), bool)
    G = int(p_grp.max(initial=-1)) + 1
    for _hop in range(G + 1):
        if len(pkey) == 0:
            break
        key = at * E + ce
        lo = np.searchsorted(pkey, key, "left")
        hi = np.searchsorted(pkey, key, "right")
        # candidate pushes from `at` for this interval: group > when; if local, sendAfter >= pos
        nxt = np.full(len(ce), -1, np.int64)
        todo = np.nonzero(hi > lo)[0]
        for k in range(int((hi - lo).max(initial=0))):
            j = lo[todo] + k
            ok = j < hi[todo]
            idx, j = todo[ok], j[ok]
            free = nxt[idx] < 0
            idx, j = idx[free], j[free]
            take = (p_grp[j] > when[idx]) & (~local[idx] | (p_sa[j] >= c_pos[idx]))
            nxt[idx[take]] = j[take]
        moved = nxt >= 0
        if not moved.any():
            break
        j = nxt[moved]
        at[moved] = p_dst[j]
        when[moved] = p_grp[j]
        local[moved] = False
    bad = at != home[ce]
    if bad.any():
        i = _first(bad)
        _fail("plan.rule4.dkvLost", f"{tpath}: the dK/dV partial of {cuts.where(ce[i])} from op {int(c_pos[i])} of rank {int(c_rank[i])} ends on rank {int(at[i])}, not the key's home {int(home[ce[i]])}")
    # The key's `out` (user != home) must leave its home after every partial arrived and every
    # local op ran (a relay's hop follows it).
    m_out = (kind == KIND_OUT) & (src == home[te])
    out_grp = np.full(E, INF, np.int64)
    out_sa = np.full(E, INF, np.int64)
    out_grp[te[m_out]] = grp[m_out]
    out_sa[te[m_out]] = sa[m_out]
    has_out = out_grp[ce] < INF
    late = has_out & ((~local & (when >= out_grp[ce])) | (local & (c_pos > out_sa[ce])))
    if late.any():
        i = _first(late)
        _fail("plan.rule4.outEarly", f"{tpath}: `out` of {cuts.where(ce[i])} leaves in group {int(out_grp[ce[i]])} before the dK/dV partial of op {int(c_pos[i])} of rank {int(c_rank[i])} reached it")


def check_world(plan: Plan, world: int, what: str = "the process group") -> None:
    """`run.world` unless the plan is for `world` ranks (raised before any collective call)."""
    if plan.world != world:
        _fail("run.world", f"the plan is for {plan.world} ranks but {what} has {world}; plan for {world} ranks")

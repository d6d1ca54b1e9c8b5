"""Small synthetic plans for the Python tests (test fixtures, not planners of the product).

- `owner_plan`: random home layout (user -> home reshuffle with `in`/`out`), tasks cut at random key
  boundaries (so kernels see partly masked tasks), `kv` fetches from the key's home, backward `dkv`
  pushes to the key's home.
- `chunk_plan`: the same shape of plan written with compact chunk rows only (every sequence cut into
  2N parts, rank r holds parts r and 2N-1-r, ring-like fetches), including empty parts.
"""
from __future__ import annotations

import json
import random
from typing import Dict, List, Tuple


def attended(causal: bool, qs: int, ql: int, ks: int, kl: int) -> int:
    n = 0
    for q in range(qs, qs + ql):
        if causal:
            n += max(0, min(ks + kl, q + 1) - ks)
        else:
            n += kl
    return n


def even_user(seqs: List[int], world: int) -> List[Tuple[int, int, int, int]]:
    total = sum(seqs)
    rows = []
    s = off = 0
    for r in range(world):
        need = (r + 1) * total // world - r * total // world
        while need > 0:
            take = min(need, seqs[s] - off)
            rows.append((r, s, off, take))
            need -= take
            off += take
            if off == seqs[s]:
                s += 1
                off = 0
    return rows


def _cols(rows, names):
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _rounds(edges: List[Tuple[int, int]]) -> List[int]:
    """Greedy rounds: each rank sends <= 1 and receives <= 1 per round."""
    sb: Dict[int, set] = {}
    rb: Dict[int, set] = {}
    out = []
    for s, d in edges:
        k = 0
        while k in sb.setdefault(s, set()) or k in rb.setdefault(d, set()):
            k += 1
        sb[s].add(k)
        rb[d].add(k)
        out.append(k)
    return out


def _split_ranges(seqs, world, rng) -> List[Tuple[int, int, int, int]]:
    rows = []
    for s, L in enumerate(seqs):
        cuts = sorted(set([0, L] + [rng.randrange(1, L) for _ in range(rng.randint(0, 3))] if L > 1 else [0, L]))
        for a, b in zip(cuts, cuts[1:]):
            rows.append((rng.randrange(world), s, a, b - a))
    return rows


def _intersect(a0, a1, b0, b1):
    lo, hi = max(a0, b0), min(a1, b1)
    return (lo, hi - lo) if hi > lo else None


def owner_plan(seqs: List[int], world: int, seed: int = 1, mask: str = "causal", H=4, Hk=2, D=16) -> dict:
    rng = random.Random(seed)
    causal = mask == "causal"
    user = even_user(seqs, world)
    home = _split_ranges(seqs, world, rng)
    # Reshuffle pieces: intersections of user and home rows on different ranks.
    moves = []  # (user rank, home rank, seq, start, len)
    for ur, us, ua, ul in user:
        for hr, hs, ha, hl in home:
            if us == hs and ur != hr:
                x = _intersect(ua, ua + ul, ha, ha + hl)
                if x:
                    moves.append((ur, hr, us, x[0], x[1]))
    # Tasks: each home row's queries against key ranges cut at random points.
    tasks = []  # (rank, seq, qs, ql, ks, kl, key home rank)
    for hr, hs, ha, hl in home:
        for kr, ks_, ka, kl in home:
            if ks_ != hs:
                continue
            cuts = sorted(set([ka, ka + kl] + ([rng.randrange(ka + 1, ka + kl)] if kl > 1 and rng.random() < 0.5 else [])))
            for a, b in zip(cuts, cuts[1:]):
                if attended(causal, ha, hl, a, b - a) > 0:
                    tasks.append((hr, hs, ha, hl, a, b - a, kr))
    # kv fetches: (key home -> task rank) for each distinct (task rank, key piece)
    fetch = {}
    for t in tasks:
        if t[6] != t[0]:
            fetch.setdefault((t[6], t[0], t[1], t[4], t[5]), None)
    fetch = list(fetch)

    def phase(backward: bool):
        transfers = []  # (round, src, dst, kind, seq, start, len)
        group_of_round = []
        # group 0: in
        r_in = _rounds([(m[0], m[1]) for m in moves])
        for m, r in zip(moves, r_in):
            transfers.append((r, m[0], m[1], "in", m[2], m[3], m[4]))
        n0 = max(r_in, default=-1) + 1
        group_of_round += [0] * n0
        # group 1: kv
        r_kv = _rounds([(f[0], f[1]) for f in fetch])
        for f, r in zip(fetch, r_kv):
            transfers.append((n0 + r, f[0], f[1], "kv", f[2], f[3], f[4]))
        n1 = max(r_kv, default=-1) + 1
        group_of_round += [1] * n1
        g_in = 0 if n0 else -1
        g_kv = 1 if n1 else g_in
        # ops per rank: local (after g_in), fetched (after g_kv)
        ops = []  # (rank, after, [task ids])
        last_op = {}
        for r in range(world):
            loc = [i for i, t in enumerate(tasks) if t[0] == r and t[6] == r]
            rem = [i for i, t in enumerate(tasks) if t[0] == r and t[6] != r]
            for ids, after in ((loc, g_in), (rem, g_kv)):
                if ids:
                    last_op[r] = len(ops)
                    ops.append((r, max(after, -1), ids))
        sa = []
        nr = len(group_of_round)
        g_next = max(group_of_round, default=-1) + 1
        if backward:
            # One push per (sender, home, sequence) range union: two pushes of one partial in one
            # group would move it twice (plan.rule4.dkvDuplicate).
            spans: Dict[Tuple[int, int, int], List[List[int]]] = {}
            for f in sorted(fetch, key=lambda f: (f[1], f[0], f[2], f[3])):
                cur = spans.setdefault((f[1], f[0], f[2]), [])
                if cur and f[3] <= cur[-1][1]:
                    cur[-1][1] = max(cur[-1][1], f[3] + f[4])
                else:
                    cur.append([f[3], f[3] + f[4]])
            pushes = [(a, b, s, x, y - x) for (a, b, s), rs in spans.items() for x, y in rs]
            r_p = _rounds([(p[0], p[1]) for p in pushes])
            for p, r in zip(pushes, r_p):
                sa.append((len(transfers), last_op[p[0]]))
                transfers.append((nr + r, p[0], p[1], "dkv", p[2], p[3], p[4]))
            np_ = max(r_p, default=-1) + 1
            group_of_round += [g_next] * np_
            nr += np_
            g_next += 1 if np_ else 0
        outs = [(m[1], m[0], m[2], m[3], m[4]) for m in moves]
        r_o = _rounds([(o[0], o[1]) for o in outs])
        for o, r in zip(outs, r_o):
            if o[0] in last_op:
                sa.append((len(transfers), last_op[o[0]]))
            transfers.append((nr + r, o[0], o[1], "out", o[2], o[3], o[4]))
        group_of_round += [g_next] * (max(r_o, default=-1) + 1)
        offs = [0]
        ids = []
        for op in ops:
            ids += op[2]
            offs.append(len(ids))
        return {
            "transfers": _cols(transfers, ("round", "src", "dst", "kind", "seq", "start", "length")),
            "groupOfRound": group_of_round,
            "compute": {"rank": [o[0] for o in ops], "after": [o[1] for o in ops], "taskOffsets": offs, "taskIds": ids},
            "sendAfter": {"transfer": [s[0] for s in sa], "compute": [s[1] for s in sa]},
        }

    return {
        "format": "fcp-plan/1",
        "strategy": "synthetic-owner",
        "world": world,
        "mask": mask,
        "model": {"qHeads": H, "kvHeads": Hk, "headDim": D, "bytesPerElement": 4},
        "sequences": list(seqs),
        "userLayout": _cols(user, ("rank", "seq", "start", "length")),
        "homeLayout": _cols(home, ("rank", "seq", "start", "length")),
        "tasks": _cols([t[:6] for t in tasks], ("rank", "seq", "qStart", "qLength", "kvStart", "kvLength")),
        "forward": phase(False),
        "backward": phase(True),
    }


def part_range(L: int, P: int, i: int):
    c = -(-L // P)
    a, b = i * c, min((i + 1) * c, L)
    return (a, b - a) if b > a else None


def chunk_plan(seqs: List[int], world: int, mask: str = "causal", H=4, Hk=2, D=16) -> dict:
    """Ring-like plan in chunk rows only: one set of all sequences, P = 2N parts."""
    N, P = world, 2 * world
    causal = mask == "causal"
    owner = {}
    for r in range(N):
        owner[r] = r
        owner[P - 1 - r] = r
    chunk_layout = [(owner[p], 0, P, p) for p in range(P)]
    ctasks = []
    for qp in range(P):
        for kp in range(P):
            if causal and kp > qp:
                continue
            ctasks.append((owner[qp], 0, P, qp, kp))
    fetch = sorted({(owner[kp], owner[qp], kp) for (_, _, _, qp, kp) in ctasks if owner[kp] != owner[qp]})

    def phase(backward: bool):
        rounds = _rounds([(f[0], f[1]) for f in fetch])
        ct = [(r, f[0], f[1], "kv", 0, P, f[2]) for f, r in zip(fetch, rounds)]
        nr = max(rounds, default=-1) + 1
        gor = list(range(nr))  # one group per round
        ops = []
        last = {}
        for r in range(N):
            loc = [i for i, t in enumerate(ctasks) if t[0] == r and owner[t[4]] == r]
            if loc:
                last[r] = len(ops)
                ops.append((r, -1, loc))
            for g in range(nr):
                got = {f[2] for f, rr in zip(fetch, rounds) if rr == g and f[1] == r}
                ids = [i for i, t in enumerate(ctasks) if t[0] == r and t[4] in got]
                if ids:
                    last[r] = len(ops)
                    ops.append((r, g, ids))
        sa = []
        if backward:
            pushes = [(f[1], f[0], f[2]) for f in fetch]
            pr = _rounds([(p[0], p[1]) for p in pushes])
            for p, r in zip(pushes, pr):
                sa.append((len(ct), last[p[0]]))
                ct.append((nr + r, p[0], p[1], "dkv", 0, P, p[2]))
            gor += [nr] * (max(pr, default=-1) + 1)
        offs, ids = [0], []
        for op in ops:
            ids += op[2]
            offs.append(len(ids))
        return {
            "transfers": {k: [] for k in ("round", "src", "dst", "kind", "seq", "start", "length")},
            "groupOfRound": gor,
            "compute": {
                "rank": [o[0] for o in ops],
                "after": [o[1] for o in ops],
                "taskOffsets": [0] * (len(ops) + 1),
                "taskIds": [],
                "chunkTaskOffsets": offs,
                "chunkTaskIds": ids,
            },
            "chunkTransfers": _cols(ct, ("round", "src", "dst", "kind", "set", "parts", "part")),
            "sendAfter": {"transfer": [], "compute": [], "chunkTransfer": [s[0] for s in sa], "chunkCompute": [s[1] for s in sa]},
        }

    empty_layout = {k: [] for k in ("rank", "seq", "start", "length")}
    return {
        "format": "fcp-plan/1",
        "strategy": "synthetic-chunks",
        "world": world,
        "mask": mask,
        "model": {"qHeads": H, "kvHeads": Hk, "headDim": D, "bytesPerElement": 4},
        "sequences": list(seqs),
        "userLayout": empty_layout,
        "homeLayout": empty_layout,
        "tasks": {k: [] for k in ("rank", "seq", "qStart", "qLength", "kvStart", "kvLength")},
        "seqSets": {"offsets": [0, len(seqs)], "seqs": list(range(len(seqs)))},
        "homeChunks": _cols(chunk_layout, ("rank", "set", "parts", "part")),
        "userChunks": _cols(chunk_layout, ("rank", "set", "parts", "part")),
        "chunkTasks": _cols(ctasks, ("rank", "set", "parts", "qPart", "kvPart")),
        "forward": phase(False),
        "backward": phase(True),
    }


def write(plan: dict, path: str) -> str:
    with open(path, "w") as f:
        json.dump(plan, f)
    return path

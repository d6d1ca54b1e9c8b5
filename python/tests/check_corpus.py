"""Single-row corruptions of valid plans, checked by fcp_torch.check (for a differential test).

    /usr/bin/python3 -m tests.check_corpus --plans DIR --out OUT [--per-table 6] [--seed 1]   (cwd: python/)

For every plan file in DIR (valid plans written by the TypeScript planners), writes seeded
corruptions to OUT (a transfer dropped with its sendAfter pairs renumbered, a sendAfter pair
dropped, an op's `after` or a transfer's round moved by one, a transfer shortened or sent from
rank -1, a layout or task row moved to another rank, a task shortened, query heads 5 over 2
KV heads, and the plan unchanged), then prints one JSON object {file: code}: the PlanError code of
`read_plan` + `check_plan`, or "VALID". test/executors/torch-check.test.ts validates the same files
with the TypeScript validator: every plan it rejects must be refused here, every plan it accepts
accepted. Uses Python's `random` with a fixed seed (fixtures, not product randomness).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys


def _drop_row(t: dict, i: int) -> None:
    for c in t.values():
        if isinstance(c, list) and len(c) > i:
            del c[i]


def corruptions(base: dict, rnd: random.Random, k: int):
    """(name, plan) pairs of single corruptions of `base`."""
    W = base["world"]
    for ph in ("forward", "backward"):
        tr = base[ph]["transfers"]
        nt = len(tr["round"])
        for i in rnd.sample(range(nt), min(nt, 2 * k)):
            p = copy.deepcopy(base)
            _drop_row(p[ph]["transfers"], i)
            sa = p[ph].setdefault("sendAfter", {"transfer": [], "compute": []})
            keep = [j for j, x in enumerate(sa["transfer"]) if x != i]
            sa["compute"] = [sa["compute"][j] for j in keep]
            sa["transfer"] = [sa["transfer"][j] - (sa["transfer"][j] > i) for j in keep]
            yield f"{ph}-drop-{tr['kind'][i]}-{i}", p
        sa = base[ph].get("sendAfter") or {"transfer": []}
        ns = len(sa["transfer"])
        for j in rnd.sample(range(ns), min(ns, k)):
            p = copy.deepcopy(base)
            _drop_row(p[ph]["sendAfter"], j)
            yield f"{ph}-drop-sendAfter-{j}", p
        comp = base[ph]["compute"]
        G = max(base[ph]["groupOfRound"] or [-1]) + 1
        for j in rnd.sample(range(len(comp["rank"])), min(len(comp["rank"]), k // 2 + 1)):
            for d in (-1, 1):
                p = copy.deepcopy(base)
                a = p[ph]["compute"]["after"][j] + d
                if -1 <= a < G:
                    p[ph]["compute"]["after"][j] = a
                    yield f"{ph}-op{j}-after{d:+d}", p
        for i in rnd.sample(range(nt), min(nt, k // 2 + 1)):
            for d in (-1, 1):
                p = copy.deepcopy(base)
                r = p[ph]["transfers"]["round"][i] + d
                if 0 <= r < len(p[ph]["groupOfRound"]):
                    p[ph]["transfers"]["round"][i] = r
                    yield f"{ph}-transfer{i}-round{d:+d}", p
            p = copy.deepcopy(base)
            p[ph]["transfers"]["length"][i] = max(0, p[ph]["transfers"]["length"][i] - 1)
            yield f"{ph}-transfer{i}-shorter", p
            p = copy.deepcopy(base)
            p[ph]["transfers"]["src"][i] = -1
            yield f"{ph}-transfer{i}-src-1", p
    for tab in ("userLayout", "homeLayout", "tasks"):
        n = len(base[tab]["rank"])
        for i in rnd.sample(range(n), min(n, k // 2 + 1)):
            p = copy.deepcopy(base)
            p[tab]["rank"][i] = (p[tab]["rank"][i] + 1) % W
            yield f"{tab}{i}-rank+1", p
            if tab == "tasks":
                for col in ("qLength", "kvLength"):
                    p = copy.deepcopy(base)
                    p[tab][col][i] = max(1, p[tab][col][i] - 1)
                    yield f"task{i}-{col}-1", p
    p = copy.deepcopy(base)
    p["model"]["qHeads"], p["model"]["kvHeads"] = 5, 2
    yield "heads-5-2", p
    yield "unchanged", copy.deepcopy(base)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tests.check_corpus")
    ap.add_argument("--plans", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-table", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    from fcp_torch.check import check_plan
    from fcp_torch.plan import PlanError, read_plan

    rnd = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    codes = {}
    for f in sorted(os.listdir(a.plans)):
        with open(os.path.join(a.plans, f)) as fh:
            base = json.load(fh)
        for name, p in corruptions(base, rnd, a.per_table):
            path = os.path.join(a.out, f"{f[:-5]}--{name}.json")
            with open(path, "w") as fh:
                json.dump(p, fh)
            try:
                check_plan(read_plan(path))
                codes[os.path.basename(path)] = "VALID"
            except PlanError as e:
                codes[os.path.basename(path)] = e.code
    print(json.dumps(codes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

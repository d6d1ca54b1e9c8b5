"""CPU count of a replay rank's partial rows, before and after fusing adjacent tasks (no GPU).

For one plan and rank: the forward launches' query rows (each a partial of its slot), the slots
where two or more meet (float32 accumulator rows), the launch-slot pairs (accumulator reads and
writes by the merges), and the backward's dQ and dK/dV rows added into float32, with the runtime's
launch planning (`kernel=auto`, square pieces, cuDNN and flash both taken as available), once
without and once with `fuse_tasks` (fusion.py), and per window of W = 1, 2, 4, 8 ops (deferred.py)
the accumulator rows touched, the most partial rows held and the bytes moved (bf16 partial read
plus float32 accumulator read and write). Usage:

    python3 scripts/gpu/count-partials.py scripts/gpu/plans/replay-fcp-256.json.gz [rank]
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from fcp_torch.fusion import fuse_ops  # noqa: E402 - the script runs from the repository root
from fcp_torch.kernels import decompose, plan_launches  # noqa: E402
from fcp_torch.plan import read_plan, rank_program  # noqa: E402
from fcp_torch.replay import pick_ranks, rank_pairs  # noqa: E402
from fcp_torch.spaces import TokenSpace  # noqa: E402


def counts(prog, ops_by_phase, H: int, D: int) -> dict:
    base = (
        np.concatenate([prog.user_seq, prog.home_seq]),
        np.concatenate([prog.user_start, prog.home_start]),
        np.concatenate([prog.user_length, prog.home_length]),
    )
    qspace = TokenSpace(*base)
    out = {}
    avail = {"math": True, "flash": True, "cudnn": True}
    for ph, ops in ops_by_phase.items():
        seqs = [base[0]] + [o.seq for o in ops]
        kvs = TokenSpace(np.concatenate(seqs), np.concatenate([base[1]] + [o.kv_start for o in ops]), np.concatenate([base[2]] + [o.kv_length for o in ops]))
        qrows, krows, lslot, nl, tasks = [], 0, 0, 0, 0
        op_rows = []
        shapes = {}
        for op in ops:
            op_rows.append([])
            tasks += len(op.seq)
            p = decompose(op.seq, op.q_start, op.q_length, op.kv_start, op.kv_length, prog.causal, "square")
            L = plan_launches(p, qspace.locate(p.seq, p.q0, p.lq), kvs.locate(p.seq, p.k0, p.lk), "auto", "cpu", avail)
            for la in L:
                q = la.qidx.numpy()
                qrows.append(q)
                op_rows[-1].append(q)
                lslot += len(np.unique(q))
                krows += len(la.kidx)
                nl += 1
                key = f"{la.kernel}:{int(la.lq.max())}x{int(la.lk.max())}{'c' if la.causal else ''}"
                shapes[key] = shapes.get(key, 0) + 1
        allq = np.concatenate(qrows) if qrows else np.zeros(0, np.int64)
        cnt = np.bincount(allq, minlength=qspace.size)
        acc_slots = int((cnt >= 2).sum())
        r = {"tasks": tasks, "launches": nl, "partial_rows": int(len(allq)), "query_slots": int((cnt > 0).sum()),
             "acc_slots": acc_slots, "launch_slot_pairs": int(lslot), "kv_rows": int(krows), "distinct_shapes": len(shapes)}
        # deferred merges / adds over windows of W consecutive ops: accumulator rows touched once per
        # window; held = most partial rows waiting in one window
        multi_slots = np.nonzero(cnt >= 2)[0] if ph == "forward" else np.arange(qspace.size)
        win = {}
        for W in (1, 2, 4, 8):
            pairs, held = 0, 0
            for a in range(0, len(op_rows), W):
                rows = [q for o in op_rows[a : a + W] for q in o]
                if not rows:
                    continue
                u = np.unique(np.concatenate(rows))
                pairs += int(np.isin(u, multi_slots).sum())
                held = max(held, sum(len(q) for q in rows))
            win[W] = {"acc_pairs": pairs, "held_rows": held, "gb": (int(len(allq)) * 2 + pairs * 8) * H * D / 1e9}
        r["windows"] = win
        if ph == "forward":
            # merge traffic (Triton merge: bf16 partial read, float32 accumulator read + write, per launch slot)
            multi = cnt >= 2
            prow = int(np.isin(allq, np.nonzero(multi)[0]).sum())
            r["merge_gb"] = (prow * 2 + lslot * 8) * H * D / 1e9
        else:
            # float32 adds: dQ rows (H heads) and dK/dV rows (Hk heads), read + write float32 + read bf16
            r["add_rows_q"] = int(len(allq))
            r["add_rows_kv"] = int(krows)
        out[ph] = r
    return out


def main() -> None:
    path = sys.argv[1]
    plan = read_plan(path)
    rank = int(sys.argv[2]) if len(sys.argv) > 2 else pick_ranks(rank_pairs(plan))["heaviest"]
    prog = rank_program(plan, rank)
    before = counts(prog, {"forward": prog.forward.ops, "backward": prog.backward.ops}, prog.q_heads, prog.head_dim)
    after = counts(prog, {"forward": fuse_ops(prog.forward.ops), "backward": fuse_ops(prog.backward.ops)}, prog.q_heads, prog.head_dim)
    print(json.dumps({"plan": os.path.basename(path), "rank": rank, "before": before, "after": after}, indent=1))


if __name__ == "__main__":
    main()

"""Several attention layers sharing one FcpAttention, trained on W gloo processes, against one process.

    /usr/bin/python3 -m tests.dist_layers --plan plan.json --layers 3 --steps 3   (cwd: python/)

The parent starts W = plan.world worker processes (torchrun is broken on Debian), each holding its
user tokens of the plan; all layers of its model call ONE FcpAttention object (one plan per batch,
the way a user writes it). Parameter gradients are summed over the ranks (every token's loss is
counted once). The parent then trains the same model, same seed, in one process with plain
attention over each whole sequence, and prints one JSON line: per-step losses of both and the
largest relative gradient error (||g - g_ref|| / ||g_ref|| per parameter tensor).

Issue 11 item 1 (a runtime keeping one forward state per object gives relative errors of 0.8-0.99
here). Kept as a tool: CI checks the same property with examples/train.py --world 4
(test/executors/torch-example.test.ts), which saves one launch of processes.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from typing import Dict, List

import torch

DIM = 32


class Model(torch.nn.Module):
    """Residual attention layers: h += Wo(attn(Wq h, Wk h, Wv h)); tanh between layers."""

    def __init__(self, layers: int, H: int, Hk: int, D: int, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        init = lambda *s: torch.nn.Parameter(torch.randn(*s, generator=g) / math.sqrt(s[0]))  # noqa: E731
        self.H, self.Hk, self.D = H, Hk, D
        self.wq = torch.nn.ParameterList([init(DIM, H * D) for _ in range(layers)])
        self.wk = torch.nn.ParameterList([init(DIM, Hk * D) for _ in range(layers)])
        self.wv = torch.nn.ParameterList([init(DIM, Hk * D) for _ in range(layers)])
        self.wo = torch.nn.ParameterList([init(H * D, DIM) for _ in range(layers)])

    def forward(self, h: torch.Tensor, attn) -> torch.Tensor:
        n = h.shape[0]
        for wq, wk, wv, wo in zip(self.wq, self.wk, self.wv, self.wo):
            q = (h @ wq).view(n, self.H, self.D)
            k = (h @ wk).view(n, self.Hk, self.D)
            v = (h @ wv).view(n, self.Hk, self.D)
            h = torch.tanh(h + attn(q, k, v).reshape(n, -1) @ wo)
        return h


def plain_attention(lengths: List[int], causal: bool):
    """Attention of each whole sequence of a concatenated batch, float32 math (the reference)."""

    def attn(q, k, v):
        out, pos = [], 0
        for L in lengths:
            qs, ks, vs = q[pos : pos + L], k[pos : pos + L], v[pos : pos + L]
            g = qs.shape[1] // ks.shape[1]
            ks, vs = ks.repeat_interleave(g, 1), vs.repeat_interleave(g, 1)
            s = torch.einsum("ihd,jhd->hij", qs, ks) / math.sqrt(qs.shape[-1])
            if causal:
                s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
            out.append(torch.einsum("hij,jhd->ihd", s.softmax(-1), vs))
            pos += L
        return torch.cat(out)

    return attn


def batch(lengths: List[int], step: int, seed: int):
    """Inputs and targets of one step, per sequence (independent of the split across ranks)."""
    g = torch.Generator().manual_seed(seed * 7919 + step)
    x = [torch.randn(L, DIM, generator=g) for L in lengths]
    y = [torch.randn(L, DIM, generator=g) for L in lengths]
    return x, y


def loss_and_grads(model, attn, rows, lengths, step, seed, total, reduce=None):
    """loss = sum over this process's tokens of (h . y) / total tokens; gradients in model.parameters()."""
    xs, ys = batch(lengths, step, seed)
    x = torch.cat([xs[s][a : a + n] for s, a, n in rows])
    y = torch.cat([ys[s][a : a + n] for s, a, n in rows])
    model.zero_grad()
    loss = (model(x, attn) * y).sum() / total
    loss.backward()
    lv = loss.detach().clone()
    if reduce is not None:
        reduce(lv)
        for p in model.parameters():
            reduce(p.grad)
    return float(lv), [p.grad.detach().clone() for p in model.parameters()]


def train(model, attn, rows, lengths, steps, seed, total, reduce=None):
    """AdamW steps. Returns per-step losses (summed over ranks), gradients and the parameters each
    step's gradients were taken at."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    losses, grads, params = [], [], []
    for step in range(steps):
        params.append([p.detach().clone() for p in model.parameters()])
        lv, g = loss_and_grads(model, attn, rows, lengths, step, seed, total, reduce)
        losses.append(lv)
        grads.append(g)
        opt.step()
    return losses, grads, params


def worker(a) -> None:
    import torch.distributed as dist

    from fcp_torch.autograd import FcpAttention
    from fcp_torch.plan import read_plan, user_rows

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    plan = read_plan(a.plan)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    att = FcpAttention.from_plan(plan, rank=rank)  # ONE object for every layer and step
    rows = list(zip(*(x.tolist() for x in user_rows(plan, rank))))
    lengths = plan.sequences.tolist()
    model = Model(a.layers, plan.q_heads, plan.kv_heads, plan.head_dim, a.seed)
    reduce = lambda t: dist.all_reduce(t)  # noqa: E731 - sum over ranks
    losses, grads, params = train(model, att, rows, lengths, a.steps, a.seed, sum(lengths), reduce)
    if rank == 0:
        torch.save({"losses": losses, "grads": grads, "params": params}, a.out)
    dist.barrier()
    dist.destroy_process_group()


def launch(a) -> Dict:
    from fcp_torch.launch import free_port
    from fcp_torch.plan import read_plan

    plan = read_plan(a.plan)
    out = os.path.join(tempfile.mkdtemp(prefix="fcp-layers-"), "rank0.pt")
    port = free_port()
    procs = []
    for r in range(plan.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(plan.world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("OMP_NUM_THREADS", "1")
        cmd = [sys.executable, "-m", "tests.dist_layers", "--worker", "--plan", a.plan, "--out", out]
        cmd += ["--layers", str(a.layers), "--steps", str(a.steps), "--seed", str(a.seed)]
        procs.append(subprocess.Popen(cmd, env=env))
    try:
        codes = [p.wait(timeout=a.timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        raise SystemExit(f"a worker failed: exit codes {codes}")
    got = torch.load(out)
    lengths = plan.sequences.tolist()
    ref_model = Model(a.layers, plan.q_heads, plan.kv_heads, plan.head_dim, a.seed)
    rows = [(s, 0, L) for s, L in enumerate(lengths)]
    plain = plain_attention(lengths, plan.causal)
    # Gradients of every training step, against the reference's at the same parameters (two float32
    # runs trained apart drift by ~1e-5 through AdamW's normalisation alone: `drift` shows how much).
    err, loss_err, ref_losses = 0.0, 0.0, []
    for step in range(a.steps):
        with torch.no_grad():
            for p, v in zip(ref_model.parameters(), got["params"][step]):
                p.copy_(v)
        lv, ref = loss_and_grads(ref_model, plain, rows, lengths, step, a.seed, sum(lengths))
        ref_losses.append(lv)
        loss_err = max(loss_err, abs(got["losses"][step] - lv) / abs(lv))
        for g, r in zip(got["grads"][step], ref):
            err = max(err, float((g - r).norm() / r.norm()))
    apart = Model(a.layers, plan.q_heads, plan.kv_heads, plan.head_dim, a.seed)
    apart_losses = train(apart, plain, rows, lengths, a.steps, a.seed, sum(lengths))[0]
    return {
        "world": plan.world,
        "layers": a.layers,
        "steps": a.steps,
        "params": len(ref),
        "losses": got["losses"],
        "refLosses": ref_losses,
        "maxGradRelErr": err,
        "maxLossRelErr": loss_err,
        "drift": max(abs(x - y) / abs(y) for x, y in zip(got["losses"], apart_losses)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tests.dist_layers")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.worker:
        worker(a)
    else:
        print(json.dumps(launch(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

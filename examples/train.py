"""Training a small Llama-like model with FCP context parallelism: the loop a user writes.

    /usr/bin/python3 examples/train.py --world 4 --steps 5                    # 4 gloo processes, CPU
    /usr/bin/python3 examples/train.py --world 2 --dp 2 --steps 3 --check     # 2 replicas x 2-way CP
    # a machine without Node (the GPU machine): plans written beforehand, here, then read from DIR
    /usr/bin/python3 examples/train.py --world 2 --steps 3 --write-plans DIR  # needs the fcp CLI
    python3 examples/train.py --world 2 --steps 3 --plans DIR --device cuda --dtype bfloat16 --check

The model is plain PyTorch (embedding, RMSNorm, grouped-query attention with RoPE, SwiGLU MLP,
LM head; no transformers needed). Each step trains on a packed long-tailed batch: `--batch` names
one of the planner's generators (`longtail`, `magi`, ...; a different seed each step) or gives the
lengths (rotated by one sequence each step). The planner is `fcp serve` (through
fcp_torch.PlannerClient): global rank 0 asks for step k+1's plans while step k trains, and
broadcasts the plan files. Every layer calls the same `FcpAttention` of the step; the loss of each
replica is its summed next-token cross-entropy over its batch's label count, gradients are summed
over the CP group and averaged over the replicas. Rank 0 prints the loss of every step.

`--check` also trains nothing twice: at every step it takes the parameters the CP run had and
computes, in this one process with plain attention over every whole sequence, the loss and every
parameter's gradient, and prints one JSON line with the largest relative errors (float32; the
test test/executors/torch-example.test.ts requires <= 1e-5). Processes are started here (Debian's
torchrun is broken); `fcp_torch` comes from an installed fcp-torch or from ../python.

`--device cuda` puts every process on GPU `rank % device_count` (several ranks may share one GPU);
the process group stays gloo, so the attention's messages go through host copies
(comm.StagedComm) and gradients are summed in float32 on the host. With `--dtype bfloat16` the
model runs in bf16 and `--check` compares with a float32 reference (plain attention, float32
weights equal to the bf16 run's) both the FCP run and the same bf16 model with unsharded
per-sequence SDPA: the JSON line gives each one's relative errors and their ratio (FCP's error
over SDPA's; 1 = as accurate as unsharded bf16 attention).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from typing import List, Optional

import torch
import torch.nn.functional as F

try:
    import fcp_torch  # noqa: F401
except ImportError:  # a source checkout: the package is in ../python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import fcp_torch  # noqa: F401


# ---------------------------------------------------------------------------------------------
# The model


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotary embedding of x [n, heads, D] at positions pos [n] (rotate-half convention).
    Angles in float32 on x's device; the result in x's dtype (bf16 stays bf16)."""
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D)
    ang = pos.to(x.device).float()[:, None] * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1).to(x.dtype)


class Block(torch.nn.Module):
    def __init__(self, dim: int, H: int, Hk: int, D: int, ffn: int):
        super().__init__()
        self.H, self.Hk, self.D = H, Hk, D
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, H * D, bias=False)
        self.wk = torch.nn.Linear(dim, Hk * D, bias=False)
        self.wv = torch.nn.Linear(dim, Hk * D, bias=False)
        self.wo = torch.nn.Linear(H * D, dim, bias=False)
        self.w1 = torch.nn.Linear(dim, ffn, bias=False)
        self.w3 = torch.nn.Linear(dim, ffn, bias=False)
        self.w2 = torch.nn.Linear(ffn, dim, bias=False)

    def forward(self, h, pos, attn):
        n = h.shape[0]
        x = self.attn_norm(h)
        q = rope(self.wq(x).view(n, self.H, self.D), pos)
        k = rope(self.wk(x).view(n, self.Hk, self.D), pos)
        v = self.wv(x).view(n, self.Hk, self.D)
        h = h + self.wo(attn(q, k, v).reshape(n, -1))
        x = self.mlp_norm(h)
        return h + self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaLike(torch.nn.Module):
    """Token ids [n] (one rank's tokens of a packed batch) and their positions -> logits [n, vocab]."""

    def __init__(self, vocab: int, dim: int, layers: int, H: int, Hk: int, D: int, ffn: int, seed: int):
        super().__init__()
        torch.manual_seed(seed)  # same initial weights in every process
        self.embed = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList([Block(dim, H, Hk, D, ffn) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, ids, pos, attn):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h, pos, attn)  # one attention object for every layer
        return self.head(self.norm(h))


def plain_attention(lengths: List[int]):
    """Causal attention of each whole sequence of a packed batch, float32 math (the reference)."""

    def attn(q, k, v):
        out, at = [], 0
        for L in lengths:
            qs, ks, vs = q[at : at + L], k[at : at + L], v[at : at + L]
            g = qs.shape[1] // ks.shape[1]
            ks, vs = ks.repeat_interleave(g, 1), vs.repeat_interleave(g, 1)
            s = torch.einsum("ihd,jhd->hij", qs, ks) / math.sqrt(qs.shape[-1])
            s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool, device=s.device).tril(), float("-inf"))
            out.append(torch.einsum("hij,jhd->ihd", s.softmax(-1), vs))
            at += L
        return torch.cat(out)

    return attn


def sdpa_attention(lengths: List[int]):
    """Unsharded causal attention of each whole sequence through torch's scaled_dot_product_attention
    in the inputs' dtype (what a bf16 model without CP runs; torch >= 2.0; older torch, as Debian's
    1.13 on CPU: plain attention in the inputs' dtype)."""
    if not hasattr(F, "scaled_dot_product_attention"):
        return plain_attention(lengths)

    def attn(q, k, v):
        out, at = [], 0
        for L in lengths:
            qs, ks, vs = (t[at : at + L].transpose(0, 1)[None] for t in (q, k, v))
            g = qs.shape[1] // ks.shape[1]
            ks, vs = ks.repeat_interleave(g, 1), vs.repeat_interleave(g, 1)
            out.append(F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)[0].transpose(0, 1))
            at += L
        return torch.cat(out)

    return attn


# ---------------------------------------------------------------------------------------------
# Data


def batch_lengths(spec: str, step: int) -> "str | List[int]":
    """A generator name (planned with seed = step) or explicit lengths rotated by `step`."""
    if all(c.isdigit() or c == "," for c in spec):
        xs = [int(x) for x in spec.split(",") if x]
        r = step % len(xs)
        return xs[r:] + xs[:r]
    return spec


def tokens(lengths: List[int], vocab: int, seed: int, step: int, replica: int):
    """Packed input ids and next-token labels (-100 after each sequence's last token)."""
    g = torch.Generator().manual_seed((seed * 1009 + step) * 101 + replica)
    ids = torch.randint(0, vocab, (sum(lengths),), generator=g)
    labels = torch.full_like(ids, -100)
    at = 0
    for L in lengths:
        labels[at : at + L - 1] = ids[at + 1 : at + L]
        at += L
    pos = torch.cat([torch.arange(L) for L in lengths])
    return ids, labels, pos


# ---------------------------------------------------------------------------------------------
# Workers


def plan_request(a, step: int, replica: int, out_dir: str) -> dict:
    b = batch_lengths(a.batch, step)
    req = dict(
        strategy="fcp",
        batch=b,
        world=a.world,
        tokensPerRank=a.tokens_per_rank,
        seed=a.seed * 1000 + step * a.dp + replica,
        model={"qHeads": a.heads, "kvHeads": a.kv_heads, "headDim": a.head_dim, "bytesPerElement": 4},
        options={"blockSize": a.block_size},
        output=os.path.join(out_dir, f"plan-{step}-{replica}.json"),
    )
    return req


def worker(a) -> None:
    import torch.distributed as dist

    from fcp_torch import PlannerClient, gather, shard

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dev, dt = device_of(a, rank), DTYPES[a.dtype]
    dist.init_process_group("gloo", rank=rank, world_size=size)
    W, DP = a.world, a.dp
    replica = rank // W
    # CP groups: ranks [d*W, (d+1)*W); every process creates every group, in the same order.
    groups = [dist.new_group(list(range(d * W, (d + 1) * W))) for d in range(DP)]
    cp = groups[replica]
    model = LlamaLike(a.vocab, a.dim, a.layers, a.heads, a.kv_heads, a.head_dim, a.ffn, a.seed).to(dev, dt)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    client = PlannerClient() if rank == 0 and not a.plans else None
    ahead = None
    if client is not None:  # plans of step 0, then always one step ahead
        ahead = [client.submit(**plan_request(a, 0, d, a.out)) for d in range(DP)]
    record = {"losses": [], "grads": [], "params": []}
    try:
        for step in range(a.steps):
            paths: List[Optional[str]] = [None] * DP
            if client is not None:
                plans = [f.result() for f in ahead]
                paths = [os.path.join(a.out, f"plan-{step}-{d}.json") for d in range(DP)]
                if step + 1 < a.steps:  # planning of step k+1 overlaps training of step k
                    ahead = [client.submit(**plan_request(a, step + 1, d, a.out)) for d in range(DP)]
                del plans
            if a.plans:  # pre-made plan files (--write-plans): every rank reads its own
                paths = [plan_path(a.plans, step, d) for d in range(DP)]
            else:
                box = [paths if client is not None else None]
                dist.broadcast_object_list(box, src=0)
                paths = box[0]
            plan = fcp_torch.read_plan(paths[replica])
            lengths = plan.sequences.tolist()
            ids, labels, pos = tokens(lengths, a.vocab, a.seed, step, replica)
            sh = shard(lengths, plan, cp_group=cp)
            attn = sh.attention(device=str(dev), dtype=dt, kernel=a.kernel)
            n_labels = int((labels != -100).sum())
            opt.zero_grad()
            logits = model(sh.take(ids).to(dev), sh.position_ids.to(dev), attn)
            loss = F.cross_entropy(logits.float(), sh.take(labels).to(dev), ignore_index=-100, reduction="sum") / n_labels / DP
            loss.backward()
            if a.check and step == 0:  # the replica's packed logits, back from every CP rank
                full = gather(logits.detach().float().cpu(), sh)  # gloo gathers host tensors only
                if rank == 0:
                    record["logits0"] = full
            lv = loss.detach().float().cpu()
            dist.all_reduce(lv)  # sum over the CP ranks and replicas: the mean replica loss
            for p in model.parameters():
                if dev.type == "cpu" and dt == torch.float32:
                    dist.all_reduce(p.grad)
                else:  # gloo sums host tensors; float32 so the sum over ranks adds no bf16 rounding
                    g = p.grad.float().cpu()
                    dist.all_reduce(g)
                    p.grad.copy_(g)
            if rank == 0:
                print(f"step {step} loss {float(lv):.6f} ({len(lengths)} sequences, {sum(lengths)} tokens per replica)", flush=True)
                if a.check:
                    record["losses"].append(float(lv))
                    record["grads"].append([p.grad.detach().float().cpu().clone() for p in model.parameters()])
                    record["params"].append([p.detach().cpu().clone() for p in model.parameters()])
            opt.step()
    finally:
        if client is not None:
            client.close()
    if rank == 0 and a.check:
        torch.save(record, os.path.join(a.out, "record.pt"))
    dist.barrier()
    dist.destroy_process_group()


def reference(a) -> dict:
    """Loss and gradients of each step at the CP run's parameters, one process, plain attention.

    float32 runs: the reference is the same model in float32 with plain attention. Other dtypes: the
    reference is float32 (the run's parameters upcast, exactly representable), and the same model in
    the run's dtype with unsharded SDPA is measured against it too; `ratio` = FCP's error over SDPA's."""
    from fcp_torch import read_plan

    rec = torch.load(os.path.join(a.out, "record.pt"))
    dev, dt = device_of(a, 0), DTYPES[a.dtype]
    low = dt != torch.float32
    model = LlamaLike(a.vocab, a.dim, a.layers, a.heads, a.kv_heads, a.head_dim, a.ffn, a.seed).to(dev)
    lowm = LlamaLike(a.vocab, a.dim, a.layers, a.heads, a.kv_heads, a.head_dim, a.ffn, a.seed).to(dev, dt) if low else None
    err = {"fcp": {"grad": 0.0, "loss": 0.0, "logits": 0.0, "perParamRatio": 0.0}, "sdpa": {"grad": 0.0, "loss": 0.0, "logits": 0.0}}
    rel = lambda x, y: float((x.float() - y.float()).norm() / y.float().norm().clamp_min(1e-30))  # noqa: E731
    for step in range(a.steps):
        with torch.no_grad():
            for m in (model, lowm) if low else (model,):
                for p, v in zip(m.parameters(), rec["params"][step]):
                    p.copy_(v.to(dev))
        total, total_low = 0.0, 0.0
        for m in (model, lowm) if low else (model,):
            m.zero_grad()
        for d in range(a.dp):
            lengths = read_plan(plan_path(a.plans or a.out, step, d)).sequences.tolist()
            ids, labels, pos = tokens(lengths, a.vocab, a.seed, step, d)
            ids, labels, pos = ids.to(dev), labels.to(dev), pos.to(dev)
            n = int((labels != -100).sum())
            logits = model(ids, pos, plain_attention(lengths))
            loss = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum") / n / a.dp
            loss.backward()
            total += float(loss)
            if low:
                ll = lowm(ids, pos, sdpa_attention(lengths))
                lo = F.cross_entropy(ll.float(), labels, ignore_index=-100, reduction="sum") / n / a.dp
                lo.backward()
                total_low += float(lo)
            if step == 0 and d == 0:
                err["fcp"]["logits"] = rel(rec["logits0"].to(dev), logits.detach())
                if low:
                    err["sdpa"]["logits"] = rel(ll.detach(), logits.detach())
        err["fcp"]["loss"] = max(err["fcp"]["loss"], abs(rec["losses"][step] - total) / abs(total))
        if low:
            err["sdpa"]["loss"] = max(err["sdpa"]["loss"], abs(total_low - total) / abs(total))
        for i, (p, g) in enumerate(zip(model.parameters(), rec["grads"][step])):
            e = rel(g.to(dev), p.grad)
            err["fcp"]["grad"] = max(err["fcp"]["grad"], e)
            if low:
                es = rel(list(lowm.parameters())[i].grad, p.grad)
                err["sdpa"]["grad"] = max(err["sdpa"]["grad"], es)
                err["fcp"]["perParamRatio"] = max(err["fcp"]["perParamRatio"], e / max(es, 1e-30))
    out = {"maxGradRelErr": err["fcp"]["grad"], "maxLossRelErr": err["fcp"]["loss"], "logitRelErr": err["fcp"]["logits"], "params": len(rec["grads"][0])}
    if low:
        out.update(
            dtype=a.dtype,
            device=str(dev),
            sdpa={"maxGradRelErr": err["sdpa"]["grad"], "maxLossRelErr": err["sdpa"]["loss"], "logitRelErr": err["sdpa"]["logits"]},
            ratio={
                "maxGradRelErr": err["fcp"]["grad"] / max(err["sdpa"]["grad"], 1e-30),
                "logitRelErr": err["fcp"]["logits"] / max(err["sdpa"]["logits"], 1e-30),
                "maxLossRelErr": err["fcp"]["loss"] / max(err["sdpa"]["loss"], 1e-30),
                "worstParam": err["fcp"]["perParamRatio"],
            },
        )
    return out


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def device_of(a, rank: int) -> torch.device:
    """This process's device: the CPU, or GPU rank % device_count (ranks may share a GPU)."""
    if a.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("train.py: --device cuda but torch sees no GPU")
    d = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(d)
    return d


def plan_path(d: str, step: int, replica: int) -> str:
    return os.path.join(d, f"plan-{step}-{replica}.json")


def write_plans(a) -> int:
    """Plans of every step and replica into a.write_plans (the files `--plans` reads), through fcp serve."""
    from fcp_torch import PlannerClient

    os.makedirs(a.write_plans, exist_ok=True)
    out = os.path.abspath(a.write_plans)
    with PlannerClient() as client:
        futs = [client.submit(**plan_request(a, step, d, out)) for step in range(a.steps) for d in range(a.dp)]
        for f in futs:
            f.result()
    print(f"wrote {len(futs)} plans to {out}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="examples/train.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2, help="context-parallel ranks per replica")
    ap.add_argument("--dp", type=int, default=1, help="data-parallel replicas (processes: world x dp)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", default="longtail", help="a generator name or comma-separated lengths")
    ap.add_argument("--tokens-per-rank", type=int, default=256)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="compare every step with one process and plain attention")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: GPU rank %% device_count; the group stays gloo")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="model and attention dtype")
    ap.add_argument("--kernel", default="auto", help="attention kernel policy (fcp_torch.kernels: math, flash, cudnn, auto)")
    ap.add_argument("--plans", help="read plan-STEP-REPLICA.json from this folder instead of asking fcp serve")
    ap.add_argument("--write-plans", metavar="DIR", help="only write the plans of every step into DIR (needs the fcp CLI) and exit")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a)
        return 0
    if a.write_plans:
        return write_plans(a)
    from fcp_torch.launch import LaunchError, spawn_ranks

    a.out = tempfile.mkdtemp(prefix="fcp-train-")
    n = a.world * a.dp
    args = [x for x in (argv if argv is not None else sys.argv[1:])]
    try:
        codes = spawn_ranks([sys.executable, os.path.abspath(__file__), *args, "--worker", "--out", a.out], n,
                            {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}, a.timeout).codes
    except LaunchError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    if any(codes):
        print(f"train.py: a process failed (exit codes {codes})", file=sys.stderr)
        return 1
    if a.check:
        res = reference(a)
        res.update(world=a.world, dp=a.dp, layers=a.layers, steps=a.steps)
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU test of the transformers integration (issue 16 item 3): `attn_implementation="fcp"`.

    cd python && python3 -m unittest tests.gpu_test_hf -v        # on the GPU machine

A small randomly initialised 3-layer Llama (transformers' LlamaForCausalLM) attends one packed
batch of six sequences (10,577 tokens, the world-1 plan scripts/gpu/plans/hf-fcp-1.json.gz, planned
here by scripts/gpu/make-plans.ts) through FCP in bf16; the same model with `sdpa` in bf16 runs each
sequence alone. Both are compared with the float32 sdpa model: FCP's logits and every parameter's
gradient must be within 1.2x sdpa's bf16 error (plus 1e-3 of slack for gradients whose bf16 error
is tiny). Skipped (not failed) without CUDA, without transformers, or on torch older than 2.0; the
file name keeps it out of `unittest discover`'s default pattern, so the CPU suite never collects it.
"""
from __future__ import annotations

import copy
import os
import unittest

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = os.path.join(ROOT, "scripts", "gpu", "plans", "hf-fcp-1.json.gz")

try:
    import transformers  # noqa: F401

    HAVE_HF = True
except Exception:  # noqa: BLE001 - any import failure means: not testable here
    HAVE_HF = False


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU")
@unittest.skipUnless(HAVE_HF, "needs transformers")
@unittest.skipUnless(hasattr(torch.nn.functional, "scaled_dot_product_attention"), "needs torch >= 2.0")
class HfFcpAttention(unittest.TestCase):
    def test_llama_fcp_matches_sdpa_in_bf16(self) -> None:
        from transformers import LlamaConfig, LlamaForCausalLM

        from fcp_torch import hf
        from fcp_torch.autograd import FcpAttention
        from fcp_torch.plan import read_plan

        dev = torch.device("cuda")
        hf.register()
        plan = read_plan(PLAN)
        lens = plan.sequences.tolist()
        cfg = LlamaConfig(vocab_size=1000, hidden_size=plan.q_heads * plan.head_dim, intermediate_size=1024, num_hidden_layers=3,
                          num_attention_heads=plan.q_heads, num_key_value_heads=plan.kv_heads, head_dim=plan.head_dim,
                          max_position_embeddings=8192)

        def build(impl: str):
            c = copy.deepcopy(cfg)  # each model its own config: the attention implementation lives there
            c._attn_implementation = impl
            return LlamaForCausalLM(c).to(dev)

        torch.manual_seed(0)
        ref = build("sdpa").float()
        sd = ref.state_dict()
        sdpa, fcp = build("sdpa"), build("fcp")
        for m in (sdpa, fcp):
            m.load_state_dict(sd)
            m.to(torch.bfloat16)
        self.assertEqual(fcp.config._attn_implementation, "fcp")
        g = torch.Generator().manual_seed(1)
        ids = [torch.randint(0, cfg.vocab_size, (L,), generator=g).to(dev) for L in lens]
        w = torch.randn(sum(lens), cfg.vocab_size, generator=g).to(dev)

        def per_sequence(m):
            m.zero_grad()
            logits = torch.cat([m(x[None]).logits[0] for x in ids]).float()
            (logits * w).sum().backward()
            return logits.detach(), {n: p.grad.float() for n, p in m.named_parameters()}

        def packed(m):
            m.zero_grad()
            att = FcpAttention.from_plan(plan, rank=0, device="cuda", dtype=torch.bfloat16, kernel="auto")
            pos = torch.cat([torch.arange(L, device=dev) for L in lens])[None]
            with hf.use_plan(att):
                logits = m(torch.cat(ids)[None], position_ids=pos).logits[0].float()
            (logits * w).sum().backward()
            return logits.detach(), {n: p.grad.float() for n, p in m.named_parameters()}

        lr, gr = per_sequence(ref)
        ls, gs = per_sequence(sdpa)
        lf, gf = packed(fcp)
        self.assertTrue(torch.isfinite(lf).all())
        e_s, e_f = _rel(ls, lr), _rel(lf, lr)
        print(f"logits rel err vs float32: sdpa bf16 {e_s:.3e}, fcp bf16 {e_f:.3e} (ratio {e_f / e_s:.3f})")
        self.assertLessEqual(e_f, 1.2 * e_s)
        worst = 0.0
        for n in gr:
            gs_e, gf_e = _rel(gs[n], gr[n]), _rel(gf[n], gr[n])
            worst = max(worst, gf_e / max(gs_e, 1e-30))
            self.assertLessEqual(gf_e, 1.2 * gs_e + 1e-3, n)
        print(f"worst parameter gradient error ratio fcp/sdpa: {worst:.3f} over {len(gr)} parameters")

    def test_fcp_rejects_a_batch_the_plan_was_not_made_for(self) -> None:
        """The packed batch must match the bound plan: a shorter batch is an error, not a silent result."""
        from transformers import LlamaConfig, LlamaForCausalLM

        from fcp_torch import hf
        from fcp_torch.autograd import FcpAttention
        from fcp_torch.plan import PlanError, read_plan

        hf.register()
        plan = read_plan(PLAN)
        cfg = LlamaConfig(vocab_size=100, hidden_size=plan.q_heads * plan.head_dim, intermediate_size=128, num_hidden_layers=1,
                          num_attention_heads=plan.q_heads, num_key_value_heads=plan.kv_heads, head_dim=plan.head_dim)
        cfg._attn_implementation = "fcp"
        m = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)
        att = FcpAttention.from_plan(plan, rank=0, device="cuda", dtype=torch.bfloat16, kernel="auto")
        with self.assertRaises(PlanError) as cm:
            with hf.use_plan(att):
                m(torch.zeros(1, 100, dtype=torch.long, device="cuda"))
        self.assertEqual(cm.exception.code, "run.shape")
        with self.assertRaises(PlanError) as cm:  # no plan bound
            m(torch.zeros(1, 100, dtype=torch.long, device="cuda"))
        self.assertEqual(cm.exception.code, "hf.noPlan")


if __name__ == "__main__":
    unittest.main()

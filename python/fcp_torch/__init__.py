"""fcp_torch: the PyTorch (+ NCCL / gloo) interpreter of `fcp-plan/1` plan files.

Planning lives in the TypeScript library (`fcp plan`, `fcp serve`); this package only executes
plans: per-rank buffers, the user/home reshuffle, each plan group's transfers as one
`batch_isend_irecv`, attention launches returning the log-sum-exp, LSE merges and dK/dV pushes.

Model-facing API: `shard` (a rank's tokens of a packed batch, with position ids), `gather`,
`FcpAttention` (one object for every layer of a batch), `PlannerClient` (plans batch k+1 while
batch k trains); every plan is checked (`check_plan`) before any collective call.
"""
from .check import check_plan
from .plan import Plan, PlanError, RankProgram, rank_program, read_plan

__all__ = [
    "FcpAttention",
    "Plan",
    "PlanError",
    "PlannerClient",
    "RankProgram",
    "Shard",
    "check_plan",
    "gather",
    "rank_program",
    "read_plan",
    "shard",
]
__version__ = "0.1.0"


def __getattr__(name):
    # torch-importing parts load on first use: `import fcp_torch` stays cheap for plan tools.
    if name == "FcpAttention":
        from .autograd import FcpAttention

        return FcpAttention
    if name in ("shard", "gather", "Shard"):
        from . import sharding

        return getattr(sharding, name)
    if name == "PlannerClient":
        from .serve_client import PlannerClient

        return PlannerClient
    raise AttributeError(f"module 'fcp_torch' has no attribute {name!r}")

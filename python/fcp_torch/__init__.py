"""fcp_torch: the PyTorch (+ NCCL / gloo) interpreter of `fcp-plan/1` plan files.

Planning lives in the TypeScript library (`fcp plan`, `fcp serve`); this package only executes
plans: per-rank buffers, the user/home reshuffle, each plan group's transfers as one
`batch_isend_irecv`, attention launches returning the log-sum-exp, LSE merges and dK/dV pushes.
"""
from .plan import Plan, PlanError, RankProgram, rank_program, read_plan

__all__ = ["Plan", "PlanError", "RankProgram", "rank_program", "read_plan"]
__version__ = "0.1.0"

"""Inputs and outputs of a run.

Input file (written by the TypeScript executor): little-endian float32, four sections in order
q, k, v, dO; each section holds the sequences in id order, each [length, heads, headDim] row-major
(q and dO with qHeads, k and v with kvHeads). A rank reads only its user tokens.

Generated inputs (no file): values drawn per (seed, field, sequence, 1024-token block) with
torch.Generator, so they do not depend on the layout and any process can regenerate any token.

Output of rank r: `rank{r}.bin`, float32 sections o, dq, dk, dv over the rank's user tokens in its
user-row order (sorted by sequence, then start), described in `rank{r}.json` with timings.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Tuple

import numpy as np
import torch

FIELDS = ("q", "k", "v", "dO")
BLOCK = 1024


def _heads(field: str, H: int, Hk: int) -> int:
    return H if field in ("q", "dO", "o", "dq") else Hk


def read_input_rows(path: str, sequences: np.ndarray, H: int, Hk: int, D: int, seq, start, length) -> Dict[str, torch.Tensor]:
    """The rows (seq, start, length) of each field, concatenated, from an input file."""
    mm = np.memmap(path, dtype="<f4", mode="r")
    seq_off = np.concatenate(([0], np.cumsum(sequences))).astype(np.int64)
    total = int(seq_off[-1])
    out = {}
    base = 0
    for f in FIELDS:
        e = _heads(f, H, Hk) * D
        parts = [mm[base + (seq_off[s] + a) * e : base + (seq_off[s] + a + n) * e] for s, a, n in zip(seq, start, length)]
        arr = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        out[f] = torch.from_numpy(np.array(arr, dtype=np.float32)).view(-1, _heads(f, H, Hk), D)
        base += total * e
    if base != mm.size:
        raise ValueError(f"input file {path} holds {mm.size} floats, expected {base}")
    return out


def generate_rows(seed: int, H: int, Hk: int, D: int, seq, start, length, device="cpu", dtype=torch.float32) -> Dict[str, torch.Tensor]:
    """Seeded inputs of the rows (independent of how tokens are split across ranks)."""
    out = {}
    for fi, f in enumerate(FIELDS):
        h = _heads(f, H, Hk)
        parts = []
        for s, a, n in zip(np.asarray(seq).tolist(), np.asarray(start).tolist(), np.asarray(length).tolist()):
            b0, b1 = a // BLOCK, (a + n - 1) // BLOCK
            blocks = []
            for blk in range(b0, b1 + 1):
                g = torch.Generator(device=device)
                g.manual_seed(((seed * 1000003 + fi) * 1000033 + s) * 65599 + blk)
                blocks.append(torch.randn(BLOCK, h, D, generator=g, device=device, dtype=torch.float32))
            x = torch.cat(blocks)[a - b0 * BLOCK : a - b0 * BLOCK + n]
            parts.append(x)
        t = torch.cat(parts) if parts else torch.zeros(0, h, D, device=device)
        out[f] = t.to(dtype)
    return out


def write_outputs(out_dir: str, rank: int, tensors: Tuple[torch.Tensor, ...], info: dict) -> None:
    """Writes rank{r}.bin (o, dq, dk, dv as float32) and rank{r}.json atomically."""
    os.makedirs(out_dir, exist_ok=True)
    binp = os.path.join(out_dir, f"rank{rank}.bin")
    tmp = binp + ".tmp"
    with open(tmp, "wb") as f:
        for t in tensors:
            f.write(t.detach().float().cpu().contiguous().numpy().astype("<f4").tobytes())
    os.replace(tmp, binp)
    jp = os.path.join(out_dir, f"rank{rank}.json")
    with open(jp + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(jp + ".tmp", jp)

"""MagiAttention's dynamic attention solver (MAGI_ATTENTION_QO_COMM=1) run on our batches, on CPU.

    /usr/bin/python3 scripts/peers/magi_dynamic_solver.py --magi DIR INPUT.json [INPUT.json ...]

DIR is a checkout of SandAI-org/MagiAttention's `magi_attention` package (read at 2c641357; `git
archive HEAD magi_attention | tar -x -C DIR/..`). Each INPUT is what bench/magi-dynamic.ts writes:
the batch's sequence lengths, our `magi` dispatch (chunk owners, which match MagiAttention's
MinHeapDispatchAlg) and the model's heads. For each, the Python path of its
BinaryGreedyParallelDynamicAttnAlgorithm.solve (magi_attention/meta/algorithms/
binary_greedy_parallel.py) is repeated here with its own `_get_grid_rects` and `binary_greedy`, so
that every grid cell keeps its (row, column) for the byte counts, and one JSON line is printed:
the mask-area imbalance (max / mean - 1) of the static assignment (every cell on its Q owner) and
of the dynamic one, and the forward bytes of each (Q in and O out per moved (row, rank), K/V per
fetched (column, rank); LSE and per-node de-duplication left out). Only the package's pure-Python
range, rectangle and algorithm modules are imported; its torch, triton and C++ parts are stubbed.
"""
import argparse
import os
import sys
import types

ap = argparse.ArgumentParser()
ap.add_argument("--magi", required=True, help="folder holding the magi_attention package")
ap.add_argument("inputs", nargs="+")
args = ap.parse_args()
ROOT = os.path.join(args.magi, "magi_attention")
if not os.path.isfile(os.path.join(ROOT, "meta", "algorithms", "binary_greedy_parallel.py")):
    sys.exit(f"magi_dynamic_solver: no magi_attention package under {args.magi}")
def pkg(name, path):
    m = types.ModuleType(name); m.__path__ = [path]; sys.modules[name] = m; return m
pkg('magi_attention', ROOT)
pkg('magi_attention.meta', ROOT + '/meta')
pkg('magi_attention.meta.algorithms', ROOT + '/meta/algorithms')
common = pkg('magi_attention.common', ROOT + '/common')
common.is_cpp_backend_enable = lambda: False
utils = pkg('magi_attention.utils', ROOT + '/utils')
nvtx = types.ModuleType('magi_attention.utils.nvtx'); nvtx.instrument_nvtx = lambda f: f
sys.modules['magi_attention.utils.nvtx'] = nvtx; utils.nvtx = nvtx
import importlib
for n in ['enum', 'range', 'ranges', 'rectangle', 'rectangles']:
    importlib.import_module('magi_attention.common.' + n)
from magi_attention.common.range import AttnRange
from magi_attention.common.ranges import AttnRanges
from magi_attention.common.rectangles import AttnRectangles
from magi_attention.common.enum import AttnMaskType
common.AttnRange, common.AttnRanges, common.AttnRectangles = AttnRange, AttnRanges, AttnRectangles
from magi_attention.meta.algorithms.binary_greedy_parallel import BinaryGreedyParallelDynamicAttnAlgorithm, USE_CPP_EXT
assert not USE_CPP_EXT
import json, math, time
import numpy as np

def run(path):
    d = json.load(open(path))
    seqs, owner, cs = d['sequences'], d['owner'], d['chunkSize']
    hq, hkv, hd = d['model']['qHeads'], d['model']['kvHeads'], d['model']['headDim']
    total = sum(seqs)
    cp = max(owner) + 1
    host = [AttnRanges() for _ in range(cp)]
    for c, r in enumerate(owner):
        lo = c * cs
        if lo >= total: continue
        host[r].append(AttnRange(lo, min(total, lo + cs)))
    host = [h.merge() for h in host]
    qr, off = [], 0
    for L in seqs:
        qr.append([off, off + L]); off += L
    rects = AttnRectangles.from_ranges(q_ranges=qr, k_ranges=qr, mask_types=[AttnMaskType.CAUSAL] * len(qr))
    alg = BinaryGreedyParallelDynamicAttnAlgorithm()
    # The Python path of BinaryGreedyParallelDynamicAttnAlgorithm.solve (binary_greedy_parallel.py),
    # repeated here only to keep (i, j) of every grid cell for the byte counts.
    rank_m, rank_n, len_m, len_n = [], [], [], []
    iq = sorted([(iv, idx) for idx, ivs in enumerate(host) for iv in ivs], key=lambda x: x[0].start)
    for iv, idx in iq: rank_m.append(idx); len_m.append(iv.seqlen)
    ik = list(iq)
    for iv, idx in ik: rank_n.append(idx); len_n.append(iv.seqlen)
    g = math.gcd(cp, 1); per = len(rank_m) // g
    usp = [(h // g) * g + i // per for i, h in enumerate(rank_m)]
    t = time.time()
    cells = alg._get_grid_rects(rects, iq, ik)
    amap = [(i, j, r.area()) for i, j, r in cells]
    sol = alg.binary_greedy(cp_size=cp, rank_m=rank_m, rank_n=rank_n, comm_len_m=len_m, comm_len_n=len_n,
                            sparse_area_map=amap, num_heads_q=hq, num_heads_kv=hkv, usp_choices=usp, rank=None)
    secs = time.time() - t
    dyn = np.zeros(cp); sta = np.zeros(cp)
    qo, kv, skv = set(), set(), set()
    for (i, j, a), (_, _, r) in zip(amap, sol):
        dyn[r] += a; sta[rank_m[i]] += a
        if r != rank_m[i]: qo.add((i, r))
        if r != rank_n[j]: kv.add((j, r))
        if rank_m[i] != rank_n[j]: skv.add((j, rank_m[i]))
    qb = hq * hd * 2; kvb = 2 * hkv * hd * 2
    # Forward bytes: Q in and O out per (row, rank) moved, K/V per (column, rank) fetched (LSE left out).
    dyn_bytes = sum(len_m[i] for i, _ in qo) * 2 * qb + sum(len_n[j] for j, _ in kv) * kvb
    sta_bytes = sum(len_n[j] for j, _ in skv) * kvb
    imb = lambda x: x.max() / x.mean() - 1
    return dict(world=cp, chunk=cs, cells=len(amap), solve_s=round(secs, 1),
                static_imbalance=round(imb(sta), 4), dynamic_imbalance=round(imb(dyn), 4),
                static_fwd_GB=round(sta_bytes / 1e9, 2), dynamic_fwd_GB=round(dyn_bytes / 1e9, 2),
                moved_qo_pairs=len(qo))

for p in args.inputs:
    print(json.dumps({'input': p.split('/')[-1], **run(p)}), flush=True)

/**
 * Peak memory of each rank running a plan on the PyTorch runtime (python/fcp_torch), estimated
 * from the plan alone, before anything is allocated. A pure function of the plan, the compute
 * dtype, the kernel family and the number of layers sharing one FcpAttention.
 *
 * The Python twin is python/fcp_torch/memory.py (same model, same integer bytes; compared on shared
 * plans by test/executors/torch-memory.test.ts). The model follows what runtime.py allocates:
 * - `kept` per layer (the autograd context of each call): Q and the final O in the compute dtype,
 *   LSE in float32, the rank's own K/V;
 * - zero-copy (zerocopy.py): where the user layout is the slot layout and nothing is received into
 *   a buffer (world 1), Q, K/V, dO and the kept Q/K/V are the caller's tensors and the user output
 *   is the final O itself: none of them is allocated or counted;
 * - forward (fused.py): Q, K, V (its K/V space: own and received tokens, merged into disjoint
 *   intervals like spaces.TokenSpace), O in the compute dtype, float32 LSE, float32 O/LSE rows only
 *   where partials meet (and O_in when outputs arrive), the messages of the groups
 *   posted so far (sends, float32 staging of accumulated fields, receive buffers: the runtime keeps
 *   them until the phase ends) with each op's kernel workspace, in the runtime's order of posts and
 *   ops, then the outputs;
 * - backward: dO and the incoming gradient, K/V again, float32 dQ/dK/dV (and their _in buffers),
 *   messages, workspace, outputs;
 * - workspace of the `math` kernel (CPU, one launch per piece): 3 float32 score matrices
 *   [H, lq, lk] at once in the forward, 5 in the backward, plus masks; `gpu` kernels (flash, cuDNN)
 *   keep no score matrix, only the outputs of an op's pieces and a bounded float32 gradient copy;
 * - messages on the device, or (`messages: 'host'`, StagedComm) only around each group's post.
 * Checked on an H200 in run 8 (docs/gpu.md, "Memory estimate"): +0.6 to +1.7 % over
 * torch.cuda.max_memory_allocated on three plans, once the runtime let go of its last phase's
 * buffers and the measurement stopped holding every layer's input gradients (run 7: 23-65 %).
 * Peak of L layers: (L-1) kept + max(forward, kept + backward). Measured against the CPU runtime's
 * resident set by python/tests/measure_memory.py (numbers in examples/README.md).
 */
import { expandChunks, hasChunkRows } from './expand.ts';
import { F32, phaseSizes, unionSizes } from './memory-phase.ts';
import { DTYPE_BYTES, type MemoryOptions, type RankMemory } from './memory-types.ts';
import { Kind, type Plan } from './types.ts';

export {
  DTYPE_BYTES,
  type MemoryDtype,
  type MemoryKernel,
  type MemoryMessages,
  type MemoryOptions,
  type RankMemory,
} from './memory-types.ts';

/**
 * Which buffers are the caller's own tensors (python/fcp_torch/zerocopy.py, decided from the plan):
 * user and slot rows are both sorted by (sequence, start), so equal counts mean the identity; a
 * buffer that rows are received into never aliases. `nq` is also the rank's own-token count.
 */
function zeroCopy(
  r: number,
  U: number,
  nq: number,
  nkf: number,
  nkb: number,
  fw: Set<number>[],
  bw: Set<number>[],
): { q: boolean; kv: boolean; stateKv: boolean; out: boolean; do: boolean; bwdKv: boolean } {
  const qId = U === nq;
  const stateKv = nq === nkf;
  return {
    q: qId && !fw[Kind.in]!.has(r),
    kv: U === nkf && !fw[Kind.in]!.has(r) && !fw[Kind.kv]!.has(r),
    stateKv,
    out: qId && !fw[Kind.out]!.has(r),
    do: qId && !bw[Kind.in]!.has(r),
    bwdKv: stateKv && nkb === nkf && !bw[Kind.kv]!.has(r),
  };
}

/**
 * Per-rank peak memory of `plan` on the torch runtime. Plans with compact chunk rows are expanded
 * first. Throws nothing on a valid plan (validate first). `onProgress`: the fraction done after
 * each stage (about 2 s for a magi plan of 4096 ranks, 2 million rows).
 */
export function estimateMemory(
  plan: Plan,
  o: MemoryOptions,
  onProgress?: (fraction: number) => void,
): RankMemory[] {
  const p = hasChunkRows(plan) ? expandChunks(plan) : plan;
  const W = p.world;
  const { qHeads: H, kvHeads: Hk, headDim: D } = p.model;
  const e = DTYPE_BYTES[o.dtype];
  const QH = H * D;
  const KH = Hk * D;
  const base = { rank: [] as number[], seq: [] as number[], start: [] as number[], end: [] as number[] };
  const user = new Array<number>(W).fill(0);
  for (const [lay, isUser] of [
    [p.userLayout, true],
    [p.homeLayout, false],
  ] as const)
    for (let i = 0; i < lay.rank.length; i++) {
      base.rank.push(lay.rank[i]!);
      base.seq.push(lay.seq[i]!);
      base.start.push(lay.start[i]!);
      base.end.push(lay.start[i]! + lay.length[i]!);
      if (isUser) user[lay.rank[i]!]! += lay.length[i]!;
    }
  // The query space also holds what a rank relays as `in` or `out` (FCP's two-hop reshuffle;
  // elsewhere an `in` lands in the home layout and an `out` in the user layout, already counted),
  // as the torch runtime's does (RankProgram.q_space_rows).
  const qb = { rank: [...base.rank], seq: [...base.seq], start: [...base.start], end: [...base.end] };
  for (const ph of [p.forward, p.backward]) {
    const t = ph.transfers;
    for (let i = 0; i < t.kind.length; i++)
      if (t.kind[i] === Kind.in || t.kind[i] === Kind.out) {
        qb.rank.push(t.dst[i]!);
        qb.seq.push(t.seq[i]!);
        qb.start.push(t.start[i]!);
        qb.end.push(t.start[i]! + t.length[i]!);
      }
  }
  const q = unionSizes(W, qb.rank, qb.seq, qb.start, qb.end);
  onProgress?.(0.2);
  const fw = phaseSizes(p, p.forward, 'forward', base, o);
  onProgress?.(0.5);
  const bw = phaseSizes(p, p.backward, 'backward', base, o);
  onProgress?.(1);
  const half = e !== F32;
  const out: RankMemory[] = [];
  for (let r = 0; r < W; r++) {
    const nq = q[r]!;
    const nkf = fw.kvTokens[r]!;
    const nkb = bw.kvTokens[r]!;
    const U = user[r]!;
    const zc = zeroCopy(r, U, nq, nkf, nkb, fw.receives, bw.receives);
    // kept: Q (unless it is the caller's q), final O, LSE, own K/V (unless the caller's k, v)
    const kept =
      (zc.q ? 0 : nq * QH * e) + nq * QH * e + nq * H * F32 + (zc.stateKv && zc.kv ? 0 : 2 * nq * KH * e);
    const oIn = fw.receives[Kind.out]!.has(r);
    const dqIn = bw.receives[Kind.out]!.has(r);
    const dkvIn = dqIn || bw.receives[Kind.dkv]!.has(r);
    // Forward (fused.forward_with_state): Q, K, V, Obf [nq] in the compute dtype, LSE [nq] float32,
    // float32 O/LSEc only for the M slots where partials meet (O_in too when outputs arrive).
    const M = fw.accRows[r]!;
    const accF = nq * H * F32 + M * (QH + H) * F32 + (oIn ? M * QH * F32 : 0);
    const kvF = zc.kv ? 0 : 2 * nkf * KH * e;
    // finish_forward: accumulator rows cast into Obf; then (accumulators freed) the user output, the
    // received `out` partials added in float32, the state's own K/V.
    const ua = oIn ? Math.min(U, M) : 0;
    const finishF = Math.max(
      M * QH * e,
      (zc.out ? 0 : U * QH * e) +
        ua * QH * (3 * F32 + e) +
        (zc.stateKv ? 0 : 2 * nq * KH * e) -
        M * (QH + H) * F32,
    );
    const forward = (zc.q ? 1 : 2) * nq * QH * e + kvF + accF + Math.max(fw.live[r]!, finishF);
    const accB =
      nq * QH * F32 + 2 * nkb * KH * F32 + (dqIn ? nq * QH * F32 : 0) + (dkvIn ? 2 * nkb * KH * F32 : 0);
    const kvB = zc.bwdKv ? 0 : 2 * nkb * KH * e;
    const tmp = Math.max(dqIn ? nq * QH * F32 : 0, dkvIn ? nkb * KH * F32 : 0);
    // the user-layout gradients; a float32 gather first unless the layout is the identity (zero-copy)
    const finishB = U * (QH + 2 * KH) * e + tmp + (half && !zc.do ? U * QH * F32 : 0);
    const backward = U * QH * e + (zc.do ? 0 : nq * QH * e) + kvB + accB + Math.max(bw.live[r]!, finishB);
    out.push({
      rank: r,
      qTokens: nq,
      kvTokensForward: nkf,
      kvTokensBackward: nkb,
      keptPerLayer: kept,
      kvResident: Math.max(kvF, kvB),
      accumulators: Math.max(accF, accB),
      accumulatorRowsForward: M,
      messagesForward: fw.messages[r]!,
      messagesBackward: bw.messages[r]!,
      workspaceForward: fw.workspace[r]!,
      workspaceBackward: bw.workspace[r]!,
      forward,
      backward,
      peak: (o.layers - 1) * kept + Math.max(forward, kept + backward),
    });
  }
  return out;
}

/** The rank with the largest peak. */
export function worstRank(ranks: readonly RankMemory[]): RankMemory {
  let w = ranks[0]!;
  for (const r of ranks) if (r.peak > w.peak) w = r;
  return w;
}

const gib = (b: number): string => `${(b / 2 ** 30).toFixed(3)} GiB`;

/** One summary line of an estimate (printed by `fcp plan`). */
export function formatMemory(ranks: readonly RankMemory[], o: MemoryOptions): string[] {
  const w = worstRank(ranks);
  const mean = ranks.reduce((s, r) => s + r.peak, 0) / Math.max(1, ranks.length);
  return [
    `memory per rank (torch runtime, ${o.dtype}, ${o.kernel} kernels, ${o.layers} layer${o.layers === 1 ? '' : 's'}): peak ${gib(w.peak)} on rank ${w.rank}, mean ${gib(mean)}`,
    `  rank ${w.rank}: kept for backward ${gib(w.keptPerLayer)} per layer, K/V resident ${gib(w.kvResident)}, float32 accumulators ${gib(w.accumulators)}, messages ${gib(Math.max(w.messagesForward, w.messagesBackward))}, kernel workspace ${gib(Math.max(w.workspaceForward, w.workspaceBackward))}`,
  ];
}

/** Rows the estimate walks: explicit rows plus chunk rows expanded over their sequence sets. */
export function estimateRows(plan: Plan): number {
  const sets = plan.seqSets;
  const size = (set: number): number => (sets ? sets.offsets[set + 1]! - sets.offsets[set]! : 0);
  let n = plan.tasks.rank.length + plan.userLayout.rank.length + plan.homeLayout.rank.length;
  for (const t of [plan.userChunks, plan.homeChunks, plan.chunkTasks])
    if (t) for (let i = 0; i < t.set.length; i++) n += size(t.set[i]!);
  for (const ph of [plan.forward, plan.backward]) {
    n += ph.transfers.round.length;
    const ct = ph.chunkTransfers;
    if (ct) for (let i = 0; i < ct.set.length; i++) n += size(ct.set[i]!);
  }
  return n;
}

/** Plans beyond this many rows (see estimateRows) get no estimate from `fcp plan` (seconds, GBs). */
export const ESTIMATE_ROW_LIMIT = 2_000_000;

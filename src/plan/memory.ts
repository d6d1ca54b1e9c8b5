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
import { Kind, type Phase, type Plan } from './types.ts';

/** Compute dtypes of the torch runtime and their bytes per element. */
export const DTYPE_BYTES = { float32: 4, bfloat16: 2, float16: 2 } as const;
/** A compute dtype of the torch runtime. */
export type MemoryDtype = keyof typeof DTYPE_BYTES;
/** Kernel family: `math` (CPU, float32 score matrices) or `gpu` (flash / cuDNN, no score matrix). */
export type MemoryKernel = 'math' | 'gpu';

/** What the estimate is for. */
export interface MemoryOptions {
  dtype: MemoryDtype;
  kernel: MemoryKernel;
  /** Attention layers sharing one FcpAttention per step (each keeps its forward state). */
  layers: number;
  /**
   * Where message buffers live: `device` (default; LocalComm, NCCL, gloo on CPU tensors) or `host`
   * (comm.StagedComm: CUDA tensors over gloo through host copies, so a group's buffers are on the
   * device only while it is packed and unpacked).
   */
  messages?: MemoryMessages;
}

/** Where the runtime's message buffers live (see MemoryOptions.messages). */
export type MemoryMessages = 'device' | 'host';

/** One rank's estimate; every field but the token counts is in bytes. */
export interface RankMemory {
  rank: number;
  qTokens: number;
  kvTokensForward: number;
  kvTokensBackward: number;
  /** Forward state kept for the backward, per layer. */
  keptPerLayer: number;
  /** Largest K/V buffer (own and received tokens) of the two phases. */
  kvResident: number;
  /** Largest float32 accumulators (O/LSE or dQ/dK/dV with their incoming buffers). */
  accumulators: number;
  /** Query slots with a float32 forward accumulator row (fused.prepare_merges); tokens. */
  accumulatorRowsForward: number;
  messagesForward: number;
  messagesBackward: number;
  workspaceForward: number;
  workspaceBackward: number;
  /** Peak of one forward call (its own kept state included). */
  forward: number;
  /** Peak of one backward call beyond its layer's kept state. */
  backward: number;
  /** Peak of a step of `layers` layers. */
  peak: number;
}

const F32 = 4;
/** fused.ADD_CHUNK_ELEMS: float32 conversions of a launch's gradients go in chunks of this size. */
const ADD_CHUNK_ELEMS = 1 << 24;

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

/** Sizes of the unions of token ranges per rank (ranges merged when they overlap or touch). */
function unionSizes(world: number, rank: number[], seq: number[], start: number[], end: number[]): number[] {
  const order = Array.from(rank.keys()).sort(
    (a, b) => rank[a]! - rank[b]! || seq[a]! - seq[b]! || start[a]! - start[b]!,
  );
  const out = new Array<number>(world).fill(0);
  let r = -1;
  let s = -1;
  let a = 0;
  let b = 0;
  const flush = (): void => {
    if (r >= 0) out[r]! += b - a;
  };
  for (const i of order) {
    if (end[i]! <= start[i]!) continue;
    if (rank[i] === r && seq[i] === s && start[i]! <= b) {
      b = Math.max(b, end[i]!);
      continue;
    }
    flush();
    r = rank[i]!;
    s = seq[i]!;
    a = start[i]!;
    b = end[i]!;
  }
  flush();
  return out;
}

/** (lq, lk, causal) of the bottom-right-causal kernel pieces of one task (kernels.decompose, br). */
function pieces(
  causal: boolean,
  qs: number,
  ql: number,
  ks: number,
  kl: number,
): [number, number, boolean][] {
  if (ql <= 0 || kl <= 0) return [];
  if (!causal) return [[ql, kl, false]];
  const qe = qs + ql;
  const kEnd = Math.min(ks + kl, qe);
  const q0 = Math.max(qs, ks);
  if (!(kEnd > ks && q0 < qe)) return [];
  if (kEnd - 1 <= q0) return [[qe - q0, kEnd - ks, false]];
  const out: [number, number, boolean][] = [[kEnd - q0, kEnd - ks, true]];
  if (qe > kEnd) out.push([qe - kEnd, kEnd - ks, false]);
  return out;
}

/** Fields each transfer kind carries per phase: 'H' query-sized, 'K' K/V-sized, '*' accumulated. */
const FIELDS: Record<'forward' | 'backward', Partial<Record<number, string[]>>> = {
  forward: { [Kind.in]: ['H', 'K', 'K'], [Kind.kv]: ['K', 'K'], [Kind.out]: ['H*'] },
  backward: {
    [Kind.in]: ['H'],
    [Kind.kv]: ['K', 'K'],
    [Kind.dkv]: ['K*', 'K*'],
    [Kind.out]: ['H*', 'K*', 'K*'],
  },
};

interface PhaseSizes {
  kvTokens: number[];
  messages: number[];
  workspace: number[];
  /** Largest kept messages + op workspace over the phase, per rank (see livePeak). */
  live: number[];
  /** Ranks receiving any transfer of each kind. */
  receives: Set<number>[];
  /** Forward only: float32 accumulator rows per rank (see accRows). */
  accRows: number[];
}

/**
 * Float32 accumulator rows of the fused forward per rank (fused.prepare_merges): query slots that
 * get two or more partial rows (tasks whose kernel pieces cover them) or whose O travels as an `out`
 * partial (sent or received); every other slot is written once, in the compute dtype.
 */
function accRows(plan: Plan, ph: Phase): number[] {
  const W = plan.world;
  const causal = plan.mask === 'causal';
  const t = plan.tasks;
  const c = ph.compute;
  // events per rank: [seq, pos, weight]
  const ev: [number, number, number][][] = Array.from({ length: W }, () => []);
  for (let op = 0; op < c.rank.length; op++) {
    const r = c.rank[op]!;
    for (let j = c.taskOffsets[op]!; j < c.taskOffsets[op + 1]!; j++) {
      const id = c.taskIds[j]!;
      const qs = t.qStart[id]!;
      const ql = t.qLength[id]!;
      const ks = t.kvStart[id]!;
      const kl = t.kvLength[id]!;
      const qe = qs + ql;
      const q0 = causal ? Math.max(qs, ks) : qs;
      const live = causal ? Math.min(ks + kl, qe) > ks && q0 < qe && ql > 0 && kl > 0 : ql > 0 && kl > 0;
      if (!live) continue;
      ev[r]!.push([t.seq[id]!, q0, 1], [t.seq[id]!, qe, -1]);
    }
  }
  const tr = ph.transfers;
  for (let i = 0; i < tr.round.length; i++) {
    if (tr.kind[i] !== Kind.out) continue;
    const a = tr.start[i]!;
    const b = a + tr.length[i]!;
    const ranks = tr.src[i] === tr.dst[i] ? [tr.src[i]!] : [tr.src[i]!, tr.dst[i]!];
    for (const r of ranks) ev[r]!.push([tr.seq[i]!, a, 2], [tr.seq[i]!, b, -2]);
  }
  return ev.map((e) => {
    e.sort((x, y) => x[0] - y[0] || x[1] - y[1] || x[2] - y[2]);
    let total = 0;
    let cnt = 0;
    let lastS = -1;
    let lastP = 0;
    for (const [s, p, w] of e) {
      if (s !== lastS) {
        cnt = 0;
        lastS = s;
      } else if (cnt >= 2) total += p - lastP;
      cnt += w;
      lastP = p;
    }
    return total;
  });
}

function phaseSizes(
  plan: Plan,
  ph: Phase,
  name: 'forward' | 'backward',
  base: { rank: number[]; seq: number[]; start: number[]; end: number[] },
  o: MemoryOptions,
): PhaseSizes {
  const W = plan.world;
  const { qHeads: H, kvHeads: Hk, headDim: D } = plan.model;
  const e = DTYPE_BYTES[o.dtype];
  const QH = H * D;
  const KH = Hk * D;
  const rank = [...base.rank];
  const seq = [...base.seq];
  const start = [...base.start];
  const end = [...base.end];
  const tr = ph.transfers;
  const G = ph.groupOfRound.length ? ph.groupOfRound[ph.groupOfRound.length - 1]! + 1 : 0;
  const messages = new Array<number>(W).fill(0);
  // Per (rank, group): message bytes, and the last compute row a send of the rank waits for.
  const groupMsg = new Float64Array(W * G);
  const sendAfter = new Float64Array(W * G).fill(-1);
  const saOf = new Map<number, number>();
  for (let j = 0; j < ph.sendAfter.transfer.length; j++) {
    const t = ph.sendAfter.transfer[j]!;
    saOf.set(t, Math.max(saOf.get(t) ?? -1, ph.sendAfter.compute[j]!));
  }
  const receives = [0, 1, 2, 3].map(() => new Set<number>());
  for (let i = 0; i < tr.round.length; i++) {
    const k = tr.kind[i]!;
    const src = tr.src[i]!;
    const dst = tr.dst[i]!;
    const held: number[] = [];
    if (k === Kind.kv || k === Kind.in || k === Kind.dkv || k === Kind.out) held.push(dst);
    if (k === Kind.dkv && src !== dst) held.push(src);
    for (const r of held) {
      rank.push(r);
      seq.push(tr.seq[i]!);
      start.push(tr.start[i]!);
      end.push(tr.start[i]! + tr.length[i]!);
    }
    receives[k]!.add(dst);
    const g = ph.groupOfRound[tr.round[i]!]!;
    const sa = saOf.get(i);
    if (sa !== undefined && sa > sendAfter[src * G + g]!) sendAfter[src * G + g] = sa;
    for (const f of FIELDS[name][k] ?? []) {
      const elems = tr.length[i]! * (f[0] === 'H' ? QH : KH);
      const sent = elems * e + (f.endsWith('*') ? elems * F32 : 0);
      messages[src]! += sent;
      groupMsg[src * G + g]! += sent;
      if (dst !== src) {
        messages[dst]! += elems * e;
        groupMsg[dst * G + g]! += elems * e;
      }
    }
  }
  const workspace = new Array<number>(W).fill(0);
  const opWs = new Float64Array(ph.compute.rank.length);
  const c = ph.compute;
  const t = plan.tasks;
  const causal = plan.mask === 'causal';
  const cast = e === F32 ? 0 : 1;
  for (let op = 0; op < c.rank.length; op++) {
    const r = c.rank[op]!;
    let nq = 0;
    let nk = 0;
    let maxLq = 0;
    for (let j = c.taskOffsets[op]!; j < c.taskOffsets[op + 1]!; j++) {
      const id = c.taskIds[j]!;
      for (const [lq, lk, isCausal] of pieces(
        causal,
        t.qStart[id]!,
        t.qLength[id]!,
        t.kvStart[id]!,
        t.kvLength[id]!,
      )) {
        nq += lq;
        nk += lk;
        if (lq > maxLq) maxLq = lq;
        if (o.kernel !== 'math') continue;
        const score = H * lq * lk * F32;
        const mask = isCausal ? 2 * lq * lk : 0;
        let ws: number;
        if (name === 'forward') {
          const out = lq * QH * F32;
          ws = Math.max(3 * score + mask + out + cast * (lq * QH + 2 * lk * KH) * F32, 4 * out);
        } else {
          ws = 5 * score + mask + (lq * QH + 2 * lk * KH) * F32 + cast * (3 * lq * QH + 2 * lk * KH) * F32;
        }
        if (ws > opWs[op]!) opWs[op] = ws;
      }
    }
    if (o.kernel === 'gpu' && nq > 0) {
      // Backward: dq/dk/dv in the compute dtype; fused.add_rows converts them to float32 in chunks of
      // at most ADD_CHUNK_ELEMS elements (none when the compute dtype is float32).
      const chunk =
        e === F32
          ? 0
          : Math.max(
              Math.min(nq, Math.max(1, Math.floor(ADD_CHUNK_ELEMS / QH))) * QH,
              Math.min(nk, Math.max(1, Math.floor(ADD_CHUNK_ELEMS / KH))) * KH,
            ) * F32;
      // The kernel's own workspace for its largest piece, lq x qHeads x headDim x (4 + e) bytes (a
      // float32 dQ accumulator and one compute-dtype row buffer): fitted to the H200's world-1 peaks
      // of run 11 (lq 4096 and 12,248), where zero-copy buffers left it the largest term.
      opWs[op] =
        name === 'forward'
          ? nq * (QH * e + H * F32)
          : nq * QH * e + 2 * nk * KH * e + chunk + maxLq * QH * (F32 + e);
    }
    if (opWs[op]! > workspace[r]!) workspace[r] = opWs[op]!;
  }
  // The runtime's order (runtime._run_phase): per group, the ops its sends wait for, the post (its
  // messages are kept until the phase ends), then the ops waiting for it; the rest at the end.
  const opsOf: number[][] = Array.from({ length: W }, () => []);
  for (let op = 0; op < c.rank.length; op++) opsOf[c.rank[op]!]!.push(op);
  const live = new Array<number>(W).fill(0);
  for (let r = 0; r < W; r++) {
    const ops = opsOf[r]!;
    let kept = 0;
    let best = 0;
    let ptr = 0;
    for (let g = 0; g < G; g++) {
      while (ptr < ops.length && ops[ptr]! <= sendAfter[r * G + g]!)
        best = Math.max(best, kept + opWs[ops[ptr++]!]!);
      // Host messages (StagedComm) are on the device only around the post; device ones stay.
      best = Math.max(best, kept + groupMsg[r * G + g]!);
      if (o.messages !== 'host') kept += groupMsg[r * G + g]!;
      while (ptr < ops.length && c.after[ops[ptr]!]! < g) best = Math.max(best, kept + opWs[ops[ptr++]!]!);
    }
    for (; ptr < ops.length; ptr++) best = Math.max(best, kept + opWs[ops[ptr]!]!);
    live[r] = best;
  }
  return {
    kvTokens: unionSizes(W, rank, seq, start, end),
    messages,
    workspace,
    live,
    receives,
    accRows: name === 'forward' ? accRows(plan, ph) : [],
  };
}

/**
 * Per-rank peak memory of `plan` on the torch runtime. Plans with compact chunk rows are expanded
 * first. Throws nothing on a valid plan (validate first).
 */
export function estimateMemory(plan: Plan, o: MemoryOptions): RankMemory[] {
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
  const q = unionSizes(W, base.rank, base.seq, base.start, base.end);
  const fw = phaseSizes(p, p.forward, 'forward', base, o);
  const bw = phaseSizes(p, p.backward, 'backward', base, o);
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

/**
 * One phase of the memory estimate (memory.ts): the K/V space per rank, message bytes by group,
 * kernel workspace and the live peak of kept messages plus op workspace, in the runtime's order
 * of posts and ops (python/fcp_torch/memory.py is the twin).
 */
import { DTYPE_BYTES, type MemoryOptions } from './memory-types.ts';
import { Kind, type Phase, type Plan } from './types.ts';

/** Bytes of a float32 element. */
export const F32 = 4;
/** fused.ADD_CHUNK_ELEMS: float32 conversions of a launch's gradients go in chunks of this size. */
const ADD_CHUNK_ELEMS = 1 << 24;

/** Sizes of the unions of token ranges per rank (ranges merged when they overlap or touch). */
export function unionSizes(
  world: number,
  rank: number[],
  seq: number[],
  start: number[],
  end: number[],
): number[] {
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

export interface PhaseSizes {
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

/** Per-rank K/V tokens, messages, workspace and live peak of one phase (see estimateMemory). */
export function phaseSizes(
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

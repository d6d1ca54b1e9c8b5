/**
 * MagiAttention's group collectives as plan rounds (the magi planner, index.ts): the home segments
 * of a dispatch, the messages of one overlap stage's GroupCast / GroupReduce (`a2av` or the native
 * backend's per-node de-duplication) and their all-to-all-v rounds.
 */
import { IntColumn } from '../../core/int-column.ts';
import { Kind, type KindCode } from '../../plan/types.ts';
import type { PhaseBuilder } from '../shared/plan-builder.ts';

/** Home segments: maximal runs of one sequence on one rank, in packed order. */
export interface Segments {
  rank: Int32Array;
  seq: Int32Array;
  start: Int32Array;
  length: Int32Array;
  /** CSR: segments of sequence s are firstOfSeq[s]..firstOfSeq[s+1]-1, in token order. */
  firstOfSeq: Int32Array;
}

export function segments(sequences: Int32Array, owner: Int32Array, chunkSize: number): Segments {
  const rank = new IntColumn();
  const seq = new IntColumn();
  const start = new IntColumn();
  const length = new IntColumn();
  const firstOfSeq = new Int32Array(sequences.length + 1);
  let packed = 0;
  for (let s = 0; s < sequences.length; s++) {
    firstOfSeq[s] = rank.length;
    const len = sequences[s]!;
    let off = 0;
    while (off < len) {
      const c = Math.floor((packed + off) / chunkSize);
      const take = Math.min(len - off, (c + 1) * chunkSize - (packed + off));
      const r = owner[c]!;
      const last = rank.length - 1;
      if (last >= firstOfSeq[s]! && rank.get(last) === r) length.set(last, length.get(last) + take);
      else {
        rank.push(r);
        seq.push(s);
        start.push(off);
        length.push(take);
      }
      off += take;
    }
    packed += len;
  }
  firstOfSeq[sequences.length] = rank.length;
  return {
    rank: rank.toArray(),
    seq: seq.toArray(),
    start: start.toArray(),
    length: length.toArray(),
    firstOfSeq,
  };
}

/** A remote K/V segment fetched by one rank. */
export interface Fetch {
  src: number;
  dst: number;
  seg: number;
  area: number;
  tasks: number[];
  stage: number;
}

/** One message of a collective: `seg` from src to dst; `afterSlot` >= 0: sendAfter (src, slot). */
export interface Msg {
  src: number;
  dst: number;
  kind: KindCode;
  seg: number;
  afterSlot: number;
}

/**
 * Rounds of one all-to-all-v: message (src, dst) goes in round base + (its position in src's list of
 * destinations ordered by (dst - src) mod N). Returns the round of each message and the round count.
 */
function a2avRounds(msgs: readonly Msg[], world: number): { pos: Map<number, number>; rounds: number } {
  const bySrc = new Map<number, Set<number>>();
  for (const m of msgs) {
    const set = bySrc.get(m.src) ?? new Set<number>();
    set.add(m.dst);
    bySrc.set(m.src, set);
  }
  const pos = new Map<number, number>();
  let rounds = 0;
  for (const [src, set] of bySrc) {
    const order = [...set].sort((a, b) => ((a - src + world) % world) - ((b - src + world) % world));
    order.forEach((dst, j) => {
      pos.set(src * world + dst, j);
    });
    rounds = Math.max(rounds, order.length);
  }
  return { pos, rounds };
}

/**
 * The messages of one stage's collective, in two sub-phases (the second runs in the next group).
 * `a2av`: every fetch is one message (phase 1). `native` (MagiAttention's native group collective,
 * `docs/source/blog/native_grpcoll.md` lines 90-104, after DeepEP): a K/V segment needed by several
 * ranks of one other node crosses the network once, to the rank of that node with the sender's
 * local rank id (phase 1), which forwards it over NVLink (phase 2); the dK/dV reduce runs the
 * other way: the partials of one node are summed over NVLink on its rank with the owner's local
 * rank id (phase 1), which sends the sum across once (phase 2). Forwarding from a rank that received
 * the data in an earlier group, and a `dkv` to a rank that is not the key range's home (it adds it
 * to its own partial and moves the sum on), are both allowed by the plan format
 * (docs/plan-format.md, execution semantics of `kv` and `dkv`).
 */
export function stageMessages(
  fetches: readonly Fetch[],
  kind: 'kv' | 'dkv',
  native: boolean,
  gpusPerNode: number,
  world: number,
  slotOf: (stage: number) => number,
  fetchStage: (seg: number, rank: number) => number,
): [Msg[], Msg[]] {
  const nodeOf = (r: number) => Math.floor(r / Math.max(1, gpusPerNode));
  const p1: Msg[] = [];
  const p2: Msg[] = [];
  const k = kind === 'kv' ? Kind.kv : Kind.dkv;
  // dK/dV partials leave after the stage's compute on the sender.
  const send = (f: Fetch, src: number, dst: number, into: Msg[]) =>
    into.push({ src, dst, kind: k, seg: f.seg, afterSlot: kind === 'dkv' ? slotOf(f.stage) : -1 });
  if (!native) {
    for (const f of fetches) send(f, kind === 'kv' ? f.src : f.dst, kind === 'kv' ? f.dst : f.src, p1);
    return [p1, p2];
  }
  const gpn = Math.max(1, gpusPerNode);
  const local = (r: number) => r % gpn;
  // Group the inter-node messages of one segment by the node on the far side.
  const byNode = new Map<string, Fetch[]>();
  for (const f of fetches) {
    if (nodeOf(f.src) === nodeOf(f.dst)) {
      send(f, kind === 'kv' ? f.src : f.dst, kind === 'kv' ? f.dst : f.src, p1);
      continue;
    }
    const key = `${f.seg}:${nodeOf(f.dst)}`;
    const list = byNode.get(key);
    if (list) list.push(f);
    else byNode.set(key, [f]);
  }
  for (const list of byNode.values()) {
    const f0 = list[0]!;
    if (list.length === 1) {
      // One peer in that node: sent directly (DeepEP would still route through the peer with
      // the sender's local rank id, one NVLink hop more; this favours the baseline slightly).
      send(f0, kind === 'kv' ? f0.src : f0.dst, kind === 'kv' ? f0.dst : f0.src, p1);
      continue;
    }
    // The RDMA peer is the rank of the far node with the same local rank id as the near end
    // (native_grpcoll.md, "RDMA Transfer De-duplication").
    const lowest = list.reduce((x, y) => (y.dst < x.dst ? y : x)).dst;
    const peer = nodeOf(f0.dst) * gpn + local(f0.src);
    // A last node with fewer ranks may lack that peer: the lowest receiver relays then.
    const relay = peer < world ? peer : lowest;
    if (kind === 'kv') {
      p1.push({ src: f0.src, dst: relay, kind: k, seg: f0.seg, afterSlot: -1 });
      for (const f of list)
        if (f.dst !== relay) p2.push({ src: relay, dst: f.dst, kind: k, seg: f.seg, afterSlot: -1 });
    } else {
      // A relay that adds its own partial of this range in another stage would race with its
      // push (the plan format's rule 4): then one of the stage's own receivers relays instead.
      const st = fetchStage(f0.seg, relay);
      const r = st < 0 || st === f0.stage ? relay : lowest;
      for (const f of list) if (f.dst !== r) send(f, f.dst, r, p1);
      const own = list.find((f) => f.dst === r);
      p2.push({ src: r, dst: f0.src, kind: k, seg: f0.seg, afterSlot: own ? slotOf(own.stage) : -1 });
    }
  }
  return [p1, p2];
}

/**
 * Emits the given sub-groups in order, skipping empty ones; each becomes one comm group whose
 * rounds follow {@link a2avRounds}. Returns the index of the last group emitted (-1: none yet).
 */
export function emitGroups(
  ph: PhaseBuilder,
  groups: Msg[][],
  groupOfRound: number[],
  seg: Segments,
  world: number,
  pending: { id: number; rank: number; slot: number }[],
): number {
  for (const msgs of groups) {
    if (msgs.length === 0) continue;
    const g = groupOfRound.length ? groupOfRound[groupOfRound.length - 1]! + 1 : 0;
    const base = groupOfRound.length;
    const { pos, rounds } = a2avRounds(msgs, world);
    for (const m of msgs) {
      const round = base + pos.get(m.src * world + m.dst)!;
      const id = ph.transfer(
        round,
        m.src,
        m.dst,
        m.kind,
        seg.seq[m.seg]!,
        seg.start[m.seg]!,
        seg.length[m.seg]!,
      );
      if (m.afterSlot >= 0) pending.push({ id, rank: m.src, slot: m.afterSlot });
    }
    for (let i = 0; i < rounds; i++) groupOfRound.push(g);
  }
  return groupOfRound.length ? groupOfRound[groupOfRound.length - 1]! : -1;
}

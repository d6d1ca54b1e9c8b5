/**
 * Hand-built plans for the CPU runtime's tests: they exercise what `simplePlan` (home = user, kv
 * and dkv only) does not: `in`/`out` reshuffles with `sendAfter`, K/V forwarded by a home rank,
 * self-contained chunk rows (`seqSets`, `homeChunks`, `userChunks`, `chunkTasks`,
 * `chunkTransfers`, chunk `sendAfter` pairs).
 */

import { Kind, type Layout, type Phase, PLAN_FORMAT, type Plan } from '../../src/plan/types.ts';
import type { Problem } from '../../src/problem/problem.ts';
import { assignRounds, copyLayout, userRowTasks } from '../fixtures/simple-plan.ts';

interface Xfer {
  src: number;
  dst: number;
  kind: number;
  seq: number;
  start: number;
  length: number;
  group: number;
  round: number;
}

interface Op {
  rank: number;
  after: number;
  tasks: number[];
  chunkTasks?: number[];
}

/** Greedy rounds inside each group (each rank sends <= 1 and receives <= 1 per round); renumbers groups densely. */
function roundsOf<T extends { src: number; dst: number; group: number; round: number }>(xs: T[]): Int32Array {
  const groups = [...new Set(xs.map((x) => x.group))].sort((a, b) => a - b);
  const gor: number[] = [];
  for (let gi = 0; gi < groups.length; gi++) {
    const n = assignRounds(
      xs.filter((x) => x.group === groups[gi]),
      gor.length,
    );
    for (let k = 0; k < n; k++) gor.push(gi);
  }
  // Ops refer to group numbers: callers use dense group ids (0..G-1) that all carry a transfer.
  return Int32Array.from(gor);
}

function phaseOf(xs: Xfer[], ops: Op[], sendAfter: [number, number][]): Phase {
  const groupOfRound = roundsOf(xs);
  const offsets = [0];
  const ids: number[] = [];
  for (const o of ops) {
    ids.push(...o.tasks);
    offsets.push(ids.length);
  }
  const compute: Phase['compute'] = {
    rank: Int32Array.from(ops, (o) => o.rank),
    after: Int32Array.from(ops, (o) => o.after),
    taskOffsets: Int32Array.from(offsets),
    taskIds: Int32Array.from(ids),
  };
  if (ops.some((o) => o.chunkTasks)) {
    const co = [0];
    const ci: number[] = [];
    for (const o of ops) {
      ci.push(...(o.chunkTasks ?? []));
      co.push(ci.length);
    }
    compute.chunkTaskOffsets = Int32Array.from(co);
    compute.chunkTaskIds = Int32Array.from(ci);
  }
  return {
    transfers: {
      round: Int32Array.from(xs, (x) => x.round),
      src: Int32Array.from(xs, (x) => x.src),
      dst: Int32Array.from(xs, (x) => x.dst),
      kind: Uint8Array.from(xs, (x) => x.kind),
      seq: Int32Array.from(xs, (x) => x.seq),
      start: Int32Array.from(xs, (x) => x.start),
      length: Int32Array.from(xs, (x) => x.length),
    },
    groupOfRound,
    compute,
    sendAfter: {
      transfer: Int32Array.from(sendAfter, (p) => p[0]),
      compute: Int32Array.from(sendAfter, (p) => p[1]),
    },
  };
}

/**
 * Reshuffle plan: the home of user row i is rank (rank_i + shift) mod world. Forward: group 0
 * moves Q/K/V user -> home (`in`), group 1 sends K/V from homes to the ranks that need them
 * (`kv`, sent by a rank that received them in group 0), op A (after 0) computes tasks with local
 * keys, op B (after 1) the rest, group 2 returns O (`out`, sendAfter the rank's last op).
 * Backward: group 0 moves dO in and K/V to where needed, one op, group 1 pushes dK/dV partials
 * home (`dkv`), group 2 returns dQ/dK/dV (`out`).
 */
export function shuffledPlan(problem: Problem, shift = 1): Plan {
  const { world } = problem;
  const ul = problem.userLayout;
  const rows = ul.rank.length;
  const home = copyLayout(ul);
  for (let i = 0; i < rows; i++) home.rank[i] = (ul.rank[i]! + shift) % world;
  const { tasks, keyRow } = userRowTasks(problem, (a) => home.rank[a]!);
  const row = (i: number) => ({ seq: ul.seq[i]!, start: ul.start[i]!, length: ul.length[i]! });
  const needs = new Map<string, { dst: number; row: number }>(); // remote K/V a rank needs
  for (let t = 0; t < tasks.rank.length; t++) {
    const b = keyRow[t]!;
    if (home.rank[b] !== tasks.rank[t]) needs.set(`${tasks.rank[t]}:${b}`, { dst: tasks.rank[t]!, row: b });
  }
  const moved = (i: number) => ul.rank[i] !== home.rank[i];
  // Forward.
  const fx: Xfer[] = [];
  for (let i = 0; i < rows; i++)
    if (moved(i))
      fx.push({ src: ul.rank[i]!, dst: home.rank[i]!, kind: Kind.in, ...row(i), group: 0, round: -1 });
  for (const n of needs.values())
    fx.push({ src: home.rank[n.row]!, dst: n.dst, kind: Kind.kv, ...row(n.row), group: 1, round: -1 });
  // Groups must be dense: drop empty ones by renumbering.
  const fGroups = [...new Set(fx.map((x) => x.group))].sort();
  const fIn = fGroups.indexOf(0);
  const fKv = fGroups.indexOf(1);
  const outGroupF = fGroups.length;
  for (const x of fx) x.group = fGroups.indexOf(x.group);
  const fOps: Op[] = [];
  const lastOp = new Map<number, number>();
  for (let r = 0; r < world; r++) {
    const local: number[] = [];
    const remote: number[] = [];
    for (let t = 0; t < tasks.rank.length; t++) {
      if (tasks.rank[t] !== r) continue;
      (home.rank[keyRow[t]!] === r ? local : remote).push(t);
    }
    if (local.length) {
      lastOp.set(r, fOps.length);
      fOps.push({ rank: r, after: fIn, tasks: local });
    }
    if (remote.length) {
      lastOp.set(r, fOps.length);
      fOps.push({ rank: r, after: fKv, tasks: remote });
    }
  }
  const fSend: [number, number][] = [];
  for (let i = 0; i < rows; i++)
    if (moved(i)) {
      fSend.push([fx.length, lastOp.get(home.rank[i]!)!]);
      fx.push({
        src: home.rank[i]!,
        dst: ul.rank[i]!,
        kind: Kind.out,
        ...row(i),
        group: outGroupF,
        round: -1,
      });
    }
  // Backward.
  const bx: Xfer[] = [];
  for (let i = 0; i < rows; i++)
    if (moved(i))
      bx.push({ src: ul.rank[i]!, dst: home.rank[i]!, kind: Kind.in, ...row(i), group: 0, round: -1 });
  for (const n of needs.values())
    bx.push({ src: home.rank[n.row]!, dst: n.dst, kind: Kind.kv, ...row(n.row), group: 0, round: -1 });
  const bOps: Op[] = [];
  const bLast = new Map<number, number>();
  const g0 = bx.length > 0 ? 0 : -1;
  for (let r = 0; r < world; r++) {
    const mine = Array.from(tasks.rank).flatMap((rk, t) => (rk === r ? [t] : []));
    if (mine.length) {
      bLast.set(r, bOps.length);
      bOps.push({ rank: r, after: g0, tasks: mine });
    }
  }
  const bSend: [number, number][] = [];
  const dkvGroup = g0 + 1;
  for (const n of needs.values()) {
    bSend.push([bx.length, bLast.get(n.dst)!]);
    bx.push({
      src: n.dst,
      dst: home.rank[n.row]!,
      kind: Kind.dkv,
      ...row(n.row),
      group: dkvGroup,
      round: -1,
    });
  }
  const outGroupB = needs.size > 0 ? dkvGroup + 1 : dkvGroup;
  for (let i = 0; i < rows; i++)
    if (moved(i)) {
      bSend.push([bx.length, bLast.get(home.rank[i]!)!]);
      bx.push({
        src: home.rank[i]!,
        dst: ul.rank[i]!,
        kind: Kind.out,
        ...row(i),
        group: outGroupB,
        round: -1,
      });
    }
  return {
    format: PLAN_FORMAT,
    strategy: 'shuffled',
    world,
    mask: problem.mask,
    model: problem.model,
    sequences: problem.sequences.slice(),
    userLayout: copyLayout(ul),
    homeLayout: home,
    tasks,
    forward: phaseOf(fx, fOps, fSend),
    backward: phaseOf(bx, bOps, bSend),
  };
}

/**
 * Chunk-row plan in the style of ring attention's DualChunkSwap, without the ring: every sequence
 * is cut into 2W parts, rank r holds parts r and 2W-1-r (user = home, via `userChunks` and
 * `homeChunks` only), computes every attended (own part, any part) chunk task, fetches the other
 * parts in one all-to-all group of chunk `kv` transfers and pushes dK/dV back with chunk `dkv`
 * transfers (chunk `sendAfter` pairs). Short sequences leave parts empty (skipped).
 */
export function chunkPlan(problem: Problem): Plan {
  const { world } = problem;
  const P = 2 * world;
  const causal = problem.mask === 'causal';
  const S = problem.sequences.length;
  const ownerOf = (p: number) => (p < world ? p : P - 1 - p);
  const chunkLayout = {
    rank: Int32Array.from({ length: P }, (_, p) => ownerOf(p)),
    set: new Int32Array(P),
    parts: new Int32Array(P).fill(P),
    part: Int32Array.from({ length: P }, (_, p) => p),
  };
  const ct = { rank: [] as number[], qPart: [] as number[], kvPart: [] as number[] };
  for (let qp = 0; qp < P; qp++)
    for (let kp = 0; kp < P; kp++) {
      if (causal && kp > qp) continue;
      ct.rank.push(ownerOf(qp));
      ct.qPart.push(qp);
      ct.kvPart.push(kp);
    }
  const ops: Op[] = [];
  const lastOp = new Map<number, number>();
  for (let r = 0; r < world; r++) {
    const local: number[] = [];
    const remote: number[] = [];
    ct.rank.forEach((rk, i) => {
      if (rk === r) (ownerOf(ct.kvPart[i]!) === r ? local : remote).push(i);
    });
    if (local.length) ops.push({ rank: r, after: -1, tasks: [], chunkTasks: local });
    if (remote.length) {
      lastOp.set(r, ops.length);
      ops.push({ rank: r, after: 0, tasks: [], chunkTasks: remote });
    }
  }
  // Chunk kv: part p to every other rank that has a task on it.
  const kv: { src: number; dst: number; part: number }[] = [];
  const seen = new Set<string>();
  ct.rank.forEach((rk, i) => {
    const p = ct.kvPart[i]!;
    const key = `${rk}:${p}`;
    if (ownerOf(p) !== rk && !seen.has(key)) {
      seen.add(key);
      kv.push({ src: ownerOf(p), dst: rk, part: p });
    }
  });
  const chunkPhase = (withDkv: boolean) => {
    const rows = kv.map((x) => ({ ...x, kind: Kind.kv as number, group: 0, round: -1 }));
    const pairs: [number, number][] = [];
    if (withDkv)
      for (const x of kv) {
        pairs.push([rows.length, lastOp.get(x.dst)!]);
        rows.push({ src: x.dst, dst: x.src, part: x.part, kind: Kind.dkv, group: 1, round: -1 });
      }
    const gor = roundsOf(rows);
    const phase = phaseOf([], ops, []);
    phase.groupOfRound = gor;
    phase.chunkTransfers = {
      round: Int32Array.from(rows, (x) => x.round),
      src: Int32Array.from(rows, (x) => x.src),
      dst: Int32Array.from(rows, (x) => x.dst),
      kind: Uint8Array.from(rows, (x) => x.kind),
      set: new Int32Array(rows.length),
      parts: new Int32Array(rows.length).fill(P),
      part: Int32Array.from(rows, (x) => x.part),
    };
    phase.sendAfter = {
      transfer: new Int32Array(0),
      compute: new Int32Array(0),
      chunkTransfer: Int32Array.from(pairs, (p) => p[0]),
      chunkCompute: Int32Array.from(pairs, (p) => p[1]),
    };
    return phase;
  };
  const empty: Layout = {
    rank: new Int32Array(0),
    seq: new Int32Array(0),
    start: new Int32Array(0),
    length: new Int32Array(0),
  };
  return {
    format: PLAN_FORMAT,
    strategy: 'chunked',
    world,
    mask: problem.mask,
    model: problem.model,
    sequences: problem.sequences.slice(),
    userLayout: empty,
    homeLayout: { ...empty },
    tasks: {
      rank: new Int32Array(0),
      seq: new Int32Array(0),
      qStart: new Int32Array(0),
      qLength: new Int32Array(0),
      kvStart: new Int32Array(0),
      kvLength: new Int32Array(0),
    },
    seqSets: { offsets: Int32Array.of(0, S), seqs: Int32Array.from({ length: S }, (_, i) => i) },
    homeChunks: chunkLayout,
    userChunks: {
      rank: chunkLayout.rank.slice(),
      set: chunkLayout.set.slice(),
      parts: chunkLayout.parts.slice(),
      part: chunkLayout.part.slice(),
    },
    chunkTasks: {
      rank: Int32Array.from(ct.rank),
      set: new Int32Array(ct.rank.length),
      parts: new Int32Array(ct.rank.length).fill(P),
      qPart: Int32Array.from(ct.qPart),
      kvPart: Int32Array.from(ct.kvPart),
    },
    forward: chunkPhase(false),
    backward: chunkPhase(true),
  };
}

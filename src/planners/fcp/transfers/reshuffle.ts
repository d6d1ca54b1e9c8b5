/**
 * Transparent reshuffler (docs/design.md, FCP's planner): the pieces where the user layout and the home
 * layout meet. A piece is a maximal token range of one sequence that has one user rank and one
 * home rank; a piece whose two ranks differ is one `in` transfer (Q,K,V forward, dO backward,
 * user -> home) and one `out` transfer (O forward, dQ,dK,dV backward, home -> user). Pieces whose
 * ranks agree need neither, which is what the distributor's locality tie-break aims for.
 */
import { kvBytesPerToken, qBytesPerToken } from '../../../model/attention.ts';
import type { ModelShape } from '../../../plan/types.ts';
import type { HomeRuns, SeqRows } from '../placement/layout.ts';

/** Intersections of home runs and user rows, sequence-major (by sequence, then start). */
export interface Pieces {
  readonly seq: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
  readonly user: Int32Array;
  readonly home: Int32Array;
  /** Home run holding the piece. */
  readonly run: Int32Array;
  /** Pieces of run r: runOff[r]..runOff[r+1]-1 (in position order). */
  readonly runOff: Int32Array;
  /** Pieces that move (user != home), in piece order: the `in` edges (and, reversed, the `out` edges). */
  readonly moving: Int32Array;
  /** Index into `moving` of each piece, or -1 for a piece that stays. */
  readonly movingIndex: Int32Array;
}

/** Intersects the home runs with the user rows (a merge walk per sequence); moving pieces are cut at multiples of `chunk` (0: not cut). */
export function reshufflePieces(runs: HomeRuns, userRows: SeqRows, chunk = 0): Pieces {
  const S = runs.off.length - 1;
  const seq: number[] = [];
  const start: number[] = [];
  const length: number[] = [];
  const user: number[] = [];
  const home: number[] = [];
  const run: number[] = [];
  const runCount = runs.rank.length;
  const runOff = new Int32Array(runCount + 1);
  for (let s = 0; s < S; s++) {
    let i = runs.off[s]!;
    const ie = runs.off[s + 1]!;
    let j = userRows.off[s]!;
    const je = userRows.off[s + 1]!;
    while (i < ie && j < je) {
      const ra = runs.start[i]!;
      const rb = ra + runs.length[i]!;
      const ua = userRows.start[j]!;
      const ub = ua + userRows.length[j]!;
      const a = Math.max(ra, ua);
      const b = Math.min(rb, ub);
      // A moving piece is cut at multiples of `chunk` (sequence positions): messages of bounded
      // size keep the rounds even in bytes.
      const cut = chunk > 0 && userRows.rank[j] !== runs.rank[i] ? chunk : 0;
      for (let x = a; x < b; ) {
        const y = cut > 0 ? Math.min(b, (Math.floor(x / cut) + 1) * cut) : b;
        seq.push(s);
        start.push(x);
        length.push(y - x);
        user.push(userRows.rank[j]!);
        home.push(runs.rank[i]!);
        run.push(i);
        runOff[i + 1]!++;
        x = y;
      }
      if (rb <= ub) i++;
      else j++;
    }
  }
  for (let r = 0; r < runCount; r++) runOff[r + 1]! += runOff[r]!;
  const n = seq.length;
  const movingIndex = new Int32Array(n).fill(-1);
  const moving: number[] = [];
  for (let p = 0; p < n; p++)
    if (user[p] !== home[p]) {
      movingIndex[p] = moving.length;
      moving.push(p);
    }
  return {
    seq: Int32Array.from(seq),
    start: Int32Array.from(start),
    length: Int32Array.from(length),
    user: Int32Array.from(user),
    home: Int32Array.from(home),
    run: Int32Array.from(run),
    runOff,
    moving: Int32Array.from(moving),
    movingIndex,
  };
}

/** Tokens that the forward `in` moves (the same count moves back by `out`). */
export function movedTokens(p: Pieces): number {
  let t = 0;
  for (let i = 0; i < p.moving.length; i++) t += p.length[p.moving[i]!]!;
  return t;
}

/** Bytes of the four reshuffles of a training step: forward in (Q,K,V) and out (O), backward in (dO) and out (dQ,dK,dV). */
export function reshuffleBytes(p: Pieces, m: ModelShape): number {
  const q = qBytesPerToken(m);
  const kv = kvBytesPerToken(m);
  return movedTokens(p) * (q + kv + q + q + q + kv);
}

/** The piece of run `run` that contains token `pos`, or -1. */
export function pieceAt(p: Pieces, run: number, pos: number): number {
  for (let i = p.runOff[run]!, e = p.runOff[run + 1]!; i < e; i++) {
    const a = p.start[i]!;
    if (pos >= a && pos < a + p.length[i]!) return i;
  }
  return -1;
}

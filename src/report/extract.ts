/**
 * Plan -> report data: the placement matrix (ranks x sequences, from the home layout) and the round
 * structure (messages per rank per round, from a phase's transfers). Pure functions over a plan;
 * their output is small enough to keep in `results.json`.
 */
import { partLength } from '../plan/parts.ts';
import type { Plan } from '../plan/types.ts';
import type { Placement, RoundStructure } from './results.ts';

/** Options of {@link placementOf}. */
export interface PlacementOptions {
  /** Longest sequences shown as rows of their own (default 24); the rest share length-class rows. */
  topSequences?: number;
}

/** `1.2K`, `412K`, `1.5M`: token counts for labels. */
export function shortTokens(n: number): string {
  if (n >= 1 << 20) return `${trim(n / (1 << 20))}M`;
  if (n >= 1024) return `${trim(n / 1024)}K`;
  return String(n);
}
const trim = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(0) : x.toFixed(1));

/**
 * Where a plan's home layout puts each sequence. The `topSequences` longest sequences get a row each
 * (label `#id 412K`); every other sequence joins the row of its power-of-two length class
 * (`1K-2K`), so that the figure stays readable with thousands of short sequences. Rows are ordered
 * longest first; cells hold tokens per (rank, row) and only non-zero cells are listed.
 */
export function placementOf(plan: Plan, options: PlacementOptions = {}): Placement {
  const top = options.topSequences ?? 24;
  const lens = plan.sequences;
  const order = Array.from(lens.keys()).sort((a, b) => lens[b]! - lens[a]! || a - b);
  const rowOfSeq = new Int32Array(lens.length);
  const rows: Placement['rows'] = [];
  const classRow = new Map<number, number>();
  const ownRows = Math.min(top, order.length);
  for (let i = 0; i < ownRows; i++) {
    const s = order[i]!;
    rowOfSeq[s] = rows.length;
    rows.push({ label: `#${s} ${shortTokens(lens[s]!)}`, sequences: 1, tokens: lens[s]! });
  }
  for (let i = ownRows; i < order.length; i++) {
    const s = order[i]!;
    const cls = Math.floor(Math.log2(lens[s]!));
    let row = classRow.get(cls);
    if (row === undefined) {
      row = rows.length;
      classRow.set(cls, row);
      rows.push({
        label: `${shortTokens(2 ** cls)}-${shortTokens(2 ** (cls + 1))}`,
        sequences: 0,
        tokens: 0,
      });
    }
    rowOfSeq[s] = row;
    rows[row]!.sequences++;
    rows[row]!.tokens += lens[s]!;
  }
  for (const r of rows) if (r.sequences > 1) r.label = `${r.label} (${r.sequences} seqs)`;
  const world = plan.world;
  const grid = new Float64Array(world * rows.length);
  const h = plan.homeLayout;
  for (let i = 0; i < h.rank.length; i++)
    grid[h.rank[i]! * rows.length + rowOfSeq[h.seq[i]!]!]! += h.length[i]!;
  const hc = plan.homeChunks;
  const sets = plan.seqSets;
  if (hc && sets)
    for (let i = 0; i < hc.rank.length; i++) {
      const set = hc.set[i]!;
      for (let j = sets.offsets[set]!; j < sets.offsets[set + 1]!; j++) {
        const s = sets.seqs[j]!;
        grid[hc.rank[i]! * rows.length + rowOfSeq[s]!]! += partLength(lens[s]!, hc.parts[i]!, hc.part[i]!);
      }
    }
  const cells: Placement['cells'] = [];
  for (let r = 0; r < world; r++)
    for (let row = 0; row < rows.length; row++) {
      const t = grid[r * rows.length + row]!;
      if (t > 0) cells.push({ rank: r, row, tokens: t });
    }
  return { strategy: plan.strategy, world, rows, cells };
}

/**
 * Messages each rank sends and receives in each round of one phase. A transfer row is one message;
 * a chunk-transfer row is one message too (the parts of every sequence of its set travel together).
 */
export function roundsOf(plan: Plan, phase: 'forward' | 'backward'): RoundStructure {
  const ph = plan[phase];
  const world = plan.world;
  let rounds = ph.groupOfRound.length;
  const t = ph.transfers;
  const ct = ph.chunkTransfers;
  for (let i = 0; i < t.round.length; i++) rounds = Math.max(rounds, t.round[i]! + 1);
  if (ct) for (let i = 0; i < ct.round.length; i++) rounds = Math.max(rounds, ct.round[i]! + 1);
  const sends = new Int32Array(rounds * world);
  const recvs = new Int32Array(rounds * world);
  const add = (round: number, src: number, dst: number): void => {
    sends[round * world + src]!++;
    recvs[round * world + dst]!++;
  };
  for (let i = 0; i < t.round.length; i++) add(t.round[i]!, t.src[i]!, t.dst[i]!);
  if (ct) for (let i = 0; i < ct.round.length; i++) add(ct.round[i]!, ct.src[i]!, ct.dst[i]!);
  const cells: RoundStructure['cells'] = [];
  for (let round = 0; round < rounds; round++)
    for (let rank = 0; rank < world; rank++) {
      const k = round * world + rank;
      if (sends[k]! > 0 || recvs[k]! > 0) cells.push({ round, rank, sends: sends[k]!, receives: recvs[k]! });
    }
  return { strategy: plan.strategy, phase, world, rounds, cells };
}

/** Most messages one rank sends or receives in one round (0 when there are none). */
export function congestionOf(r: RoundStructure): number {
  let m = 0;
  for (const c of r.cells) m = Math.max(m, c.sends, c.receives);
  return m;
}

/** Sequence lengths bucketed by powers of two: bucket [lo, 2*lo) with its count and tokens. */
export function lengthHistogram(lengths: ArrayLike<number>): { lo: number; count: number; tokens: number }[] {
  const byExp = new Map<number, { lo: number; count: number; tokens: number }>();
  for (let i = 0; i < lengths.length; i++) {
    const len = lengths[i]!;
    if (len <= 0) continue;
    const e = Math.floor(Math.log2(len));
    const b = byExp.get(e) ?? { lo: 2 ** e, count: 0, tokens: 0 };
    b.count++;
    b.tokens += len;
    byExp.set(e, b);
  }
  return [...byExp.values()].sort((a, b) => a.lo - b.lo);
}

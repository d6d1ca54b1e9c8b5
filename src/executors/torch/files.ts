/**
 * Files exchanged with the Python workers (see python/fcp_torch/io.py):
 *
 * - input file: little-endian float32 sections q, k, v, dO, each the sequences in id order, each
 *   [tokens, heads, headDim] (q and dO with qHeads, k and v with kvHeads);
 * - per rank `rank{r}.json` (user rows, timings, kernel choices) and `rank{r}.bin` (float32 o, dq,
 *   dk, dv over the rank's user tokens in user-row order).
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { FcpError, issue } from '../../core/issues.ts';
import type { Plan } from '../../plan/types.ts';
import type { SequenceInputs, SequenceOutputs } from '../types.ts';

/** Writes the input file (native byte order must be little-endian, as on every supported machine). */
export function writeInputFile(path: string, inputs: SequenceInputs): void {
  const fd = openSync(path, 'w');
  try {
    for (const field of ['q', 'k', 'v', 'dO'] as const)
      for (const a of inputs[field]) writeSync(fd, new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  } finally {
    closeSync(fd);
  }
}

/** One phase's numbers of one iteration on one rank, as the worker writes them. */
export interface WorkerPhaseStats {
  wall_ms: number;
  compute_ms: number;
  comm_ms: number;
  ops: number;
  launches: number;
  pairs: number;
  bytes_sent: number;
  launch_kinds: Record<string, number>;
}

/** A worker's rank{r}.json. */
export interface WorkerInfo {
  rank: number;
  world: number;
  device: string;
  gpu: string | null;
  torch: string;
  backend: string;
  kernel: string;
  mode: string;
  dtype: string;
  kernelsAvailable: Record<string, boolean>;
  kernelErrors: Record<string, string>;
  prepareMs: number;
  pairsForward: number;
  pairsBackward: number;
  userRows: { seq: number[]; start: number[]; length: number[] };
  iters: { forward: WorkerPhaseStats; backward: WorkerPhaseStats }[];
}

/** Reads every rank's rank{r}.json. */
export function readWorkerInfos(dir: string, world: number): WorkerInfo[] {
  const out: WorkerInfo[] = [];
  for (let r = 0; r < world; r++) {
    const p = join(dir, `rank${r}.json`);
    try {
      out.push(JSON.parse(readFileSync(p, 'utf8')) as WorkerInfo);
    } catch (e) {
      throw new FcpError(issue('run.output', `rank ${r} left no readable ${p} (${(e as Error).message})`));
    }
  }
  return out;
}

/** Assembles per-sequence outputs from the ranks' rank{r}.bin files (tokens nobody wrote stay NaN). */
export function readOutputs(dir: string, plan: Plan, infos: readonly WorkerInfo[]): SequenceOutputs {
  const { qHeads, kvHeads, headDim } = plan.model;
  const qw = qHeads * headDim;
  const kw = kvHeads * headDim;
  const make = (w: number) => Array.from(plan.sequences, (len) => new Float32Array(len * w).fill(Number.NaN));
  const out: SequenceOutputs = { o: make(qw), dq: make(qw), dk: make(kw), dv: make(kw) };
  for (const info of infos) {
    const buf = readFileSync(join(dir, `rank${info.rank}.bin`));
    // Copy: a Buffer from readFileSync may start at an offset that is not a multiple of 4.
    const data = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    const rows = info.userRows;
    let users = 0;
    for (const n of rows.length) users += n;
    const want = users * (2 * qw + 2 * kw);
    if (data.length !== want)
      throw new FcpError(
        issue('run.output', `rank ${info.rank} wrote ${data.length} values, expected ${want}`),
      );
    let off = 0;
    for (const [field, w] of [
      ['o', qw],
      ['dq', qw],
      ['dk', kw],
      ['dv', kw],
    ] as const) {
      for (let i = 0; i < rows.seq.length; i++) {
        const s = rows.seq[i]!;
        const a = rows.start[i]!;
        const n = rows.length[i]!;
        out[field][s]!.set(data.subarray(off, off + n * w), a * w);
        off += n * w;
      }
    }
  }
  return out;
}

/**
 * The CSV tables of the commands (`--csv`, docs/cli.md): plain numbers in base units (bytes,
 * milliseconds, fractions), one header row, so that a spreadsheet or pandas reads them as they are.
 */
import type { PhaseReport, PlanReport } from '../plan/report.ts';
import type { Cell } from './output.ts';

/** Header and rows of a CSV table. */
export type CsvTable = [header: string[], rows: Cell[][]];

/** The validator's rule-6 report: one row per phase (forward, backward) and one for the plan. */
export function reportCsv(r: PlanReport): CsvTable {
  const header = [
    'phase',
    'rounds',
    'groups',
    'compute_ops',
    'transfer_rows',
    'messages',
    'congestion',
    'nic_congestion',
    'nvlink_congestion',
    'kv_delta',
    'kv_rounds',
    'kv_direct_delta',
    'bytes_in',
    'bytes_kv',
    'bytes_dkv',
    'bytes_out',
    'bytes_total',
    'comm_imbalance',
    'compute_imbalance',
    'useful_flops',
  ];
  const phase = (name: string, p: PhaseReport): Cell[] => [
    name,
    p.rounds,
    p.groups,
    p.computeOps,
    p.transferRows,
    p.messages,
    p.congestion,
    p.nicCongestion,
    p.nvlinkCongestion,
    p.kvDelta,
    p.kvRounds,
    p.kvDirectDelta,
    p.bytes.in,
    p.bytes.kv,
    p.bytes.dkv,
    p.bytes.out,
    p.totalBytes,
    p.commImbalance,
    r.computeImbalance,
    p.flops,
  ];
  const f = r.forward;
  const b = r.backward;
  const total: Cell[] = [
    'total',
    r.rounds,
    r.groups,
    f.computeOps + b.computeOps,
    f.transferRows + b.transferRows,
    f.messages + b.messages,
    r.congestion,
    r.nicCongestion,
    r.nvlinkCongestion,
    null,
    null,
    null,
    f.bytes.in + b.bytes.in,
    f.bytes.kv + b.bytes.kv,
    f.bytes.dkv + b.bytes.dkv,
    f.bytes.out + b.bytes.out,
    r.totalBytes,
    r.commImbalance,
    r.computeImbalance,
    f.flops + b.flops,
  ];
  return [header, [phase('forward', f), phase('backward', b), total]];
}

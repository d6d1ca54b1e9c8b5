/**
 * Options of the per-rank memory estimate (src/plan/memory.ts) shared by `fcp plan` and `fcp run`:
 * `--dtype`, `--kernels`, `--layers`, checked before any planning or running.
 */
import type { Command } from 'commander';
import { fail } from '../core/issues.ts';
import { DTYPE_BYTES, type MemoryOptions } from '../plan/memory.ts';
import { intOption, numberOption } from './common.ts';

/** Largest `--layers` (a typo such as 1e9 would only print nonsense). */
const MAX_LAYERS = 10000;

/** Adds `--dtype`, `--kernels`, `--layers` and `--no-memory` to `fcp plan`. */
export function addMemoryOptions(cmd: Command): Command {
  return cmd
    .option('--dtype <dtype>', 'memory estimate: compute dtype float32, bfloat16 or float16', 'bfloat16')
    .option('--kernels <kind>', 'memory estimate: gpu (flash/cuDNN) or math (the CPU runtime)', 'gpu')
    .option('--layers <n>', 'memory estimate: attention layers sharing one FcpAttention', '1')
    .option('--no-memory', 'skip the per-rank memory estimate');
}

/** The estimate's options from parsed options; `option.dtype|kernels|layers` when out of range. */
export function memoryOptionsFrom(o: Record<string, unknown>): MemoryOptions {
  const dtype = String(o.dtype ?? 'bfloat16');
  if (!Object.hasOwn(DTYPE_BYTES, dtype))
    fail(
      'option.dtype',
      `--dtype must be one of ${Object.keys(DTYPE_BYTES).join(', ')} (got ${dtype})`,
      'dtype',
    );
  const kernel = String(o.kernels ?? 'gpu');
  if (kernel !== 'math' && kernel !== 'gpu')
    fail('option.kernels', `--kernels must be math (the CPU runtime) or gpu (got ${kernel})`, 'kernels');
  const layers = intOption(o.layers ?? 1, 'layers');
  if (layers < 1 || layers > MAX_LAYERS)
    fail('option.layers', `--layers must be between 1 and ${MAX_LAYERS} (got ${layers})`, 'layers');
  return { dtype: dtype as MemoryOptions['dtype'], kernel, layers };
}

/** `--memory-gb X` in bytes (X GiB), or undefined; `option.memoryGb` unless X > 0. */
export function memoryBudgetFrom(o: Record<string, unknown>): number | undefined {
  if (o.memoryGb === undefined) return undefined;
  const gb = numberOption(o.memoryGb, 'memoryGb');
  if (!(gb > 0) || !Number.isFinite(gb))
    fail('option.memoryGb', `--memory-gb must be a positive number of GiB (got ${o.memoryGb})`, 'memoryGb');
  return gb * 2 ** 30;
}

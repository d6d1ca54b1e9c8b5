/**
 * Kernel calibration tables: measured attention launch times on one GPU, loaded from the JSON
 * formats of `data/calibration/` (see its README). Rows with `segments` are varlen flash launches
 * of `segments` equal segments (causal bottom-right aligned); rows of `kind: "batch"` are dense
 * launches of `pairs` equal squares, one backend per `name`; rows of `kind: "rect"` whose name
 * mentions cuDNN are dense full rectangles; other `varlen`/`rect` rows (forward-only spot checks of
 * the first SDPA file) are read but not used. A single segment of at most 64 x 64 is the launch
 * floor.
 *
 * Default: `h200-measured.json`, the GPU runtime's own kernel calls on an H200: its varlen grid for
 * the varlen path and its cuDNN squares and rectangles for the dense path, which is how the runtime
 * runs pieces (see kernel.ts).
 */
import { dataPath } from '../core/data-dir.ts';
import { readInputFile } from '../core/files.ts';
import { FcpError, type FcpIssue, fail, issue } from '../core/issues.ts';

/** One measured launch: `count` equal segments of `lq` queries against `lk` keys. */
export interface KernelPoint {
  readonly lq: number;
  readonly lk: number;
  readonly causal: boolean;
  /** Segments (varlen) or batch entries (dense) in the launch. */
  readonly count: number;
  readonly fwdMs: number;
  /** Absent when only the forward was measured. */
  readonly bwdMs?: number;
}

/** The measurements the kernel model interpolates. */
export interface Calibration {
  /** Files the tables came from (for reports). */
  readonly sources: readonly string[];
  /** Varlen launches (the flexible path). */
  readonly varlen: readonly KernelPoint[];
  /** Dense batched launches of equal squares (lq = lk); empty when the files hold none. */
  readonly dense: readonly KernelPoint[];
  /** Name of the dense backend used (e.g. `sdpa-cudnn`), when there are dense rows. */
  readonly denseBackend?: string;
  /** The smallest measured launch (the launch floor), used to derive the per-launch overhead. */
  readonly floor?: KernelPoint;
  /** Peak TFLOP/s the file's MFU columns refer to (informational; times are what is used). */
  readonly peakTflops: number;
}

/**
 * The default calibration, relative to `data/`: the GPU runtime's own kernel calls measured on an
 * H200 (varlen grid, dense cuDNN squares and full rectangles, launch floor).
 */
export const DEFAULT_CALIBRATION_FILES = ['calibration/h200-measured.json'] as const;

/** The first shipped tables (same H200, measured before the runtime existed). */
export const SHIPPED_CALIBRATION_FILES = [
  'calibration/h200-torch2.11-flash-varlen.json',
  'calibration/h200-torch2.11-sdpa.json',
] as const;

/** The dense backend the GPU runtime calls: every row whose name mentions cuDNN (batch or rect). */
export const PREFERRED_DENSE_BACKEND = 'cudnn';
const CUDNN = PREFERRED_DENSE_BACKEND;

/** A launch at or below this many query and key tokens with one segment is a launch-floor probe. */
const FLOOR_MAX_TOKENS = 64;

let defaultCache: Calibration | undefined;

/** The default calibration (the shipped H200 tables), loaded once. */
export function defaultCalibration(): Calibration {
  defaultCache ??= loadCalibration(DEFAULT_CALIBRATION_FILES.map((f) => dataPath(f)));
  return defaultCache;
}

/**
 * Loads and merges calibration files (either format). Throws FcpError `io.read`,
 * `calibration.json`, `calibration.row` or `calibration.incomplete`.
 */
export function loadCalibration(paths: readonly string[]): Calibration {
  if (paths.length === 0) fail('calibration.incomplete', 'no calibration file given', 'calibration');
  const docs: { path: string; json: unknown }[] = [];
  for (const p of paths) {
    const text = readInputFile(p, 'calibration', 'utf8');
    try {
      docs.push({ path: p, json: JSON.parse(text) as unknown });
    } catch (e) {
      fail('calibration.json', `${p} is not valid JSON (${(e as Error).message})`, p);
    }
  }
  return calibrationFromJson(docs);
}

interface RowSets {
  grid: KernelPoint[];
  dense: Map<string, KernelPoint[]>;
  floor?: KernelPoint;
  peak?: number;
}

/** Builds a calibration from parsed documents (exposed for tests). */
export function calibrationFromJson(docs: readonly { path: string; json: unknown }[]): Calibration {
  const issues: FcpIssue[] = [];
  const sets: RowSets = { grid: [], dense: new Map() };
  for (const { path, json } of docs) readDoc(path, json, sets, issues);
  if (issues.length > 0) throw new FcpError(issues);

  // Varlen path: grid rows only. The SDPA file's forward-only varlen rows cannot cost a backward, and
  // mixing two sessions' measurements of the same shape would blur both.
  const varlen = sets.grid;
  const names = docs.map((d) => d.path).join(', ');
  if (!varlen.some((p) => p.bwdMs !== undefined))
    fail(
      'calibration.incomplete',
      `${names} hold no varlen backward timings; add a varlen grid such as data/calibration/h200-torch2.11-flash-varlen.json`,
      'calibration',
    );
  let denseBackend: string | undefined;
  if (sets.dense.has(PREFERRED_DENSE_BACKEND)) denseBackend = PREFERRED_DENSE_BACKEND;
  else denseBackend = [...sets.dense.keys()].sort()[0];
  const dense = denseBackend === undefined ? [] : (sets.dense.get(denseBackend) ?? []);
  const out: {
    sources: string[];
    varlen: KernelPoint[];
    dense: KernelPoint[];
    peakTflops: number;
    denseBackend?: string;
    floor?: KernelPoint;
  } = { sources: docs.map((d) => d.path), varlen, dense, peakTflops: sets.peak ?? 989 };
  if (denseBackend !== undefined) out.denseBackend = denseBackend;
  if (sets.floor) out.floor = sets.floor;
  return out;
}

function readDoc(path: string, json: unknown, sets: RowSets, issues: FcpIssue[]): void {
  if (typeof json !== 'object' || json === null || !Array.isArray((json as { rows?: unknown }).rows)) {
    issues.push(issue('calibration.json', `${path} must hold an object with a "rows" array`, path));
    return;
  }
  const doc = json as { rows: unknown[]; peak_tflops?: unknown };
  if (typeof doc.peak_tflops === 'number' && doc.peak_tflops > 0) sets.peak = doc.peak_tflops;
  doc.rows.forEach((raw, i) => {
    const why = readRow(raw, sets);
    if (why !== undefined) issues.push(issue('calibration.row', `${path} row ${i}: ${why}`, path, i));
  });
}

/** Files one row into `sets`; returns what is wrong with it, if anything. */
function readRow(raw: unknown, sets: RowSets): string | undefined {
  if (typeof raw !== 'object' || raw === null) return 'not an object';
  const r = raw as Record<string, unknown>;
  const lq = r.lq;
  const lk = r.lk;
  const fwd = r.fwd_ms;
  if (!isPosInt(lq) || !isPosInt(lk)) return 'lq and lk must be positive integers';
  if (typeof r.causal !== 'boolean') return 'causal must be true or false';
  if (!isPosNum(fwd)) return 'fwd_ms must be a positive number';
  const bwd = r.bwd_ms;
  if (bwd !== undefined && bwd !== null && !isPosNum(bwd))
    return 'bwd_ms must be a positive number when present';
  const count = r.segments ?? r.pairs;
  if (!isPosInt(count)) return 'segments (or pairs) must be a positive integer';
  const p: { lq: number; lk: number; causal: boolean; count: number; fwdMs: number; bwdMs?: number } = {
    lq,
    lk,
    causal: r.causal,
    count,
    fwdMs: fwd,
  };
  if (isPosNum(bwd)) p.bwdMs = bwd;
  if (r.segments !== undefined) {
    // Varlen grid row. A single tiny segment measures the launch floor, not an efficiency.
    if (count === 1 && lq <= FLOOR_MAX_TOKENS && lk <= FLOOR_MAX_TOKENS) {
      if (!sets.floor || lq * lk < sets.floor.lq * sets.floor.lk) sets.floor = p;
    } else sets.grid.push(p);
    return undefined;
  }
  const kind = r.kind;
  const name = typeof r.name === 'string' ? r.name : 'dense';
  // Dense launches: batches of equal squares, and cuDNN's full rectangles (kind rect, with backward).
  if (kind === 'batch' || (kind === 'rect' && name.includes('cudnn'))) {
    if (kind === 'batch' && lq !== lk) return 'dense batch rows must be squares (lq = lk)';
    if (kind === 'rect' && r.causal) return 'dense rectangle rows must be full (causal: false)';
    const backend = name.includes('cudnn') ? CUDNN : name;
    const list = sets.dense.get(backend) ?? [];
    list.push(p);
    sets.dense.set(backend, list);
    return undefined;
  }
  if (kind !== 'varlen' && kind !== 'rect')
    return `unknown row kind ${JSON.stringify(kind)} (expected batch, varlen, rect, or a varlen grid row with segments)`;
  return undefined;
}

const isPosInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1;
const isPosNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;

/** Parses `--calibration FILE[,FILE...]` (comma-separated). */
export function calibrationFromOption(value: string): Calibration {
  const paths = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return loadCalibration(paths);
}

/**
 * Reading and writing plan files (`.json`, or gzip when the name ends in `.gz`).
 *
 * The reader checks the structure (format tag, required tables, equal-length integer columns) and
 * turns columns into typed arrays; the plan's semantics are the validator's job. Writes go to a
 * temporary file renamed into place, so a failed write never leaves a partial plan behind.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { readInputFile } from '../core/files.ts';
import { FcpError, type FcpIssue, fail, issue } from '../core/issues.ts';
import { writeOutputFile } from '../core/outputs.ts';
import { COLUMNS, KIND_NAMES, PLAN_FORMAT, type Plan } from './types.ts';

/** Serialises a plan to JSON text. Deterministic: same plan, same bytes. */
export function planToJson(plan: Plan): string {
  // Columns are typed arrays (millions of rows at 4096 ranks): each is written by its own join
  // instead of being copied into a plain array for JSON.stringify (a 77 MB magi plan of 4096 ranks:
  // 2.6 -> 0.6 s). JSON.stringify writes the rest with a marker per column, then the markers are
  // replaced. The bytes are JSON.stringify's of the plan with columns as arrays (test/plan/io.test.ts).
  const columns: string[] = [];
  const text = JSON.stringify(plan, (key, value: unknown) => {
    if (!ArrayBuffer.isView(value)) return value;
    columns.push(columnJson(key, value as unknown as ArrayLike<number> & { join(s: string): string }));
    return COLUMN_MARK;
  });
  const parts = text.split(QUOTED_MARK);
  // A string of the plan's own holding the marker would misplace the columns: write it plainly.
  if (parts.length !== columns.length + 1) return plainJson(plan);
  let out = parts[0]!;
  for (let i = 0; i < columns.length; i++) out += columns[i]! + parts[i + 1]!;
  return out;
}

/** Stands for a column in planToJson's first pass (a string no plan holds in practice). */
const COLUMN_MARK = '\u0001fcp-column\u0001';
const QUOTED_MARK = JSON.stringify(COLUMN_MARK);

/** One column as JSON: kinds by name, numbers as JSON.stringify writes them (non-finite: null). */
function columnJson(key: string, arr: ArrayLike<number> & { join(s: string): string }): string {
  if (key === 'kind') return JSON.stringify(Array.from(arr, (c) => KIND_NAMES[c] ?? `?${c}`));
  // A DataView has no elements to join (JSON.stringify of Array.from writes []).
  if (typeof arr.join !== 'function') return JSON.stringify(Array.from(arr));
  if (arr instanceof Float32Array || arr instanceof Float64Array) {
    for (let i = 0; i < arr.length; i++)
      if (!Number.isFinite(arr[i]!)) return JSON.stringify(Array.from(arr));
  }
  return `[${arr.join(',')}]`;
}

/** planToJson without the column shortcut. */
function plainJson(plan: Plan): string {
  return JSON.stringify(plan, (key, value: unknown) => {
    if (ArrayBuffer.isView(value)) {
      const arr = value as unknown as ArrayLike<number>;
      if (key === 'kind') return Array.from(arr, (c) => KIND_NAMES[c] ?? `?${c}`);
      return Array.from(arr);
    }
    return value;
  });
}

/** Writes a plan atomically; gzip when `path` ends in `.gz`. */
export function writePlan(path: string, plan: Plan): void {
  const text = planToJson(plan);
  const bytes = path.endsWith('.gz') ? gzipSync(text) : Buffer.from(text);
  writeFileAtomic(path, bytes);
}

/**
 * Writes `data` to `path` through a temporary file and a rename; symlinks are written through,
 * FIFOs and character devices directly, other non-files refused (see core/outputs.ts). Throws
 * FcpError `io.write` on failure.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  writeOutputFile(path, data);
}

/** Reads and structurally checks a plan file. Throws FcpError with `io.read`, `plan.json`, `plan.format` or `plan.schema`. */
export function readPlan(path: string): Plan {
  const raw = readInputFile(path, 'plan');
  let text: string;
  try {
    text =
      path.endsWith('.gz') || (raw[0] === 0x1f && raw[1] === 0x8b)
        ? gunzipSync(raw).toString('utf8')
        : raw.toString('utf8');
  } catch {
    fail('plan.json', `${path} is not valid gzip; write plans with \`fcp plan -o FILE\``, path);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    fail('plan.json', `${path} is not valid JSON (${(e as Error).message})`, path);
  }
  return planFromJson(json);
}

/** Converts parsed JSON into a {@link Plan}, checking structure. */
export function planFromJson(json: unknown): Plan {
  const issues: FcpIssue[] = [];
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    fail('plan.schema', 'a plan file must hold a JSON object');
  }
  const o = json as Record<string, unknown>;
  if (o.format !== PLAN_FORMAT) {
    fail(
      'plan.format',
      `unsupported plan format ${JSON.stringify(o.format)}; this version of fcp reads "${PLAN_FORMAT}" (re-plan with \`fcp plan\`)`,
      'format',
    );
  }
  const out: Record<string, unknown> = { ...o };
  const num = (key: string, min: number): void => {
    const v = o[key];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
      issues.push(issue('plan.schema', `${key} must be an integer >= ${min}`, key));
  };
  num('world', 1);
  if (typeof o.strategy !== 'string')
    issues.push(issue('plan.schema', 'strategy must be a string', 'strategy'));
  if (o.mask !== 'causal' && o.mask !== 'full')
    issues.push(issue('plan.schema', 'mask must be "causal" or "full"', 'mask'));
  const m = o.model as Record<string, unknown> | undefined;
  if (typeof m !== 'object' || m === null) issues.push(issue('plan.schema', 'model is required', 'model'));
  else
    for (const k of ['qHeads', 'kvHeads', 'headDim', 'bytesPerElement'])
      if (typeof m[k] !== 'number' || !Number.isInteger(m[k]) || (m[k] as number) < 1)
        issues.push(issue('plan.schema', `model.${k} must be a positive integer`, `model.${k}`));
  out.sequences = toInt(o.sequences, 'sequences', issues);
  const table = (v: unknown, path: string, cols: readonly string[], optional: readonly string[] = []) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) {
      issues.push(issue('plan.schema', `${path} must be an object of columns`, path));
      return undefined;
    }
    const t = { ...(v as Record<string, unknown>) };
    let n = -1;
    for (const c of [...cols, ...optional]) {
      if (!(c in t)) {
        if (cols.includes(c)) issues.push(issue('plan.schema', `${path}.${c} is missing`, `${path}.${c}`));
        continue;
      }
      const arr = c === 'kind' ? toKind(t[c], `${path}.${c}`, issues) : toInt(t[c], `${path}.${c}`, issues);
      t[c] = arr;
      if (arr && !(c.endsWith('Offsets') || c.endsWith('Ids') || optional.includes(c))) {
        if (n >= 0 && arr.length !== n)
          issues.push(
            issue('plan.schema', `${path}.${c} has ${arr.length} rows, expected ${n}`, `${path}.${c}`),
          );
        n = Math.max(n, arr.length);
      }
    }
    return t;
  };
  out.userLayout = table(o.userLayout, 'userLayout', COLUMNS.layout);
  out.homeLayout = table(o.homeLayout, 'homeLayout', COLUMNS.layout);
  out.tasks = table(o.tasks, 'tasks', COLUMNS.tasks);
  if (o.seqSets !== undefined) out.seqSets = table(o.seqSets, 'seqSets', [], ['offsets', 'seqs', 'padTo']);
  if (o.homeChunks !== undefined) out.homeChunks = table(o.homeChunks, 'homeChunks', COLUMNS.chunkLayout);
  if (o.userChunks !== undefined) out.userChunks = table(o.userChunks, 'userChunks', COLUMNS.chunkLayout);
  if (o.chunkTasks !== undefined) out.chunkTasks = table(o.chunkTasks, 'chunkTasks', COLUMNS.chunkTasks);
  for (const name of ['forward', 'backward'] as const) {
    const p = o[name] as Record<string, unknown> | undefined;
    if (typeof p !== 'object' || p === null) {
      issues.push(issue('plan.schema', `${name} phase is missing`, name));
      continue;
    }
    const phase: Record<string, unknown> = { ...p };
    phase.transfers = table(p.transfers, `${name}.transfers`, COLUMNS.transfers);
    phase.groupOfRound = toInt(p.groupOfRound, `${name}.groupOfRound`, issues);
    phase.compute = table(
      p.compute,
      `${name}.compute`,
      ['rank', 'after'],
      ['taskOffsets', 'taskIds', 'chunkTaskOffsets', 'chunkTaskIds'],
    );
    const c = phase.compute as Record<string, unknown> | undefined;
    if (c && !(c.taskOffsets instanceof Int32Array))
      issues.push(
        issue('plan.schema', `${name}.compute.taskOffsets is missing`, `${name}.compute.taskOffsets`),
      );
    if (c && !(c.taskIds instanceof Int32Array))
      issues.push(issue('plan.schema', `${name}.compute.taskIds is missing`, `${name}.compute.taskIds`));
    phase.sendAfter = table(
      p.sendAfter,
      `${name}.sendAfter`,
      [],
      ['transfer', 'compute', 'chunkTransfer', 'chunkCompute'],
    );
    if (p.chunkTransfers !== undefined)
      phase.chunkTransfers = table(p.chunkTransfers, `${name}.chunkTransfers`, COLUMNS.chunkTransfers);
    if (p.commGroupOfRound !== undefined)
      phase.commGroupOfRound = toInt(p.commGroupOfRound, `${name}.commGroupOfRound`, issues);
    if (p.kvOrigin !== undefined) phase.kvOrigin = toInt(p.kvOrigin, `${name}.kvOrigin`, issues);
    if (p.pushStream !== undefined && typeof p.pushStream !== 'boolean')
      issues.push(issue('plan.schema', `${name}.pushStream must be true or false`, `${name}.pushStream`));
    out[name] = phase;
  }
  if (issues.length > 0) throw new FcpError(issues);
  const plan = out as unknown as Plan;
  for (const ph of [plan.forward, plan.backward]) {
    ph.sendAfter.transfer ??= new Int32Array(0);
    ph.sendAfter.compute ??= new Int32Array(0);
  }
  return plan;
}

function toInt(v: unknown, path: string, issues: FcpIssue[]): Int32Array | undefined {
  if (!Array.isArray(v)) {
    issues.push(issue('plan.schema', `${path} must be an array of integers`, path));
    return undefined;
  }
  const out = new Int32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < -2147483648 || x > 2147483647) {
      issues.push(issue('plan.schema', `${path} must hold 32-bit integers`, path, i));
      return undefined;
    }
    out[i] = x;
  }
  return out;
}

function toKind(v: unknown, path: string, issues: FcpIssue[]): Uint8Array | undefined {
  if (!Array.isArray(v)) {
    issues.push(issue('plan.schema', `${path} must be an array of kind names`, path));
    return undefined;
  }
  const out = new Uint8Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const code = KIND_NAMES.indexOf(v[i] as (typeof KIND_NAMES)[number]);
    if (code < 0) {
      issues.push(
        issue(
          'plan.schema',
          `${path} holds ${JSON.stringify(v[i])}; kinds are ${KIND_NAMES.join(', ')}`,
          path,
          i,
        ),
      );
      return undefined;
    }
    out[i] = code;
  }
  return out;
}

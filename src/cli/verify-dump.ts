/**
 * `fcp verify --dump DIR` / `--inputs DIR`: the dump folder. DIR/plan.json, DIR/index.json and per
 * sequence q, k, v, do, o, dq, dk, dv as NumPy `.npy` float32 arrays of shape [tokens, heads,
 * headDim] in sequence token order; written under a temporary sibling and renamed into place, so a
 * failure never leaves a half-written dump.
 */
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FcpError, fail, issue } from '../core/issues.ts';
import { npyBytes, parseNpy } from '../core/npy.ts';
import { checkOutputFolder, makeSiblingTemp, replaceFolder } from '../core/outputs.ts';
import type { OutputErrors } from '../executors/reference.ts';
import type { SequenceInputs, SequenceOutputs } from '../executors/types.ts';
import { planToJson } from '../plan/io.ts';
import type { Plan } from '../plan/types.ts';

/** Format tag of index.json. */
export const DUMP_FORMAT = 'fcp-verify-dump/1';

/** One array of a dump. */
export interface DumpArray {
  name: 'q' | 'k' | 'v' | 'do' | 'o' | 'dq' | 'dk' | 'dv';
  sequence: number;
  file: string;
  dtype: 'float32';
  byteOrder: 'little';
  shape: [number, number, number];
}

/** DIR/index.json. */
export interface DumpIndex {
  format: typeof DUMP_FORMAT;
  strategy: string;
  world: number;
  mask: Plan['mask'];
  model: Plan['model'];
  sequences: number[];
  seed: number | null;
  errors: OutputErrors | null;
  arrays: DumpArray[];
}

function fromLittleEndian(bytes: Buffer): Float32Array {
  const out = new Float32Array(bytes.length / 4);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

/** `verify --dump` folders, recognised by an index.json of {@link DUMP_FORMAT} (core/outputs.ts). */
export const DUMP_FOLDER = {
  option: '--dump',
  what: 'an fcp verify dump',
  isOwn: (dir: string): boolean => {
    try {
      return readFileSync(join(dir, 'index.json'), 'utf8').slice(0, 200).includes(`"${DUMP_FORMAT}"`);
    } catch {
      return false;
    }
  },
};

/**
 * Writes a dump directory atomically: everything goes to a temporary sibling that is renamed to
 * `dir` at the end. An existing dump at `dir` is replaced; any other non-empty directory is refused.
 */
export function writeDump(
  dir: string,
  plan: Plan,
  inputs: SequenceInputs,
  outputs: SequenceOutputs | undefined,
  meta: { seed: number | null; errors: OutputErrors | null },
): void {
  const target = checkOutputFolder(dir, DUMP_FOLDER);
  const tmp = makeSiblingTemp(target, '--dump');
  const arrays: DumpArray[] = [];
  try {
    chmodSync(tmp, 0o755); // mkdtemp makes it private; a dump is meant to be read by other tools
    writeFileSync(join(tmp, 'plan.json'), planToJson(plan));
    const qh = plan.model.qHeads;
    const kh = plan.model.kvHeads;
    const d = plan.model.headDim;
    const sets: [DumpArray['name'], Float32Array[] | undefined, number][] = [
      ['q', inputs.q, qh],
      ['k', inputs.k, kh],
      ['v', inputs.v, kh],
      ['do', inputs.dO, qh],
      ['o', outputs?.o, qh],
      ['dq', outputs?.dq, qh],
      ['dk', outputs?.dk, kh],
      ['dv', outputs?.dv, kh],
    ];
    for (let s = 0; s < plan.sequences.length; s++)
      for (const [name, arrs, heads] of sets) {
        const a = arrs?.[s];
        if (!a) continue;
        const file = `seq${s}_${name}.npy`;
        writeFileSync(join(tmp, file), npyBytes(a, [plan.sequences[s]!, heads, d]));
        arrays.push({
          name,
          sequence: s,
          file,
          dtype: 'float32',
          byteOrder: 'little',
          shape: [plan.sequences[s]!, heads, d],
        });
      }
    const index: DumpIndex = {
      format: DUMP_FORMAT,
      strategy: plan.strategy,
      world: plan.world,
      mask: plan.mask,
      model: plan.model,
      sequences: Array.from(plan.sequences),
      seed: meta.seed,
      errors: meta.errors,
      arrays,
    };
    writeFileSync(join(tmp, 'index.json'), `${JSON.stringify(index, null, 1)}\n`);
    replaceFolder(tmp, target);
  } catch (e) {
    removeQuietly(tmp);
    if (e instanceof FcpError) throw e;
    fail('io.write', `cannot write the dump ${dir}: ${(e as Error).message}`, 'dump');
  }
}

/** Removes a path if possible; cleanup after a failure must not mask the failure. */
function removeQuietly(path: string): void {
  try {
    rmSync(path, { recursive: true, force: true });
  } catch {
    // nothing to clean, or not removable: the original error is what matters
  }
}

/** Reads q, k, v, do of a dump for `plan`; FcpError `input.*` when they do not fit it. */
export function readDumpInputs(dir: string, plan: Plan): SequenceInputs {
  let index: DumpIndex;
  try {
    index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as DumpIndex;
  } catch (e) {
    fail('input.read', `cannot read ${join(dir, 'index.json')}: ${(e as Error).message}`, 'inputs');
  }
  if (index.format !== DUMP_FORMAT)
    fail('input.format', `${dir}/index.json is not an ${DUMP_FORMAT} index`, 'inputs');
  const issues = [];
  if (index.world !== plan.world)
    issues.push(
      issue(
        'input.world',
        `the inputs were dumped for ${index.world} ranks but the plan has ${plan.world}`,
        'inputs',
      ),
    );
  const m = index.model;
  if (
    m?.qHeads !== plan.model.qHeads ||
    m?.kvHeads !== plan.model.kvHeads ||
    m?.headDim !== plan.model.headDim
  )
    issues.push(
      issue('input.shape', `the inputs' model shape ${JSON.stringify(m)} differs from the plan's`, 'inputs'),
    );
  const seqs = index.sequences ?? [];
  if (seqs.length !== plan.sequences.length || seqs.some((l, i) => l !== plan.sequences[i]))
    issues.push(
      issue(
        'input.sequences',
        `the inputs hold ${seqs.length} sequences of other lengths than the plan's ${plan.sequences.length}`,
        'inputs',
      ),
    );
  if (issues.length > 0) throw new FcpError(issues);
  const out: SequenceInputs = { q: [], k: [], v: [], dO: [] };
  const key = { q: 'q', k: 'k', v: 'v', do: 'dO' } as const;
  for (let s = 0; s < plan.sequences.length; s++)
    for (const name of ['q', 'k', 'v', 'do'] as const) {
      const a = index.arrays.find((x) => x.sequence === s && x.name === name);
      if (!a) fail('input.missing', `${dir} holds no ${name} of sequence ${s}`, 'inputs');
      const heads = name === 'k' || name === 'v' ? plan.model.kvHeads : plan.model.qHeads;
      const want = plan.sequences[s]! * heads * plan.model.headDim;
      let bytes: Buffer;
      try {
        bytes = readFileSync(join(dir, a.file));
      } catch (e) {
        fail('input.read', `cannot read ${join(dir, a.file)}: ${(e as Error).message}`, 'inputs');
      }
      if (a.file.endsWith('.npy')) {
        const arr = parseNpy(bytes, join(dir, a.file));
        if (arr.data.length !== want)
          fail(
            'input.length',
            `${a.file} holds ${arr.data.length} values, expected ${want} (${plan.sequences[s]} x ${heads} x ${plan.model.headDim} float32)`,
            'inputs',
          );
        out[key[name]].push(arr.data);
        continue;
      }
      // Dumps written before .npy: raw little-endian float32.
      if (bytes.length !== want * 4)
        fail(
          'input.length',
          `${a.file} holds ${bytes.length} bytes, expected ${want * 4} (${plan.sequences[s]} x ${heads} x ${plan.model.headDim} float32)`,
          'inputs',
        );
      out[key[name]].push(fromLittleEndian(bytes));
    }
  return out;
}

/**
 * NumPy `.npy` files (format version 1.0) of little-endian float32 arrays: what `fcp verify --dump`
 * writes, so that `numpy.load(path)` reads an array of the right shape with no extra metadata.
 *
 * Layout (numpy.lib.format): the magic `\x93NUMPY`, version bytes 1 0, a little-endian uint16
 * header length, an ASCII Python dict literal `{'descr': '<f4', 'fortran_order': False, 'shape':
 * (a, b, c), }` padded with spaces and ended by a newline so that the data starts at a multiple of
 * 64 bytes, then the C-order data.
 */
import { endianness } from 'node:os';
import { fail } from './issues.ts';

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
const PREAMBLE = MAGIC.length + 4; // magic, version (2 bytes), header length (uint16)
const ALIGN = 64;

/** The header dict of a C-order little-endian float32 array. */
function headerText(shape: readonly number[]): string {
  // A 1-d shape is written `(n,)`: `(n)` is not a tuple in Python.
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  const dict = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  const unpadded = PREAMBLE + dict.length + 1;
  const pad = (ALIGN - (unpadded % ALIGN)) % ALIGN;
  return `${dict}${' '.repeat(pad)}\n`;
}

/**
 * The bytes of a `.npy` file holding `data` with `shape` (C order, float32, little-endian).
 * `shape`'s product must equal `data.length` (an internal bug otherwise).
 */
export function npyBytes(data: Float32Array, shape: readonly number[]): Uint8Array {
  let n = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new Error(`npy: bad dimension ${d} in shape [${shape}]`);
    n *= d;
  }
  if (n !== data.length) throw new Error(`npy: shape [${shape}] holds ${n} values, data has ${data.length}`);
  const header = headerText(shape);
  const out = new Uint8Array(PREAMBLE + header.length + data.length * 4);
  out.set(MAGIC, 0);
  out[6] = 1;
  out[7] = 0;
  out[8] = header.length & 0xff;
  out[9] = header.length >> 8;
  for (let i = 0; i < header.length; i++) out[PREAMBLE + i] = header.charCodeAt(i);
  const body = PREAMBLE + header.length;
  if (endianness() === 'LE') out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), body);
  else {
    const view = new DataView(out.buffer, body);
    for (let i = 0; i < data.length; i++) view.setFloat32(i * 4, data[i]!, true);
  }
  return out;
}

/** A parsed `.npy` array. */
export interface NpyArray {
  shape: number[];
  data: Float32Array;
}

/**
 * Parses a `.npy` file of float32 values (little-endian, C order; versions 1.0 to 3.0). Anything
 * else (another dtype, Fortran order, a truncated file) is FcpError `input.npy`, naming `path`.
 */
export function parseNpy(bytes: Uint8Array, path = 'array.npy'): NpyArray {
  const bad = (why: string): never =>
    fail('input.npy', `${path} is not a float32 .npy array fcp can read: ${why}`, path);
  if (bytes.length < PREAMBLE || MAGIC.some((b, i) => bytes[i] !== b)) bad('no .npy magic');
  const major = bytes[6]!;
  // Version 1 has a uint16 header length, versions 2 and 3 a uint32 one.
  const lenBytes = major === 1 ? 2 : major === 2 || major === 3 ? 4 : bad(`version ${major}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 8 + lenBytes) bad('truncated header');
  const headerLen = lenBytes === 2 ? view.getUint16(8, true) : view.getUint32(8, true);
  const start = 8 + lenBytes;
  if (bytes.length < start + headerLen) bad('truncated header');
  let header = '';
  for (let i = start; i < start + headerLen; i++) header += String.fromCharCode(bytes[i]!);
  const descr = /'descr':\s*'([^']*)'/.exec(header)?.[1];
  if (descr !== '<f4') bad(`dtype ${descr ?? '?'} (expected <f4)`);
  if (!/'fortran_order':\s*False/.test(header)) bad('Fortran order');
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (dims === undefined) bad('no shape');
  const shape = dims!
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map(Number);
  if (shape.some((d) => !Number.isInteger(d) || d < 0)) bad(`shape (${dims})`);
  let n = 1;
  for (const d of shape) n *= d;
  const body = start + headerLen;
  if (bytes.length - body !== n * 4)
    fail(
      'input.length',
      `${path} holds ${bytes.length - body} data bytes, its shape (${shape.join(', ')}) needs ${n * 4}`,
      path,
    );
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = view.getFloat32(body + i * 4, true);
  return { shape, data };
}

/**
 * Where fcp writes: one rule for every output folder (`compare --out`, `demo --out`, `report --out`,
 * `verify --dump`) and one for every output file (`-o`, `--trace`, serve's `output`).
 *
 * Folders are replaced whole (built next to the target, renamed over it), so the target must be
 * absent, an empty folder, or a folder the same command wrote before (recognised by its marker
 * file); anything else would be destroyed. Parents are created one level at a time and never with a
 * recursive mkdir: Node's recursive mkdir spins forever on pseudo-filesystems such as /proc.
 *
 * Files are written through a temporary file and a rename, except where the path is not a regular
 * file: a symlink is written through (its target is replaced, the link stays), a FIFO or character
 * device (`/dev/null`, `/dev/stdout`) is written directly, as `cp` does, and any other kind of node
 * (a folder, a socket, a block device) is refused.
 *
 * All failures are FcpError `io.write`, naming the path and what to do.
 */
import {
  accessSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fail } from './issues.ts';

/** What kind of output folder a command writes, for the messages and the "wrote it before" test. */
export interface OutputFolderKind {
  /** The option naming the folder, e.g. `--out` or `--dump`. */
  option: string;
  /** What the folder holds, e.g. `fcp compare output`. */
  what: string;
  /** True when `dir` (an existing, non-empty folder) holds output the command wrote before. */
  isOwn: (dir: string) => boolean;
}

const errnoOf = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/** An empty path (`-o ""`, a variable that expanded to nothing) names no file: refused as such. */
function refuseEmpty(path: string, option: string): void {
  if (path === '') fail('io.write', `${option} was given an empty path; name a file or folder`, option);
}

function statOrFail(path: string, option: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    fail('io.write', `cannot use ${option} ${path}: ${errnoOf(e)}`, path);
  }
}

/**
 * Creates `dir` and its missing parents, one level at a time (at most one mkdir per path
 * component). FcpError `io.write` when a level cannot be made or an existing one is not a folder.
 */
export function makeFolders(dir: string, option: string): void {
  const target = resolve(dir);
  const missing: string[] = [];
  let p = target;
  // Walk up to the first existing ancestor; bounded by the number of components.
  for (;;) {
    const st = statOrFail(p, option);
    if (st) {
      if (!st.isDirectory()) fail('io.write', `cannot use ${option} ${dir}: ${p} is not a folder`, dir);
      break;
    }
    missing.push(p);
    const up = dirname(p);
    if (up === p) break;
    p = up;
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    try {
      mkdirSync(missing[i]!);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST' && statSync(missing[i]!).isDirectory()) continue;
      fail(
        'io.write',
        `cannot create ${missing[i]} for ${option} ${dir}: ${errnoOf(e)}; choose a writable place`,
        dir,
      );
    }
  }
}

/**
 * Checks up front, before any expensive work, that `dir` can receive a folder of `kind`: it is
 * absent, an empty folder, or output the command wrote before; it is not the current folder or one
 * of its ancestors (replacing those would pull the ground from under the user); and its parent can
 * be written (a probe folder is made and removed). Returns the resolved target.
 */
export function checkOutputFolder(dir: string, kind: OutputFolderKind): string {
  refuseEmpty(dir, kind.option);
  const target = resolve(dir);
  const cwd = process.cwd();
  if (cwd === target || cwd.startsWith(target.endsWith('/') ? target : `${target}/`))
    fail(
      'io.write',
      `${kind.option} ${dir} is the current folder or one of its parents, which writing ${kind.what} would replace; choose a new folder`,
      dir,
    );
  const st = statOrFail(target, kind.option);
  if (st) {
    if (!st.isDirectory())
      fail('io.write', `${kind.option} ${dir} exists and is not a folder; choose a new or empty folder`, dir);
    let entries: string[];
    try {
      entries = readdirSync(target);
    } catch (e) {
      fail('io.write', `cannot read ${kind.option} ${dir}: ${errnoOf(e)}`, dir);
    }
    if (entries.length > 0 && !kind.isOwn(target))
      fail(
        'io.write',
        `${kind.option} ${dir} holds files that are not ${kind.what}; replacing it would delete them, so choose a new or empty folder`,
        dir,
      );
  }
  rmSync(makeSiblingTemp(target, kind.option), { recursive: true, force: true });
  return target;
}

/** Makes a temporary folder next to `target` (creating the parent); FcpError `io.write`. */
export function makeSiblingTemp(target: string, option: string): string {
  const parent = dirname(target);
  makeFolders(parent, option);
  try {
    return mkdtempSync(join(parent, `.${basename(target)}.tmp-`));
  } catch (e) {
    fail('io.write', `cannot write ${option} ${target}: ${errnoOf(e)}; choose a writable folder`, target);
  }
}

/**
 * Puts the finished folder `tmp` at `target`, replacing what is there (checked before by
 * {@link checkOutputFolder}); on failure the previous content is put back. Raw errors propagate.
 */
export function replaceFolder(tmp: string, target: string): void {
  if (!existsSync(target)) {
    renameSync(tmp, target);
    return;
  }
  const old = `${tmp}.old`;
  renameSync(target, old);
  try {
    renameSync(tmp, target);
  } catch (e) {
    renameSync(old, target);
    throw e;
  }
  rmSync(old, { recursive: true, force: true });
}

/**
 * Writes `data` to the file `path` atomically (temporary file and rename), following the rules of
 * the module comment for symlinks, FIFOs and devices. FcpError `io.write` on failure; a failed
 * write leaves the previous file as it was.
 */
export function writeOutputFile(path: string, data: string | Uint8Array): void {
  let real = path;
  let st: Stats | undefined;
  try {
    const l = lstatSync(path);
    if (l.isSymbolicLink()) {
      try {
        real = realpathSync(path);
        st = statSync(real);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        // A dangling link: write the file it names (as `cp` does), relative to the link's folder.
        st = undefined;
        real = resolve(dirname(path), readlinkSync(path));
      }
    } else st = l;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      fail('io.write', `cannot write ${path}: ${errnoOf(e)}`, path);
  }
  if (st && (st.isFIFO() || st.isCharacterDevice())) {
    try {
      writeFileSync(real, data);
    } catch (e) {
      fail('io.write', `cannot write ${path}: ${errnoOf(e)}`, path);
    }
    return;
  }
  if (st && !st.isFile())
    fail('io.write', `${path} is ${nodeKind(st)}, not a file; choose a file path`, path);
  const tmp = `${real}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, data, st ? { mode: st.mode & 0o7777 } : {});
    renameSync(tmp, real);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // nothing was written
    }
    fail('io.write', `cannot write ${path}: ${errnoOf(e)}; choose a writable path`, path);
  }
}

function nodeKind(st: Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isSocket()) return 'a socket';
  if (st.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

/**
 * Checks before any work that `path` can receive an output file: its folder exists and can be
 * written, and the path is absent, a file, a link to one, a FIFO or a character device.
 * FcpError `io.write` otherwise.
 */
export function checkOutputFile(path: string, option: string): void {
  refuseEmpty(path, option);
  const parent = dirname(resolve(path));
  const pst = statOrFail(parent, option);
  if (!pst?.isDirectory())
    fail('io.write', `cannot write ${option} ${path}: the folder ${parent} does not exist`, path);
  try {
    accessSync(parent, constants.W_OK);
  } catch (e) {
    fail('io.write', `cannot write ${option} ${path}: ${errnoOf(e)}; choose a writable folder`, path);
  }
  const st = statOrFail(path, option);
  if (st && !st.isFile() && !st.isFIFO() && !st.isCharacterDevice())
    fail('io.write', `${option} ${path} is ${nodeKind(st)}, not a file; choose a file path`, path);
}

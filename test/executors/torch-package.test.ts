/**
 * fcp_torch installs as a package (issue 16 item 1): `python3 -m venv --system-site-packages` and
 * `pip install --no-index --no-build-isolation` of a copy of python/ work offline with the system's
 * setuptools (Debian's python3-setuptools), the venv imports fcp_torch from site-packages next to
 * the system torch, and the version is package.json's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findTorchPython, pythonPackageRoot, torchSuiteSkip } from '../../src/executors/torch/python.ts';

const skip = torchSuiteSkip();
const python = skip ? null : findTorchPython();
const dir = mkdtempSync(join(tmpdir(), 'fcp-torch-package-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const npmVersion = (
  JSON.parse(readFileSync(join(pythonPackageRoot(), '..', 'package.json'), 'utf8')) as { version: string }
).version;

describe('pip install ./python', { skip }, () => {
  it('installs offline into a venv that sees the system torch; version = package.json', () => {
    const src = join(dir, 'python');
    // a copy: pip builds in place (build/, *.egg-info) and the source tree stays clean
    cpSync(pythonPackageRoot(), src, {
      recursive: true,
      filter: (p) => !/__pycache__|\.egg-info|[/\\]build$/.test(p),
    });
    const venv = join(dir, 'venv');
    const sh = (cmd: string, args: string[], cwd = dir) => {
      const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 170000 });
      assert.equal(r.status, 0, `${cmd} ${args.join(' ')}\n${r.stdout}\n${r.stderr}`);
      return r.stdout;
    };
    // --without-pip: the system's pip (seen through --system-site-packages) installs into the venv;
    // copying pip into every new venv is most of venv's time
    sh(python!.python, ['-m', 'venv', '--system-site-packages', '--without-pip', venv]);
    const vpy = join(venv, 'bin', 'python');
    sh(vpy, ['-m', 'pip', 'install', '--no-index', '--no-build-isolation', '--quiet', src]);
    const out = sh(vpy, [
      '-c',
      'import json, fcp_torch, torch; print(json.dumps({"version": fcp_torch.__version__, "file": fcp_torch.__file__}))',
    ]);
    const got = JSON.parse(out.trim().split('\n').pop()!) as { version: string; file: string };
    assert.equal(got.version, npmVersion);
    assert.match(got.file, /site-packages/);
    const toml = readFileSync(join(pythonPackageRoot(), 'pyproject.toml'), 'utf8');
    assert.match(toml, new RegExp(`^version = "${npmVersion.replaceAll('.', '\\.')}"$`, 'm'));
    assert.match(toml, /^name = "fcp-torch"$/m);
  });
});

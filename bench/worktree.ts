/**
 * A detached git worktree of an older commit, for benches that compare it with this working tree
 * (bench/ab.ts: planning time; bench/quality-ab.ts: simulated MFU). `node_modules` is linked from
 * this tree, so the old commit runs with the same dependencies.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** This repository's root (the working tree the bench runs in). */
export function repoRoot(): string {
  return resolve(execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim());
}

/**
 * Runs `fn` with a worktree of `base` (its path and short hash), then removes it unless `keep`.
 * The worktree lies in a fresh temporary folder named after the commit.
 */
export function withWorktree<T>(base: string, keep: boolean, fn: (tree: string, rev: string) => T): T {
  const root = repoRoot();
  const rev = execFileSync('git', ['rev-parse', '--short', base], { cwd: root, encoding: 'utf8' }).trim();
  const tree = join(mkdtempSync(join(tmpdir(), 'fcp-ab-')), rev);
  execFileSync('git', ['worktree', 'add', '--detach', tree, rev], { cwd: root, stdio: 'ignore' });
  if (!existsSync(join(tree, 'node_modules')))
    symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
  try {
    return fn(tree, rev);
  } finally {
    if (!keep) {
      execFileSync('git', ['worktree', 'remove', '--force', tree], { cwd: root, stdio: 'ignore' });
      rmSync(resolve(tree, '..'), { recursive: true, force: true });
    }
  }
}

import { fileURLToPath } from 'node:url';

/**
 * Absolute path of a file in the package's `data/` folder. Works from `src/` under tsx and from
 * `dist/` after the build, since both sit one level below the package root (`src/core`, `dist/core`).
 */
export function dataPath(name: string): string {
  return fileURLToPath(new URL(`../../data/${name}`, import.meta.url));
}

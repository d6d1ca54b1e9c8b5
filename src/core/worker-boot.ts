/**
 * Booting a worker thread on one of our modules, from the sources (tsx: development, tests) or
 * from `dist/`.
 *
 * Under tsx a worker on a `.ts` file fails with ERR_UNKNOWN_FILE_EXTENSION, so a worker boots from
 * eval'd code: the module bundled by esbuild when it is available (the compiler tsx itself runs
 * on; a worker then needs no loader thread of its own, about 4x faster than registering tsx in
 * every worker), else a small script that registers tsx's loader and then imports the module by
 * URL; from `dist/` the compiled `.js` module is imported directly. Used by the CPU runtime's
 * workers (executors/cpu/pool.ts) and `fcp plan`'s concurrent re-plan (cli/locality.ts).
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

function tsxApiUrl(): string {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return 'tsx/esm/api';
  }
}

/** The module at `url` and its imports bundled into one CommonJS script; undefined without esbuild. */
function bundled(url: string): string | undefined {
  try {
    const require = createRequire(tsxApiUrl());
    const esbuild = require('esbuild') as typeof import('esbuild');
    const out = esbuild.buildSync({
      entryPoints: [fileURLToPath(url)],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      write: false,
      logLevel: 'silent',
    });
    return out.outputFiles[0]?.text;
  } catch {
    return undefined;
  }
}

const cache = new Map<string, string>();

/**
 * The script a worker thread evaluates (`new Worker(code, { eval: true })`) to load the module at
 * `url` (a `.ts` URL under tsx, a `.js` one from `dist/`); computed once per module and process.
 * `bundle: false` registers tsx instead of bundling: needed where a module reads files next to it
 * through `import.meta.url` (the kernel calibration, src/cost/calibration.ts), which a CommonJS
 * bundle leaves empty.
 */
export function workerBootCode(url: string, o: { bundle?: boolean } = {}): string {
  const bundle = o.bundle ?? true;
  const key = `${bundle ? 'b' : 'r'}:${url}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const load = `import(${JSON.stringify(url)})`;
  const viaTsx = `import(${JSON.stringify(tsxApiUrl())}).then((m) => m.register()).then(() => ${load}).catch((e) => { throw e; });`;
  const code = !url.endsWith('.ts')
    ? `${load}.catch((e) => { throw e; });`
    : ((bundle ? bundled(url) : undefined) ?? viaTsx);
  cache.set(key, code);
  return code;
}

/**
 * Writes a report folder atomically: everything is built in a temporary folder next to the target
 * and renamed over it at the end, so a failure (unwritable place, full disk, a bug in a plot)
 * leaves either the previous report or nothing, never half of one.
 *
 * Folder contents: `index.html` (self-contained), `results.json` (the raw results, input of
 * `fcp report`), `plots/<id>.png` (PNG copies of the figures) and `plots/<id>.vl.json` (their
 * vega-lite specs, to restyle a figure elsewhere).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { TopLevelSpec } from 'vega-lite';
import { fail } from '../core/issues.ts';
import { checkOutputFolder, makeSiblingTemp } from '../core/outputs.ts';
import { figuresOf } from './figures.ts';
import { type RenderedFigure, reportHtml } from './html.ts';
import { RESULTS_FORMAT, type Results, resultsToJson } from './results.ts';

/** Files of a written report, relative to its folder. */
export interface WrittenReport {
  dir: string;
  files: string[];
}

/** True when `dir` holds a report fcp wrote before (its results.json has our format tag). */
function isPreviousReport(dir: string): boolean {
  try {
    const head = readFileSync(join(dir, 'results.json'), 'utf8').slice(0, 200);
    return head.includes(`"format": "${RESULTS_FORMAT}"`) || head.includes(`"format":"${RESULTS_FORMAT}"`);
  } catch {
    return false;
  }
}

/** Report folders: `--out`, recognised by their results.json. */
const REPORT_FOLDER = { option: '--out', what: 'an fcp report', isOwn: isPreviousReport };

/**
 * Checks up front that `outDir` can receive a report, before any expensive work (the rule of
 * core/outputs.ts: absent, empty, or a report fcp wrote before; a writable parent, created when
 * missing). Throws FcpError `io.write`.
 */
export function checkOutDir(outDir: string): void {
  checkOutputFolder(outDir, REPORT_FOLDER);
}

/** Creates the temporary build folder next to `target` (creating the parent); FcpError `io.write`. */
function makeTempDir(target: string): string {
  return makeSiblingTemp(target, '--out');
}

/** Turns a vega-lite spec into SVG text and PNG bytes (default: `renderChart` of plots.ts). */
export type ChartRenderer = (
  spec: TopLevelSpec,
) => Promise<{ svg: string; png: Uint8Array }> | { svg: string; png: Uint8Array };

/** Options of {@link writeReport}. */
export interface WriteReportOptions {
  /** Told before each stage. */
  onStep?: (label: string) => void;
  /** Chart renderer (tests inject failures here). */
  render?: ChartRenderer;
}

/** Renders every figure of the results (SVG inline, PNG copy). */
export async function renderFigures(
  results: Results,
  renderer?: ChartRenderer,
): Promise<{ figure: RenderedFigure; png: Uint8Array }[]> {
  // vega is loaded only when a report is drawn: it costs half a second of every CLI start otherwise.
  const render: ChartRenderer = renderer ?? (await import('./plots.ts')).renderChart;
  const out: { figure: RenderedFigure; png: Uint8Array }[] = [];
  for (const f of figuresOf(results)) {
    const { svg, png } = await render(f.spec);
    out.push({ figure: { ...f, svg, png: `plots/${f.id}.png` }, png });
  }
  return out;
}

/**
 * Renders the report of `results` into `outDir` atomically (see the module comment). Throws
 * FcpError `io.write` when the folder cannot be written; any failure leaves the previous content of
 * `outDir` (or its absence) as it was.
 */
export async function writeReport(
  results: Results,
  outDir: string,
  options: WriteReportOptions = {},
): Promise<WrittenReport> {
  const onStep = options.onStep ?? (() => {});
  const target = resolve(outDir);
  checkOutDir(outDir);
  onStep('rendering figures');
  // Rendered before the temporary folder exists: a failing figure then leaves nothing behind.
  const rendered = await renderFigures(results, options.render);
  onStep('writing index.html');
  const html = reportHtml(
    results,
    rendered.map((r) => r.figure),
  );
  const json = resultsToJson(results);
  const tmp = makeTempDir(target);
  const files: string[] = [];
  const put = (rel: string, data: string | Uint8Array): void => {
    writeFileSync(join(tmp, rel), data);
    files.push(rel);
  };
  let old: string | undefined;
  try {
    chmodSync(tmp, 0o755); // mkdtemp makes it private; a report is meant to be served and shared
    mkdirSync(join(tmp, 'plots'));
    for (const { figure, png } of rendered) {
      put(figure.png, png);
      put(`plots/${figure.id}.vl.json`, `${JSON.stringify(figure.spec, null, 1)}\n`);
    }
    put('results.json', json);
    put('index.html', html);
    if (existsSync(target)) {
      old = `${tmp}.old`;
      renameSync(target, old);
    }
    renameSync(tmp, target);
  } catch (e) {
    if (old !== undefined && !existsSync(target)) {
      try {
        renameSync(old, target); // put the previous report back
        old = undefined;
      } catch {
        // the previous report stays at `old`; the message below names the target
      }
    }
    rmSync(tmp, { recursive: true, force: true });
    fail(
      'io.write',
      `cannot write the report to ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      target,
    );
  }
  if (old !== undefined) rmSync(old, { recursive: true, force: true });
  return { dir: target, files: files.sort() };
}

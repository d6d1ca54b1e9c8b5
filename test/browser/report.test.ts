/**
 * Browser test of the HTML report: runs the demo pipeline on a small batch, writes the report,
 * serves it from 127.0.0.1, opens it in Debian's chromium through playwright-core (no browser
 * download), and checks that it loads offline with no console error and that every figure drew
 * its marks (figures behind a tab selector are shown by clicking their tab first). Saves a
 * screenshot to $FCP_SCREENSHOT (e.g. docs/report-64.png), or to the temporary folder when unset,
 * so that a test run never rewrites tracked files. $FCP_REPORT_DIR opens an existing report folder
 * instead of running the small demo (how docs/report-64.png and docs/report-256.png are made:
 * `fcp demo --world 256 --out DIR`, then this test with FCP_REPORT_DIR=DIR).
 *
 * Needs /usr/bin/chromium (`apt-get install chromium`): without it the test fails when CI is set
 * and is skipped otherwise.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';
import { runDemo } from '../../src/experiments/demo.ts';
import { resolveDemoOptions } from '../../src/experiments/demo-options.ts';
import { figuresOf } from '../../src/report/figures.ts';
import { readReportInput } from '../../src/report/input.ts';
import { provenanceOf } from '../../src/report/provenance.ts';
import type { Results } from '../../src/report/results.ts';
import { writeReport } from '../../src/report/write.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SCREENSHOT = process.env.FCP_SCREENSHOT ?? join(tmpdir(), 'fcp-report-screenshot.png');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
};

/** Serves `dir` read-only on 127.0.0.1 (a random port); records every requested path. */
async function serve(dir: string, requested: string[]): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://127.0.0.1').pathname);
    requested.push(path);
    const file = normalize(join(dir, path === '/' ? 'index.html' : path));
    if (!file.startsWith(dir) || !existsSync(file)) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const addr = server.address();
  assert.ok(addr && typeof addr === 'object');
  return { server, origin: `http://127.0.0.1:${addr.port}` };
}

const haveChromium = existsSync(CHROMIUM);
let work = '';
let results: Results;
let reportDir = '';

before(async () => {
  if (!haveChromium) return;
  work = mkdtempSync(join(tmpdir(), 'fcp-browser-'));
  if (process.env.FCP_REPORT_DIR) {
    reportDir = process.env.FCP_REPORT_DIR;
    results = readReportInput(reportDir);
    return;
  }
  reportDir = join(work, 'report');
  const options = resolveDemoOptions({
    problem: { world: 16, tokensPerRank: 8192, seed: 7 },
    scaling: [4, 8, 16],
    numerics: { world: 4, tokensPerRank: 512 },
  });
  results = await runDemo(
    options,
    provenanceOf([
      'demo',
      '--world',
      '16',
      '--tokens-per-rank',
      '8192',
      '--seed',
      '7',
      '--scaling',
      '4,8,16',
      '--numerics-world',
      '4',
    ]),
  );
  await writeReport(results, reportDir);
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the report opens offline in chromium, with no console error and every figure drawn', async (t) => {
  if (!haveChromium) {
    if (process.env.CI)
      assert.fail(
        `${CHROMIUM} is missing: the browser test needs Debian's chromium (apt-get install chromium)`,
      );
    t.skip(`${CHROMIUM} is missing (apt-get install chromium); skipped outside CI`);
    return;
  }
  const requested: string[] = [];
  const { server, origin } = await serve(reportDir, requested);
  const profile = mkdtempSync(join(work, 'profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 900 },
  });
  try {
    const external: string[] = [];
    // Offline: any request that is not to our server is recorded and refused.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(origin)) return route.continue();
      external.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') errors.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()}`));
    const response = await page.goto(`${origin}/index.html`, { waitUntil: 'load' });
    assert.equal(response?.status(), 200);

    const specs = figuresOf(results);
    const expected = specs.map((f) => f.id);
    for (const id of [
      'mfu',
      'scaling',
      'ablation',
      'timeline-forward',
      'timeline-backward',
      'busy',
      'memory',
      'lengths',
    ])
      assert.ok(expected.includes(id), `figure ${id} missing from ${expected.join(', ')}`);
    assert.deepEqual(await page.$$eval('figure', (els) => els.map((f) => f.id)), expected);
    /** Box and visible data marks of one figure, as drawn now. */
    const measure = (id: string) =>
      page.$eval(`figure[id="${id}"]`, (fig) => {
        const svg = fig.querySelector('svg');
        const box = svg?.getBoundingClientRect();
        // Vega draws data marks inside <g class="... role-mark ...">; axes and legends use other roles.
        const marks = svg ? [...svg.querySelectorAll('g.role-mark > *')] : [];
        const visible = marks.filter((m) => {
          const b = m.getBoundingClientRect();
          return b.width > 0 || b.height > 0;
        });
        return {
          width: box?.width ?? 0,
          height: box?.height ?? 0,
          marks: marks.length,
          visible: visible.length,
        };
      });
    for (const f of specs) {
      if (f.tabs) {
        // Only the checked tab's figure is shown: the others have an empty box until selected.
        await page.click(`label[for="tab-${f.id}"]`);
        for (const other of specs.filter((o) => o.tabs?.group === f.tabs!.group && o.id !== f.id))
          assert.equal(
            (await measure(other.id)).height,
            0,
            `${other.id} is hidden while ${f.id} is selected`,
          );
      }
      const m = await measure(f.id);
      assert.ok(m.width > 100 && m.height > 50, `figure ${f.id} has an empty box (${m.width}x${m.height})`);
      assert.ok(m.visible > 0, `figure ${f.id} drew no visible marks (${m.marks} mark elements)`);
    }
    // Back to the first tab of each selector for the screenshot.
    for (const f of specs.filter((x) => x.tabs && x.tabs.tab === 'forward'))
      await page.click(`label[for="tab-${f.id}"]`);
    const headlineText = (await page.textContent('.lead')) ?? '';
    if (results.runs.some((x) => x.strategy === 'fcp'))
      assert.match(headlineText, new RegExp(`^Simulated on the ${results.problem.cluster} cluster model`));
    // Tables: summary rows per strategy and a numerics row per strategy.
    const summaryRows = await page.$$eval('#summary + table tbody tr', (rows) => rows.length);
    assert.equal(summaryRows, results.runs.length);
    if (results.numerics.skipped === undefined) assert.ok(await page.isVisible('text=Numerical check'));
    assert.ok(await page.isVisible('#paper'), 'the paper comparison is shown');
    // The PNG copies the page links to exist and are PNGs.
    const pngs = await page.$$eval('a[href$=".png"]', (as) => as.map((a) => a.getAttribute('href')!));
    assert.equal(pngs.length, expected.length);
    for (const href of pngs) {
      const r = await page.request.get(`${origin}/${href}`);
      assert.equal(r.status(), 200, href);
      assert.deepEqual([...(await r.body()).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], href);
    }
    mkdirSync(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    assert.deepEqual(errors, []);
    assert.deepEqual(external, []);
    assert.deepEqual(
      requested.filter((p) => !p.endsWith('.png')),
      ['/index.html'],
      'the page itself must load nothing but index.html',
    );
  } finally {
    await context.close();
    server.close();
  }
});

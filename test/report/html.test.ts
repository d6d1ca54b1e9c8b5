import assert from 'node:assert/strict';
import { test } from 'node:test';
import { figuresOf } from '../../src/report/figures.ts';
import { escapeHtml, headline, inlineSvg, type RenderedFigure, reportHtml } from '../../src/report/html.ts';
import { summaryRows, summaryText, textTable } from '../../src/report/summary.ts';
import { smallResults } from './fixtures.ts';

const SVG = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10"><defs><linearGradient id="gradient_0"></linearGradient><clipPath id="clip1"><rect/></clipPath></defs><rect fill="url(#gradient_0)" clip-path="url(#clip1)"/><use href="#clip1"/><path d="M0,0L1,1"/></svg>`;

test('inlineSvg prefixes ids and their references and drops namespace URLs', () => {
  const out = inlineSvg(SVG, 'fig');
  assert.ok(!out.includes('http'));
  assert.ok(out.includes('id="fig-gradient_0"') && out.includes('url(#fig-gradient_0)'));
  assert.ok(
    out.includes('id="fig-clip1"') && out.includes('url(#fig-clip1)') && out.includes('href="#fig-clip1"'),
  );
  assert.ok(!/id="gradient_0"|url\(#clip1\)/.test(out));
  assert.ok(out.startsWith('<svg role="img"'));
});

test('escapeHtml escapes markup and quotes', () => {
  assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&#60;a href=&#34;x&#34;&#62;&#39;&#38;&#39;&#60;/a&#62;');
});

function rendered(): RenderedFigure[] {
  return figuresOf(smallResults()).map((f) => ({ ...f, svg: SVG, png: `plots/${f.id}.png` }));
}

test('reportHtml: one self-contained page with every figure, the tables and the provenance', () => {
  const r = smallResults();
  r.provenance.command = `fcp demo --batch '<b>'`;
  const html = reportHtml(r, rendered());
  assert.ok(html.startsWith('<!DOCTYPE html>'));
  for (const f of figuresOf(r)) {
    assert.ok(html.includes(`<figure id="${f.id}"`), f.id);
    assert.ok(html.includes(`href="plots/${f.id}.png"`), f.id);
  }
  // Self-contained: no script, no stylesheet link, no external URL of any kind.
  // (The only link is an empty data: favicon, so that browsers do not ask the server for one.)
  assert.ok(!/<script|<img|<iframe|https?:|\/\/[a-z]/i.test(html));
  assert.deepEqual(html.match(/<link[^>]*>/g), ['<link rel="icon" href="data:,">']);
  assert.ok(html.includes('fcp demo --batch &#39;&#60;b&#62;&#39;'));
  assert.ok(!html.includes('<b>'));
  for (const s of ['Summary', 'Numerical check', 'How this report was made', 'results.json'])
    assert.ok(html.includes(s), s);
  // Ids stay unique across the inlined SVGs.
  const ids = [...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]);
  assert.equal(new Set(ids).size, ids.length);
});

test('reportHtml flags invalid plans and failed numerics', () => {
  const r = smallResults();
  r.runs[1]!.valid = false;
  r.runs[1]!.issueCodes = ['plan.rule3.kvMissing'];
  r.numerics.runs[0]!.ok = false;
  const html = reportHtml(r, rendered());
  assert.ok(html.includes('Invalid plans: ring'));
  assert.ok(html.includes('Numerical check failed: fcp'));
  assert.ok(html.includes('<td class="bad">FAIL</td>'));
});

test('headline compares FCP with the best baseline from the numbers', () => {
  const r = smallResults();
  const h = headline(r)!;
  assert.match(h, /^Simulated on the hopper-ib cluster model, 8 ranks: /);
  assert.match(h, /FCP reaches attention MFU 0\.50 forward \/ 0\.45 backward/);
  assert.match(h, /ring, 0\.45 \/ 0\.41 \(FCP 1\.11x \/ 1\.10x\)/);
  const wlb = { ...r, runs: [r.runs[0]!, { ...r.runs[1]!, strategy: 'wlb', config: 'chose bytescale (x)' }] };
  assert.match(headline(wlb)!, /the best baseline, wlb \(running bytescale's plan\), /);
  assert.equal(headline({ ...r, runs: r.runs.slice(1) }), undefined);
});

test('summary table: one row per strategy, numbers right-aligned', () => {
  const r = smallResults();
  const rows = summaryRows(r);
  assert.equal(rows.length, 2);
  assert.deepEqual(rows[0]!.slice(0, 4), ['fcp', 'yes', '0.500', '0.450']);
  assert.equal(rows[0]![11], 'ok');
  const text = summaryText(r);
  assert.equal(text.split('\n').length, 4);
  assert.equal(
    textTable(
      ['a', 'n'],
      [
        ['x', '1.5'],
        ['yy', '10.25'],
      ],
    ),
    'a       n\n--  -----\nx     1.5\nyy  10.25',
  );
});

test('timeline figures become a tab selector without script, forward checked first', () => {
  const html = reportHtml(smallResults(), rendered());
  const section = /<section class="tabs" id="tabs-timeline">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';
  assert.match(
    section,
    /<input type="radio" name="tabs-timeline" id="tab-timeline-forward" checked><label for="tab-timeline-forward">forward<\/label>/,
  );
  assert.match(section, /<input type="radio" name="tabs-timeline" id="tab-timeline-backward"><label/);
  assert.ok(
    section.indexOf('<figure id="timeline-forward" class="tab">') > section.indexOf('tab-timeline-backward'),
  );
  assert.ok(section.includes('<figure id="timeline-backward" class="tab">'));
  // The CSS shows the n-th figure of a selector when its n-th radio is checked.
  assert.ok(html.includes('.tabs>input:nth-of-type(2):checked~figure:nth-of-type(2)'));
});

test('configurations, planning time, memory and the paper beside ours; "simulated" in the subtitle', () => {
  const r = smallResults();
  const html = reportHtml(r, rendered());
  assert.match(html, /<h2 id="strategies">Configurations<\/h2>/);
  assert.ok(html.includes('<td class="l">config of ring</td>'));
  assert.ok(html.includes('<td>1724 (1.1x the budget)</td>'));
  assert.match(html, /<h2 id="paper">Beside the paper<\/h2>/);
  assert.ok(html.includes('1.13x - 2.21x'));
  assert.ok(html.includes('<td>0.29 / 0.37</td><td>0.100 / 0.120</td>'));
  assert.ok(html.includes('<td>0.75 / 0.74</td><td>0.500 / 0.450</td>'));
  assert.match(html, /<span class="simulated">simulated<\/span> on cluster <code>hopper-ib<\/code>/);
  const none = reportHtml(
    { ...r, ablation: null, runs: r.runs.map(({ config, planMs, peakResidentTokens, ...x }) => x) },
    rendered(),
  );
  assert.ok(!none.includes('id="strategies"'));
  assert.ok(none.includes('id="paper"'), 'the speedups need only the runs');
});

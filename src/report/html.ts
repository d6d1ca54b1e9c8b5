/**
 * The report page: one self-contained static HTML file (inline CSS, inline SVG plots, no script,
 * no external URL) that opens offline. Pure: results and rendered figures in, text out.
 */
import { choiceOf } from './charts/style.ts';
import type { Figure } from './figures.ts';
import { PAPER_ABLATION, PAPER_ABLATION_WORLD, PAPER_SPEEDUP } from './paper.ts';
import type { Results, StrategyRun } from './results.ts';
import { numericsVerdict, SUMMARY_HEADER, summaryRows } from './summary.ts';

/** A figure with its SVG rendered and the relative path of its PNG copy. */
export interface RenderedFigure extends Figure {
  svg: string;
  png: string;
}

const plural = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Rounds every decimal number in an attribute value to two decimals (trailing zeros dropped). */
export function roundNumbers(v: string): string {
  return v.replace(/-?\d+\.\d{3,}(e-?\d+)?/g, (n) => String(Number(Number(n).toFixed(2))));
}

/**
 * Prepares an SVG document for inlining: drops the XML prolog and the namespace declarations (the
 * HTML parser puts inline `<svg>` in the SVG namespace by itself, and the page then holds no URL at
 * all), and prefixes every id and its references so that several inlined SVGs cannot capture each
 * other's gradients or clip paths.
 */
export function inlineSvg(svg: string, prefix: string): string {
  let out = svg
    .replace(/^<\?xml[^>]*>\s*/, '')
    .replace(/\s+xmlns(:xlink)?="[^"]*"/g, '')
    // Geometry to 1/100 of a pixel: vega writes full doubles, which triples dense figures' size.
    .replace(/\s(d|transform)="([^"]*)"/g, (_all, name: string, v: string) => ` ${name}="${roundNumbers(v)}"`)
    .trim();
  const ids = new Set<string>();
  for (const m of out.matchAll(/\sid="([^"]+)"/g)) ids.add(m[1]!);
  if (ids.size > 0) {
    out = out.replace(/(\sid=")([^"]+)(")/g, (all, a: string, id: string, b: string) =>
      ids.has(id) ? `${a}${prefix}-${id}${b}` : all,
    );
    out = out.replace(/url\(#([^)]+)\)/g, (all, id: string) => (ids.has(id) ? `url(#${prefix}-${id})` : all));
    out = out.replace(/(href=")#([^"]+)(")/g, (all, a: string, id: string, b: string) =>
      ids.has(id) ? `${a}#${prefix}-${id}${b}` : all,
    );
  }
  return out.replace(/^<svg\b/, `<svg role="img" aria-labelledby="${prefix}-title"`);
}

const CSS = `
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:0 0 4px}
.sub{color:#555;margin:0 0 18px}
.lead{font-size:16px;background:#fff3e8;border-left:4px solid #d95f02;padding:10px 14px;margin:14px 0}
table{border-collapse:collapse;margin:8px 0 18px;background:#fff;font-size:13px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
tr.fcp td{font-weight:bold;background:#fff8f0}
td.bad{color:#b00020;font-weight:bold}
td.l{text-align:left;font-family:"DejaVu Sans Mono",monospace}
figure{background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:22px 0;padding:14px 16px}
figcaption p{margin:2px 0 10px;color:#444}
figure svg{max-width:100%;height:auto;display:block}
.png{font-size:12px;color:#666}
.notes li{color:#8a4b00}
code,pre{font-family:"DejaVu Sans Mono",monospace;font-size:13px}
.tabs>input{position:absolute;opacity:0;pointer-events:none}
#strategies+p+table th:nth-child(2){text-align:left}
.tabs>label{display:inline-block;padding:5px 14px;margin:18px 4px -1px 0;border:1px solid #ccc;border-bottom:none;border-radius:6px 6px 0 0;background:#eee;cursor:pointer;font-size:14px}
.tabs>input:checked+label{background:#fff;font-weight:bold;border-color:#999}
.tabs>input:focus-visible+label{outline:2px solid #d95f02}
.tabs>figure{display:none;margin-top:0}
${Array.from({ length: 4 }, (_, k) => `.tabs>input:nth-of-type(${k + 1}):checked~figure:nth-of-type(${k + 1})`).join(',')}{display:block}
.simulated{font-variant:small-caps;color:#8a4b00}
pre{background:#f3f3f3;padding:8px 10px;overflow-x:auto}
`;

/** A `<table>` from a header and rows; `rowClass` may tag rows (e.g. the FCP row). */
function table(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  rowClass: (row: readonly string[]) => string = () => '',
  cellClass: (cell: string, col: number) => string = () => '',
): string {
  const th = header.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const trs = rows
    .map((row) => {
      const cls = rowClass(row);
      const tds = row
        .map((c, i) => {
          const cc = cellClass(c, i);
          return `<td${cc ? ` class="${cc}"` : ''}>${escapeHtml(c)}</td>`;
        })
        .join('');
      return `<tr${cls ? ` class="${cls}"` : ''}>${tds}</tr>`;
    })
    .join('\n');
  return `<table>\n<thead><tr>${th}</tr></thead>\n<tbody>\n${trs}\n</tbody>\n</table>`;
}

/** A two-column table of names and values, no header, values left-aligned. */
function kvTable(rows: readonly (readonly [string, string])[]): string {
  const trs = rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td class="l">${escapeHtml(v)}</td></tr>`);
  return `<table>\n<tbody>\n${trs.join('\n')}\n</tbody>\n</table>`;
}

/** Headline words for a run: `wlb (ran bytescale's plan)` for a strategy that picked another's plan. */
function named(x: StrategyRun): string {
  const c = choiceOf(x.config);
  return c ? `${x.strategy} (running ${c}'s plan)` : x.strategy;
}

/** The headline: FCP against the best baseline, from the numbers (nothing when FCP is absent). */
export function headline(r: Results): string | undefined {
  const ok = r.runs.filter((x) => x.error === undefined && x.valid);
  const fcp = ok.find((x) => x.strategy === 'fcp');
  const others = ok.filter((x) => x.strategy !== 'fcp');
  if (!fcp || others.length === 0) return undefined;
  const mean = (x: (typeof ok)[number]): number => (x.mfuForward + x.mfuBackward) / 2;
  const best = others.reduce((a, b) => (mean(b) > mean(a) ? b : a));
  const f = (x: number): string => x.toFixed(2);
  const where = `Simulated on the ${r.problem.cluster} cluster model, ${fcp.world} ranks`;
  const means = r.origin === 'compare' ? ' (means over batches)' : '';
  const imb =
    r.origin === 'compare'
      ? `FCP's forward compute imbalance is ${(100 * fcp.computeImbalance).toFixed(1)}%.`
      : `FCP's compute imbalance is ${(100 * fcp.computeImbalance).toFixed(1)}% and its communication imbalance ${(100 * fcp.commImbalance).toFixed(1)}%.`;
  return (
    `${where}${means}: FCP reaches attention MFU ${f(fcp.mfuForward)} forward / ${f(fcp.mfuBackward)} backward; ` +
    `the best baseline, ${named(best)}, ${f(best.mfuForward)} / ${f(best.mfuBackward)} ` +
    `(FCP ${f(fcp.mfuForward / best.mfuForward)}x / ${f(fcp.mfuBackward / best.mfuBackward)}x). ${imb}`
  );
}

function numericsSection(r: Results): string {
  const n = r.numerics;
  if (r.origin === 'compare') return '';
  const head = `<h2 id="numerics">Numerical check (CPU runtime)</h2>`;
  if (n.skipped !== undefined) return `${head}\n<p>Not run: ${escapeHtml(n.skipped)}</p>`;
  const m = n.model;
  const intro =
    `<p>Every strategy's plan for a scaled-down batch (${n.world} ranks x ${n.tokensPerRank} tokens, ` +
    `${plural(m.qHeads, 'query head')}, ${plural(m.kvHeads, 'KV head')}, head dim ${m.headDim}) executed by the CPU runtime ` +
    `and compared with a float64 single-device reference attention: relative error ||a - b|| / ||b|| per output.</p>`;
  const e = (x: number): string => x.toExponential(2);
  const rows = n.runs.map((x) => [
    x.strategy,
    String(x.sequences),
    x.valid ? 'yes' : 'NO',
    x.error === undefined ? e(x.relError.o) : '',
    x.error === undefined ? e(x.relError.dq) : '',
    x.error === undefined ? e(x.relError.dk) : '',
    x.error === undefined ? e(x.relError.dv) : '',
    e(x.tolerance),
    x.error !== undefined ? `error: ${x.error}` : x.ok ? 'ok' : 'FAIL',
  ]);
  return `${head}\n${intro}\n${table(
    [
      'strategy',
      'sequences',
      'valid plan',
      'error O',
      'error dQ',
      'error dK',
      'error dV',
      'tolerance',
      'result',
    ],
    rows,
    (row) => (row[0] === 'fcp' ? 'fcp' : ''),
    (c) => (c === 'FAIL' || c === 'NO' || c.startsWith('error') ? 'bad' : ''),
  )}`;
}

/** Configuration, planning time and peak memory of each strategy, when the results carry them. */
function strategiesSection(r: Results): string {
  const runs = r.runs.filter((x) => x.error === undefined);
  if (
    !runs.some((x) => x.config !== undefined || x.planMs !== undefined || x.peakResidentTokens !== undefined)
  )
    return '';
  const budget = r.memory?.[0]?.limitTokens;
  const rows = runs.map((x) => [
    x.strategy,
    x.config ?? '-',
    x.planMs !== undefined ? x.planMs.toFixed(1) : '-',
    x.peakResidentTokens !== undefined
      ? `${Math.round(x.peakResidentTokens)}${budget ? ` (${(x.peakResidentTokens / budget).toFixed(1)}x the budget)` : ''}`
      : '-',
  ]);
  return `<h2 id="strategies">Configurations</h2>
<p>What each strategy chose or was given for this batch, how long planning took (wall time of the forward and
backward plan on the machine that made this report, not simulated), and the most tokens one rank holds
(home tokens plus the K/V it received and still needs; the memory budget bounds home tokens only, see the memory figure).</p>
${table(
  ['strategy', 'configuration', 'planning ms', 'peak resident tokens'],
  rows,
  (row) => (row[0] === 'fcp' ? 'fcp' : ''),
  (_c, i) => (i === 1 ? 'l' : ''),
)}`;
}

/** The paper's numbers beside ours: Figure 11's speedup range and Table 2's ablation. */
function paperSection(r: Results): string {
  const ok = r.runs.filter((x) => x.error === undefined);
  const fcp = ok.find((x) => x.strategy === 'fcp');
  const f2 = (x: number): string => x.toFixed(2);
  const parts: string[] = [];
  const others = ok.filter((x) => x.strategy !== 'fcp' && x.mfuForward > 0 && x.mfuBackward > 0);
  if (fcp && others.length > 0) {
    const rows = others.map((b) => [
      named(b),
      `${f2(fcp.mfuForward / b.mfuForward)}x / ${f2(fcp.mfuBackward / b.mfuBackward)}x`,
    ]);
    const all = others.flatMap((b) => [fcp.mfuForward / b.mfuForward, fcp.mfuBackward / b.mfuBackward]);
    let lo = Infinity;
    let hi = -Infinity;
    for (const x of all) {
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
    rows.push(['all baselines (range)', `${f2(lo)}x - ${f2(hi)}x`]);
    parts.push(`<p>FCP's attention-MFU speedup over each baseline (forward / backward). The paper's Figure 11 reports
${PAPER_SPEEDUP.min}x - ${PAPER_SPEEDUP.max}x over the four baselines from ${PAPER_SPEEDUP.worlds[0]} to ${PAPER_SPEEDUP.worlds[1]} GPUs, measured on real GPUs;
ours are simulated on <code>${escapeHtml(r.problem.cluster)}</code> at ${fcp.world} ranks.</p>
${table(['baseline', `ours, simulated (${fcp.world} ranks)`], rows)}`);
  }
  const a = r.ablation;
  if (a && a.steps.length > 0) {
    const rows = a.steps.map((s) => {
      const p = PAPER_ABLATION.find((x) => x.step === s.step);
      return [
        s.label,
        p ? `${f2(p.mfuForward)} / ${f2(p.mfuBackward)}` : '-',
        `${s.mfuForward.toFixed(3)} / ${s.mfuBackward.toFixed(3)}`,
      ];
    });
    parts.push(`<p>FCP's ablation, cumulative (each step adds one technique), attention MFU forward / backward.</p>
${table(['step', `paper Table 2 (real GPUs, ${PAPER_ABLATION_WORLD})`, `ours, simulated (${escapeHtml(r.problem.cluster)}, ${a.world} ranks)`], rows)}`);
  }
  if (parts.length === 0) return '';
  return `<h2 id="paper">Beside the paper</h2>
<p>The paper (Zhao et al., MLSys 2026) measured real clusters; every number of ours is <span class="simulated">simulated</span>
by fcp's cost model, so agreement in trend matters more than in value.</p>
${parts.join('\n')}`;
}

function problemSection(r: Results): string {
  const p = r.problem;
  if (r.origin === 'compare')
    return `<h2 id="batch">Batch</h2>
<p><code>${escapeHtml(p.batch)}</code> batches from seed ${p.seed}, ${p.tokensPerRank} tokens per rank, mask ${p.mask};
cluster preset <code>${escapeHtml(p.cluster)}</code>. The lengths of each batch are not kept in compare.json.</p>`;
  const m = p.model;
  const rows = p.lengthHistogram.map((b) => [
    `${b.lo}-${2 * b.lo - 1}`,
    String(b.count),
    String(b.tokens),
    `${((100 * b.tokens) / Math.max(1, p.totalTokens)).toFixed(1)}%`,
  ]);
  return `<h2 id="batch">Batch</h2>
<p><code>${escapeHtml(p.batch)}</code>, seed ${p.seed}: ${p.sequences} sequences, ${p.totalTokens} tokens
(${p.world} ranks x ${p.tokensPerRank}), longest ${p.longest}, median ${p.medianLength}. Mask ${p.mask};
${m.qHeads} query heads, ${m.kvHeads} KV heads, head dim ${m.headDim}, ${m.bytesPerElement} bytes per element.
Cluster preset <code>${escapeHtml(p.cluster)}</code>.</p>
${table(['length', 'sequences', 'tokens', 'share of tokens'], rows)}`;
}

function provenanceSection(r: Results): string {
  const v = r.provenance;
  return `<h2 id="provenance">How this report was made</h2>
<pre>${escapeHtml(v.command)}</pre>
${kvTable([
  ['fcp', v.fcpVersion],
  ['node', v.node],
  ['git commit', v.gitCommit ?? 'not a git checkout'],
  ['platform', v.platform],
  ['results format', r.format],
])}
<p>The raw numbers are in <a href="results.json">results.json</a>; <code>fcp report results.json --out DIR</code>
draws this page again from them. Every MFU and time is simulated by fcp's cost model, not measured on GPUs.</p>`;
}

/** Most figures one tab selector holds (the page's CSS has one rule per position). */
const TABS = 4;

/** One `<figure>`; `cls` tags tabbed figures. */
function figureHtml(f: RenderedFigure, cls = ''): string {
  return `<figure id="${escapeHtml(f.id)}"${cls ? ` class="${cls}"` : ''}>
<figcaption><h2 id="${escapeHtml(f.id)}-title">${escapeHtml(f.title)}</h2><p>${escapeHtml(f.caption)}</p></figcaption>
${inlineSvg(f.svg, f.id)}
<p class="png"><a href="${escapeHtml(f.png)}">PNG</a></p>
</figure>`;
}

/**
 * The figures in order. Consecutive figures of one tab group become a selector without script: a
 * radio button and label per tab, and CSS showing the figure whose radio is checked (the first).
 */
export function figuresHtml(figures: readonly RenderedFigure[]): string {
  const out: string[] = [];
  for (let i = 0; i < figures.length; ) {
    const f = figures[i]!;
    if (!f.tabs) {
      out.push(figureHtml(f));
      i++;
      continue;
    }
    const group = f.tabs.group;
    let j = i;
    // At most TABS figures per selector (the CSS below has a rule per position).
    while (j < figures.length && j - i < TABS && figures[j]!.tabs?.group === group) j++;
    const members = figures.slice(i, j);
    const radios = members
      .map((m, k) => {
        const id = `tab-${escapeHtml(m.id)}`;
        return `<input type="radio" name="tabs-${escapeHtml(group)}" id="${id}"${k === 0 ? ' checked' : ''}><label for="${id}">${escapeHtml(m.tabs!.tab)}</label>`;
      })
      .join('\n');
    out.push(
      `<section class="tabs" id="tabs-${escapeHtml(group)}">\n${radios}\n${members.map((m) => figureHtml(m, 'tab')).join('\n')}\n</section>`,
    );
    i = j;
  }
  return out.join('\n');
}

/** The whole page. `figures` are inlined in order, each with a link to its PNG copy. */
export function reportHtml(r: Results, figures: readonly RenderedFigure[]): string {
  const p = r.problem;
  const lead = headline(r);
  const notes = r.notes.length
    ? `<ul class="notes">${r.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>`
    : '';
  const summary = table(
    SUMMARY_HEADER,
    summaryRows(r),
    (row) => (row[0] === 'fcp' ? 'fcp' : ''),
    (c, i) =>
      (i === 1 && c === 'NO') || (i === SUMMARY_HEADER.length - 1 && c !== 'ok' && c !== '-') ? 'bad' : '',
  );
  const figs = figuresHtml(figures);
  const bad = r.runs.filter((x) => !x.valid).map((x) => x.strategy);
  const numericsBad = r.runs
    .map((x) => x.strategy)
    .filter((s) => ['FAIL', 'error'].includes(numericsVerdict(r, s)));
  const warn = [
    ...(bad.length ? [`Invalid plans: ${bad.join(', ')} (see the validator codes in results.json).`] : []),
    ...(numericsBad.length ? [`Numerical check failed: ${numericsBad.join(', ')}.`] : []),
  ];
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="fcp ${escapeHtml(r.provenance.fcpVersion)}">
<link rel="icon" href="data:,">
<title>FCP report: ${escapeHtml(p.batch)}, ${p.world} ranks</title>
<style>${CSS}</style>
</head>
<body>
<main>
<h1>Flexible Context Parallelism: report</h1>
<p class="sub">${r.origin === 'compare' ? `${escapeHtml(p.batch)} batches (from compare.json), up to ${p.world} ranks x ${p.tokensPerRank} tokens` : `${escapeHtml(p.batch)} batch, ${p.world} ranks x ${p.tokensPerRank} tokens, ${p.sequences} sequences (longest ${p.longest})`},
<span class="simulated">simulated</span> on cluster <code>${escapeHtml(p.cluster)}</code>, strategies ${escapeHtml(r.strategies.join(', '))}.</p>
${lead ? `<p class="lead">${escapeHtml(lead)}</p>` : ''}
${warn.length ? `<ul class="notes">${warn.map((w) => `<li><strong>${escapeHtml(w)}</strong></li>`).join('')}</ul>` : ''}
<h2 id="summary">Summary</h2>
${summary}
${notes}
${strategiesSection(r)}
${paperSection(r)}
${figs}
${numericsSection(r)}
${problemSection(r)}
${provenanceSection(r)}
</main>
</body>
</html>
`;
}

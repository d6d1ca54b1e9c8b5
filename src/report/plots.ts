/**
 * Charts without a browser: a vega-lite spec is compiled to vega, rendered headless to SVG by vega's
 * string renderer, and rasterised to PNG by resvg (system fonts; DejaVu Sans on this machine).
 * Deterministic: same spec, same bytes. Also the small line-chart specs of `fcp compare`.
 */
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/** A rendered chart. */
export interface RenderedChart {
  svg: string;
  png: Uint8Array;
}

/** Options of {@link renderChart}. */
export interface RenderOptions {
  /** PNG pixels per SVG unit (default 2, for sharp text). */
  scale?: number;
}

/** Renders a vega-lite spec to SVG text and PNG bytes. */
export async function renderChart(spec: TopLevelSpec, options: RenderOptions = {}): Promise<RenderedChart> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    const svg = await view.toSVG();
    return { svg, png: svgToPng(svg, options.scale ?? 2) };
  } finally {
    view.finalize();
  }
}

/** Rasterises SVG text to PNG bytes (white background). */
export function svgToPng(svg: string, scale = 2): Uint8Array {
  const r = new Resvg(svg, {
    fitTo: { mode: 'zoom', value: scale },
    background: 'white',
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' },
  });
  return new Uint8Array(r.render().asPng());
}

/** Colours of the strategies (FCP strong, baselines muted), shared with the report. */
const STRATEGY_COLORS: Record<string, string> = {
  fcp: '#d95f02',
  ring: '#4c78a8',
  bytescale: '#72b7b2',
  wlb: '#b279a2',
  magi: '#9d755d',
};
const FALLBACK = ['#54a24b', '#eeca3b', '#ff9da6', '#bab0ac', '#79706e', '#e45756'];

/** A vega-lite colour scale for `names` (in order). */
export function seriesScale(names: readonly string[]): { domain: string[]; range: string[] } {
  let next = 0;
  return {
    domain: [...names],
    range: names.map((s) => STRATEGY_COLORS[s] ?? FALLBACK[next++ % FALLBACK.length]!),
  };
}

/** One point of a line chart: series (e.g. strategy), x, y, optional panel and spread. */
export interface LinePoint {
  series: string;
  x: number;
  y: number;
  lo?: number;
  hi?: number;
  panel?: string;
}

/** Options of {@link lineChartSpec}. */
export interface LineChartOptions {
  title: string;
  xTitle: string;
  yTitle: string;
  /** Log-2 x axis (world sizes). */
  logX?: boolean;
  /** Order of the series (legend and colours). */
  series?: readonly string[];
  /** Order of the panels (side by side). */
  panels?: readonly string[];
  width?: number;
  height?: number;
}

/**
 * A line chart per series with points, optional min-max error bars (`lo`, `hi`) and optional panels
 * side by side.
 */
export function lineChartSpec(points: readonly LinePoint[], o: LineChartOptions): TopLevelSpec {
  const series = o.series ?? [...new Set(points.map((p) => p.series))];
  const color = {
    field: 'series',
    type: 'nominal',
    title: null,
    scale: seriesScale(series),
    sort: series,
  } as const;
  const x = {
    field: 'x',
    type: 'quantitative',
    title: o.xTitle,
    scale: o.logX ? { type: 'log', base: 2 } : { zero: false },
    axis: o.logX ? { values: [...new Set(points.map((p) => p.x))].sort((a, b) => a - b) } : {},
  } as const;
  const y = { field: 'y', type: 'quantitative', title: o.yTitle, scale: { zero: true } } as const;
  const layers: object[] = [
    { mark: { type: 'line', point: true, strokeWidth: 2 }, encoding: { x, y, color } },
  ];
  if (points.some((p) => p.lo !== undefined && p.hi !== undefined))
    layers.push({
      mark: { type: 'rule', opacity: 0.6 },
      encoding: { x, y: { field: 'lo', type: 'quantitative' }, y2: { field: 'hi' }, color },
    });
  const inner = { width: o.width ?? 300, height: o.height ?? 220, layer: layers };
  const values = points.map((p) => ({ ...p }));
  const base = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: o.title,
    data: { values },
    config: {
      font: 'DejaVu Sans',
      background: '#ffffff',
      view: { stroke: '#dddddd' },
      axis: { gridColor: '#eeeeee' },
    },
  };
  if (o.panels || points.some((p) => p.panel !== undefined)) {
    const panels = o.panels ?? [...new Set(points.map((p) => p.panel ?? ''))];
    return {
      ...base,
      facet: { column: { field: 'panel', type: 'nominal', title: null, sort: panels } },
      spec: inner,
    } as unknown as TopLevelSpec;
  }
  return { ...base, ...inner } as unknown as TopLevelSpec;
}

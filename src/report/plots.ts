/**
 * Charts without a browser: a vega-lite spec is compiled to vega, rendered headless to SVG by vega's
 * string renderer, and rasterised to PNG by resvg (system fonts; DejaVu Sans on this machine).
 * Deterministic: same spec, same bytes. Loaded lazily (dynamic import) by whoever draws: vega costs
 * about half a second of every CLI start otherwise.
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

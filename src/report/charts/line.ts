/**
 * The small line-chart specs of `fcp compare` (MFU and imbalance against world size). Specs only:
 * this module does not load vega, so the CLI can build a spec without paying for the renderer.
 */
import type { TopLevelSpec } from 'vega-lite';
import { strategyScale } from './style.ts';

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
    scale: strategyScale(series), // the report's colours (FCP strong, baselines muted)
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

/**
 * Shared look of the report's charts: one colour per strategy (FCP always the same strong colour,
 * baselines muted) and a base config, so every figure reads the same way.
 */
import type { TopLevelSpec } from 'vega-lite';

/** Colours of known strategies; unknown ones take the fallback palette in order. */
const KNOWN: Record<string, string> = {
  fcp: '#d95f02',
  ring: '#4c78a8',
  bytescale: '#72b7b2',
  wlb: '#b279a2',
  magi: '#9d755d',
};
const FALLBACK = ['#54a24b', '#eeca3b', '#ff9da6', '#bab0ac', '#79706e', '#e45756'];

/** A vega-lite scale mapping each strategy (in the given order) to its colour. */
export function strategyScale(strategies: readonly string[]): { domain: string[]; range: string[] } {
  let next = 0;
  const range = strategies.map((s) => KNOWN[s] ?? FALLBACK[next++ % FALLBACK.length]!);
  return { domain: [...strategies], range };
}

/**
 * Colours of compute and transfer kinds, for bytes and timelines. Compute is the only dark colour
 * (navy), so it never reads as a transfer; single kinds and the combinations the simulator reports
 * for one communication group (`kv+out`: both kinds in flight) each get a distinct hue.
 */
export const KIND_COLORS: Record<string, string> = {
  compute: '#1f3a68',
  in: '#76b7b2',
  kv: '#f28e2b',
  out: '#59a14f',
  dkv: '#e15759',
  comm: '#f28e2b',
  'in+kv': '#edc948',
  'kv+out': '#b07aa1',
  'in+kv+out': '#ff9da7',
  'in+out': '#9c755f',
  'kv+dkv': '#d37295',
  'dkv+out': '#8cd17d',
  'kv+dkv+out': '#a0cbe8',
  'in+kv+dkv': '#bab0ac',
};
const KIND_FALLBACK = ['#79706e', '#ffbe7d', '#86bcb6', '#499894', '#fabfd2', '#b6992d'];

/** Colours for activity kinds in order: known kinds keep theirs, combinations (`in+kv`) take the next free one. */
export function kindScale(kinds: readonly string[]): { domain: string[]; range: string[] } {
  let next = 0;
  return {
    domain: [...kinds],
    range: kinds.map((k) => KIND_COLORS[k] ?? KIND_FALLBACK[next++ % KIND_FALLBACK.length]!),
  };
}

/**
 * The baseline a meta-strategy picked, from its configuration text (wlb's `chose bytescale (...)`),
 * or undefined for strategies that pick nothing.
 */
export function choiceOf(config: string | undefined): string | undefined {
  return config === undefined ? undefined : /^chose (\S+)/.exec(config)?.[1];
}

/** Base config shared by every chart (fonts available offline; no external resources). */
export const BASE_CONFIG = {
  font: 'DejaVu Sans, Arial, sans-serif',
  background: '#ffffff',
  view: { stroke: '#dddddd' },
  axis: { labelFontSize: 11, titleFontSize: 12, gridColor: '#eeeeee' },
  legend: { labelFontSize: 11, titleFontSize: 12 },
  title: { fontSize: 14, anchor: 'start' as const },
} as const;

/** The shared top-level fields of a spec. */
export function baseSpec(title: string): Pick<TopLevelSpec, 'title' | 'config' | 'padding'> {
  // No $schema: the report holds no external URL, not even one that is never fetched.
  return {
    title,
    padding: 8,
    config: BASE_CONFIG,
  };
}

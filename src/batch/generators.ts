/**
 * Seeded batch generators. A generated batch for W ranks at T tokens per rank holds exactly W*T
 * tokens: lengths are drawn until the total is reached and the last sequence is truncated.
 */
import { readFileSync } from 'node:fs';
import { dataPath } from '../core/data-dir.ts';
import { Rng } from '../core/rng.ts';

/** Longest sequence any generator produces (the paper's trace reaches 512K). */
export const MAX_SEQUENCE_LENGTH = 524288;

/** Draws one sequence length. */
type LengthSampler = (rng: Rng, tokensPerRank: number) => number;

const clip = (x: number, lo = 16, hi = MAX_SEQUENCE_LENGTH): number =>
  Math.min(hi, Math.max(lo, Math.round(x)));

interface MagiBin {
  lo: number;
  hi: number;
  number: number;
}
let magiCdf: { bins: MagiBin[]; cdf: Float64Array } | undefined;

/** The MagiAttention corpus bins (data/magi-doc-lengths.json), loaded once. */
function magiBins(): { bins: MagiBin[]; cdf: Float64Array } {
  if (magiCdf) return magiCdf;
  const { bins } = JSON.parse(readFileSync(dataPath('magi-doc-lengths.json'), 'utf8')) as { bins: MagiBin[] };
  const total = bins.reduce((s, b) => s + b.number, 0);
  const cdf = new Float64Array(bins.length);
  let acc = 0;
  bins.forEach((b, i) => {
    acc += b.number;
    cdf[i] = acc / total;
  });
  magiCdf = { bins, cdf };
  return magiCdf;
}

/** Built-in generators by name. */
export const GENERATORS: Record<string, { description: string; sample: LengthSampler }> = {
  longtail: {
    description:
      'mixture: 99% lognormal(median 800, sigma 1.1), 1% lognormal(median 48K, sigma 1.2), clipped to [16, 512K]',
    sample: (rng) => clip(rng.next() < 0.99 ? rng.lognormal(800, 1.1) : rng.lognormal(49152, 1.2)),
  },
  magi: {
    description: 'real corpus length distribution published with MagiAttention (14 bins up to 192K)',
    sample: (rng) => {
      const { bins, cdf } = magiBins();
      const u = rng.next();
      let i = 0;
      while (i < cdf.length - 1 && u >= cdf[i]!) i++;
      const b = bins[i]!;
      return Math.max(1, rng.int(b.lo, b.hi));
    },
  },
  bimodal: {
    description: '95% lognormal(median 1K, sigma 0.5), 5% lognormal(median 64K, sigma 0.3)',
    sample: (rng) => clip(rng.next() < 0.95 ? rng.lognormal(1024, 0.5) : rng.lognormal(65536, 0.3)),
  },
  'weak-longtail': {
    description:
      'a milder tail: 99.7% lognormal(median 1.5K, sigma 1.0), 0.3% lognormal(median 24K, sigma 1.0)',
    sample: (rng) => clip(rng.next() < 0.997 ? rng.lognormal(1536, 1.0) : rng.lognormal(24576, 1.0)),
  },
  uniform: {
    description: 'uniform in [256, 2 x tokens per rank]',
    sample: (rng, t) => rng.int(256, Math.min(MAX_SEQUENCE_LENGTH, Math.max(256, 2 * t))),
  },
  fixed: {
    description: 'every sequence exactly tokens-per-rank long',
    sample: (_rng, t) => t,
  },
};

/** Names of the built-in generators. */
export const GENERATOR_NAMES = Object.keys(GENERATORS);

/** Draws lengths from generator `name` until `world * tokensPerRank` tokens, truncating the last. */
export function generateBatch(name: string, world: number, tokensPerRank: number, seed: number): Int32Array {
  const gen = GENERATORS[name];
  if (!gen) throw new Error(`unknown generator ${name}`); // callers check names first (options.ts)
  const rng = new Rng(seed);
  const target = world * tokensPerRank;
  const out: number[] = [];
  let total = 0;
  while (total < target) {
    const len = Math.min(gen.sample(rng, tokensPerRank), target - total);
    out.push(len);
    total += len;
  }
  return Int32Array.from(out);
}

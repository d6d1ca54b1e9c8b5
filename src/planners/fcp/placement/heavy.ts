/**
 * Contiguous packing of the heavy sequences (issue 15, deliverables 1 and 2): the units of the
 * compute-dominant sequences (distribute.ts, step 1), largest sequence first, are dealt onto ranks
 * in rank order (so in node order), each rank filled up to a compute target before the next one
 * opens, before any short sequence is placed.
 *
 * Why: under a causal mask every zig-zag unit of a sequence needs (almost) the whole sequence's
 * K/V, so what a rank receives is about the sum of the lengths of the long sequences it holds,
 * and the K/V volume of a sequence is its length times the number of ranks holding it. Placing
 * short and medium sequences first (the LPT order) leaves every rank a partial compute gap, and a
 * long sequence then spreads over many more ranks than its compute share: on `longtail` at 256
 * ranks a 512K sequence worth 100-116 ranks of compute landed on 137-156 ranks over 31-32 nodes,
 * and ranks that took units of two or three long sequences received 4.4 GB of K/V in the forward
 * (simulated; the critical rank). Packed, a long sequence holds about ceil(share) consecutive
 * ranks, so ceil(share / gpusPerNode) + 1 nodes, and a rank holds at most the sequences whose
 * boundary it straddles; a new sequence opens a fresh rank while the compute left unused that way
 * stays within what the short sequences can fill (they are placed afterwards by the distributor's
 * memory-and-compute LPT and land on the gaps).
 *
 * The compute target of a rank leaves room for the short tokens the rank will still receive: in
 * mode (b) every rank ends with the mean tokens, and a rank of a long sequence holds few of them.
 */

/** What {@link packHeavy} reads: per unit its sequence, tokens, compute and whether it is heavy. */
export interface HeavyInput {
  readonly unitSeq: Int32Array;
  readonly unitTokens: Int32Array;
  readonly unitPairs: Float64Array;
  /** 1 for the units to pack (compute-dominant), 0 for the rest. */
  readonly heavy: Uint8Array;
  /** Units of the heavy sequences in placement order: sequence by sequence, largest first. */
  readonly order: Int32Array;
  /** Compute of the whole batch and of the units that are not heavy. */
  readonly totalPairs: number;
  readonly lightPairs: number;
  /** Tokens of the whole batch and of the units that are not heavy. */
  readonly totalTokens: number;
}

/**
 * Rank of every heavy unit (-1: left to the distributor, and every unit that is not heavy), for
 * `world` ranks of `memoryTokens` each. Deterministic: ranks open in order, no ties.
 */
export function packHeavy(h: HeavyInput, world: number, memoryTokens: number): Int32Array {
  const U = h.unitSeq.length;
  const out = new Int32Array(U).fill(-1);
  if (world < 2 || h.order.length === 0) return out;
  const avg = h.totalPairs / world;
  // Short compute per token (the light units' mean density): a rank of a long sequence will still
  // take about (mean tokens - its heavy tokens) of such tokens, so its heavy target is lowered by
  // their compute.
  const meanTokens = h.totalTokens / world;
  const lightDensity = smallDensity(h, meanTokens);
  // Compute a fresh rank may leave unused at a sequence boundary, in total: part of what the light
  // units carry (they fill those gaps).
  let slack = FRESH_SHARE * h.lightPairs;
  const load = new Float64Array(world);
  const mem = new Float64Array(world);
  let r = 0;
  let prevSeq = -1;
  const target = (rank: number): number => avg - lightDensity * Math.max(0, meanTokens - mem[rank]!);
  for (let i = 0; i < h.order.length && r < world; i++) {
    const u = h.order[i]!;
    const p = h.unitPairs[u]!;
    const t = h.unitTokens[u]!;
    const s = h.unitSeq[u]!;
    if (s !== prevSeq && prevSeq >= 0 && load[r]! > 0) {
      // A new sequence: open a fresh rank when the gap left behind fits the slack.
      const gap = Math.max(0, target(r) - load[r]!);
      if (gap <= slack) {
        slack -= gap;
        r++;
      }
    }
    prevSeq = s;
    // Next rank once this unit's midpoint would pass the target, or memory is full. No error
    // carries from rank to rank: carried, the ranks of a sequence alternate above and below the
    // target and the planner's choice among token caps then fell on plans with send hot spots
    // (simulated, longtail seed 3 at 256 ranks: 0.485 -> 0.355 forward MFU).
    while (r < world && load[r]! > 0 && (load[r]! + p / 2 > target(r) || mem[r]! + t > memoryTokens)) r++;
    if (r >= world) break;
    if (mem[r]! + t > memoryTokens) continue;
    out[u] = r;
    load[r]! += p;
    mem[r]! += t;
  }
  return out;
}

/**
 * Compute per token of the small light units: those whose own density (pairs per token, about half
 * their sequence's length) is that of a sequence no longer than the mean tokens per rank, which
 * fits whole on one rank; these are what fills the heavy ranks' tokens.
 */
function smallDensity(h: HeavyInput, meanTokens: number): number {
  let p = 0;
  let t = 0;
  for (let u = 0; u < h.unitSeq.length; u++) {
    const tok = h.unitTokens[u]!;
    if (h.heavy[u] === 1 || tok <= 0 || h.unitPairs[u]! > (tok * meanTokens) / 2) continue;
    p += h.unitPairs[u]!;
    t += tok;
  }
  return t > 0 ? p / t : 0;
}

/** Share of the light units' compute that fresh ranks at sequence boundaries may leave for them to fill. */
const FRESH_SHARE = 0.5;

/** {@link packHeavy} over the distributor's order (its compute-dominant units come sequence by sequence). */
export function packHeavyUnits(
  order: Int32Array,
  computeDominant: Uint8Array,
  unitSeq: Int32Array,
  unitTokens: Int32Array,
  unitPairs: Float64Array,
  totalPairs: number,
  totalTokens: number,
  world: number,
  memoryTokens: number,
): Int32Array {
  const heavyOrder: number[] = [];
  let lightPairs = 0;
  for (let i = 0; i < order.length; i++) {
    const u = order[i]!;
    if (computeDominant[u] === 1) heavyOrder.push(u);
    else lightPairs += unitPairs[u]!;
  }
  return packHeavy(
    {
      unitSeq,
      unitTokens,
      unitPairs,
      heavy: computeDominant,
      order: Int32Array.from(heavyOrder),
      totalPairs,
      lightPairs,
      totalTokens,
    },
    world,
    memoryTokens,
  );
}

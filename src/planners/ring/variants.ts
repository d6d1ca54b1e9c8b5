/**
 * TransformerEngine's other context-parallel modes for THD (packed) batches, as compact chunk
 * rows over all N ranks and one set of all sequences (TE @d0067d0,
 * `transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py`):
 *
 * - `a2a+p2p` ({@link addA2aP2pRing}; `AttnFuncWithCPAndKVP2P` with `cp_group = [a2a, p2p]`,
 *   lines 1356-1420, 1486-1500, 2032-2040): ranks form P = N/a groups of a (the a2a groups, one
 *   node by default); global rank p*a + j is a2a rank j of p2p rank p (`send_dst` at line 1418).
 *   The loader shards every sequence into 2N DualChunkSwap parts as for `p2p`; before attention an
 *   all-to-all inside the group trades heads for tokens, so each rank holds group p's parts
 *   [pa, pa+a) and [2N-pa-a, 2N-pa) for H/a heads (`get_seq_chunk_ids_for_reordering_before_attn`,
 *   line 236), then a p2p ring of P steps runs across groups.
 * - `all_gather` (all-gather.ts, `addAllGather`; `AttnFuncWithCPAndKVAllGather`, line 3014, THD supported
 *   there): K/V of all ranks are all-gathered, each rank computes its two local query parts
 *   against them, dK/dV are reduce-scattered back (lines 4107-4123).
 *
 * The plan format has no head dimension, so `a2a+p2p` is written in tokens with the same work and
 * the same inter-node bytes: instead of H/a heads of all of group p's queries, rank (p, j) computes
 * all heads of its own two query parts (the same FLOPs: DualChunkSwap balances the parts) against
 * the K/V of the group at ring step g, which reach it as its counterpart (p-1, j)'s share over the
 * network (one rank's two parts: what Ulysses's H/a heads of the group cost) plus an all-gather
 * inside the group (NVLink; Ulysses's all-to-all moves (a-1)/a of Q, K, V and O there instead).
 * dK/dV: reduce-scatter inside the group to the rank of each part's sub-index, then one hop along
 * the ring per step to the next group, ending at the owner. Divergences: docs/baselines.md.
 */

import { fail } from '../../core/issues.ts';
import { sequencePairs } from '../../model/attention.ts';
import { liveParts } from '../../plan/parts.ts';
import { Kind, type KindCode } from '../../plan/types.ts';
import type { PlanBuilder } from '../shared/plan-builder.ts';
import { emitPhase, type Job, type Row, type VariantInfo } from './chunk-rows.ts';

export type { VariantInfo } from './chunk-rows.ts';

/** FcpError `option.a2aDegree` unless a divides the world and both head counts (TE's a2a split). */
export function checkA2aDegree(a: number, world: number, qHeads: number, kvHeads: number): void {
  if (!Number.isInteger(a) || a < 1)
    fail('option.a2aDegree', `--a2a-degree must be a positive integer (got ${a})`, 'a2aDegree');
  if (world % a !== 0)
    fail('option.a2aDegree', `a2a degree ${a} must divide the world size ${world}`, 'a2aDegree');
  // TE splits the head dimension of Q, K and V into a2a-degree pieces (flash_attn_a2a_communicate,
  // `x.view(..., cp_size, h // cp_size, ...)`; the pure a2a mode asserts it at line 4247).
  if (qHeads % a !== 0 || kvHeads % a !== 0)
    fail(
      'option.a2aDegree',
      `a2a degree ${a} must divide the query heads (${qHeads}) and the K/V heads (${kvHeads}), as TransformerEngine's all-to-all over heads requires`,
      'a2aDegree',
    );
}

/**
 * Sequences whose 2N-way parts are at least this many tokens are split among the ranks of an a2a
 * group part by part; shorter ones go whole (their group chunk pair) to one rank of the group.
 * Default 1: every sequence is split, as TransformerEngine does. Its loader
 * (`get_batch_on_this_cp_rank`, TE context_parallel.py:5257-5340 @d0067d0) cuts EVERY sequence of a THD
 * batch into 2 x cp_size slices and gives each CP rank two of them, and the a2a before attention
 * (context_parallel.py:1486-1500, `flash_attn_a2a_communicate` 387-470) applies to the whole batch:
 * no sequence stays whole on one rank, so every rank holds 1/N of every (padded) sequence. A larger
 * value (`a2aSplitTokens`) is an ablation that is not TE's behaviour: it puts short sequences whole
 * on one group rank, which gave this layout 14-87% token imbalance on longtail.
 */
export const A2A_SPLIT_TOKENS = 1;

/**
 * TE `a2a+p2p` over all ranks with a2a groups of `a` consecutive ranks (see the module comment).
 * Long sequences (parts of {@link A2A_SPLIT_TOKENS}+ tokens): one set cut into 2N parts, rank
 * (p, j) holding parts pa+j and 2N-1-pa-j (TE's loader layout). Shorter sequences: set S_j per
 * group rank j (balanced by attention work, largest first), cut into 2P parts, rank (p, j) holding
 * parts p and 2P-1-p (the layout after TE's all-to-all, in tokens; the loader is assumed to deliver
 * it, like every baseline's layout).
 * Forward logical group g (g = 0..P-1): the hop that passes ring origin (p - g)'s data from
 * (p, j) to (p+1, j) (sub-round 0) and, for the long set, the all-gather of origin (p - g)'s parts
 * inside the group (sub-rounds 1..a-1); step g computes after it while group g+1 runs. Backward
 * adds, in group g+1, the reduce-scatter of step g's long-set dK/dV inside the group and, in group
 * g+2, the hop of the accumulated partials to the next group (steps g >= 1), ending at the owner.
 */
export function addA2aP2pRing(
  b: PlanBuilder,
  seqs: ArrayLike<number>,
  a: number,
  splitTokens: number = A2A_SPLIT_TOKENS,
): VariantInfo {
  const n = b.problem.world;
  const lens = b.problem.sequences;
  const causal = b.problem.mask === 'causal';
  const P = n / a;
  const rank = (p: number, j: number) => (((p % P) + P) % P) * a + j;
  const mod = (o: number) => ((o % P) + P) % P;
  // Split long and short; short ones onto the a group ranks by work (largest first, least loaded).
  const long: number[] = [];
  const short: number[] = [];
  for (let i = 0; i < seqs.length; i++) {
    const sq = seqs[i]!;
    (Math.ceil(lens[sq]! / (2 * n)) >= splitTokens || a === 1 ? long : short).push(sq);
  }
  const whole: number[][] = Array.from({ length: a }, () => []);
  const load = new Float64Array(a);
  short.sort((x, y) => lens[y]! - lens[x]! || x - y);
  for (const sq of short) {
    let j = 0;
    for (let c = 1; c < a; c++) if (load[c]! < load[j]!) j = c;
    whole[j]!.push(sq);
    load[j]! += sequencePairs(causal, lens[sq]!);
  }
  for (const w of whole) w.sort((x, y) => x - y);

  const fRows: Row[] = [];
  const bRows: Row[] = [];
  const jobs: Job[] = [];
  const hop = (
    rows: Row[],
    g: number,
    src: number,
    dst: number,
    kind: KindCode,
    set: number,
    parts: number,
    part: number,
    afterSlot: number,
  ) =>
    rows.push({ group: g, sub: kind === Kind.kv ? 0 : 2 * a, src, dst, kind, set, parts, part, afterSlot });

  // Long set: 2N parts split by sub-rank.
  if (long.length > 0) {
    const parts = 2 * n;
    const set = b.seqSet(long, parts);
    const live = liveParts(lens, long, parts);
    const subParts = (o: number, j: number) => {
      const x = mod(o) * a + j;
      return [x, parts - 1 - x].filter((y) => y < live);
    };
    const groupParts = (o: number) => {
      const out: number[] = [];
      for (let j = 0; j < a; j++) out.push(...subParts(o, j));
      return out;
    };
    const subOf = (part: number) => (part < n ? part : parts - 1 - part) % a;
    for (let r = 0; r < n; r++)
      for (const x of [r, parts - 1 - r]) if (x < live) b.homeChunk(r, set, parts, x, true);
    // Compute. Slot 0: own parts only (no wait); slot g+1: step g, after logical group g.
    const computes = new Map<string, Set<number>>(); // `${rank}:${g}` -> kv parts computed with
    for (let p = 0; p < P; p++)
      for (let j = 0; j < a; j++) {
        const r = rank(p, j);
        const qs = subParts(p, j);
        const own = new Set(qs);
        for (let g = 0; g < P; g++)
          for (const q of qs)
            for (const kv of groupParts(p - g)) {
              if (causal && kv > q) continue;
              const self = g === 0 && own.has(kv);
              jobs.push({
                id: b.chunkTask(r, set, parts, q, kv),
                rank: r,
                slot: self ? 0 : g + 1,
                after: self ? -1 : g,
              });
              if (self) continue;
              const k = `${r}:${g}`;
              const u = computes.get(k) ?? new Set<number>();
              u.add(kv);
              computes.set(k, u);
            }
      }
    // K/V (both phases): the hop on, and the all-gather inside the group.
    for (const rows of [fRows, bRows])
      for (let g = 0; g < P; g++)
        for (let p = 0; p < P; p++)
          for (let j = 0; j < a; j++)
            for (const x of subParts(p - g, j)) {
              const src = rank(p, j);
              if (g < P - 1) hop(rows, g, src, rank(p + 1, j), Kind.kv, set, parts, x, -1);
              for (let s = 1; s < a; s++)
                rows.push({
                  group: g,
                  sub: s,
                  src,
                  dst: rank(p, (j + s) % a),
                  kind: Kind.kv,
                  set,
                  parts,
                  part: x,
                  afterSlot: -1,
                });
            }
    // dK/dV: reduce-scatter inside the group, then the accumulated partial hops on.
    for (let o = 0; o < P; o++) {
      let chain = new Set<number>();
      for (let g = 0; g < P; g++) {
        const p = o + g;
        const node = new Set<number>();
        for (let j = 0; j < a; j++) {
          const r = rank(p, j);
          for (const x of computes.get(`${r}:${g}`) ?? []) {
            node.add(x);
            const owner = rank(p, subOf(x));
            if (owner !== r)
              bRows.push({
                group: g + 1,
                sub: a + ((subOf(x) - j + a) % a),
                src: r,
                dst: owner,
                kind: Kind.dkv,
                set,
                parts,
                part: x,
                afterSlot: g + 1,
              });
          }
        }
        if (g === 0) continue; // the owner's group: its partials are home now
        const next = new Set<number>();
        for (const x of new Set([...chain, ...node])) {
          hop(bRows, g + 2, rank(p, subOf(x)), rank(p + 1, subOf(x)), Kind.dkv, set, parts, x, g + 1);
          next.add(x);
        }
        chain = next;
      }
    }
  }
  // Short sets: whole group chunk pairs, one DualChunkSwap ring over P positions per group rank j.
  for (let j = 0; j < a; j++) {
    const w = whole[j]!;
    if (w.length === 0) continue;
    const parts = 2 * P;
    const set = b.seqSet(w, parts);
    const live = liveParts(lens, w, parts);
    const pair = (o: number) => [mod(o), parts - 1 - mod(o)].filter((y) => y < live);
    const used = new Map<string, Set<number>>(); // `${p}:${g}` -> kv parts computed with
    for (let p = 0; p < P; p++) for (const x of pair(p)) b.homeChunk(rank(p, j), set, parts, x, true);
    for (let p = 0; p < P; p++) {
      const r = rank(p, j);
      for (let g = 0; g < P; g++) {
        const u = new Set<number>();
        for (const q of pair(p))
          for (const kv of pair(p - g)) {
            if (causal && kv > q) continue;
            const slot = g === 0 ? 0 : g + 1;
            jobs.push({ id: b.chunkTask(r, set, parts, q, kv), rank: r, slot, after: g === 0 ? -1 : g });
            u.add(kv);
          }
        used.set(`${p}:${g}`, u);
        for (const rows of [fRows, bRows])
          if (g < P - 1)
            for (const x of pair(p - g)) hop(rows, g, r, rank(p + 1, j), Kind.kv, set, parts, x, -1);
      }
    }
    // dK/dV of origin o: computed at steps 1..P-1 (positions o+1..o+P-1), each hop carrying the
    // parts that hold a contribution so far, the last hop arriving at the owner.
    for (let o = 0; o < P; o++) {
      const chain = new Set<number>();
      for (let g = 1; g < P; g++) {
        const p = mod(o + g);
        for (const x of used.get(`${p}:${g}`) ?? []) chain.add(x);
        for (const x of chain) hop(bRows, g + 2, rank(p, j), rank(p + 1, j), Kind.dkv, set, parts, x, g + 1);
      }
    }
  }
  const forwardGroups = emitPhase(b, 'forward', fRows, jobs, P);
  const backwardGroups = emitPhase(b, 'backward', bRows, jobs, P + 2);
  return { forwardGroups, backwardGroups };
}

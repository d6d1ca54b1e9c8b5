/**
 * Rounds congestion-free on the NICs under NCCL's PXN routing (issue 15: "congestion 1 in every
 * round on every link class").
 *
 * FCP's rounds are matchings over ranks: every rank sends and receives at most one message per
 * round and link class (a `kv` relay's second hop over NVLink may share a round with a message
 * over the rank's NIC, groups.ts fillLink). Under direct routing that makes them congestion-free on every link, since a message
 * across nodes leaves by its sender's own NIC. Under PXN it leaves by the NIC of the sender-node
 * GPU on the receiver's rail (local index), so two ranks of one node sending in one round to two
 * receivers of one rail on other nodes share that NIC: measured before this pass (`fcp plan
 * --routing pxn`, longtail seed 1), 108 of the 186 forward rounds that cross nodes at 32 ranks in
 * mode (a) put two or three messages on one NIC, and 116 of 121 at 128 ranks in mode (b), up to
 * four. On two nodes it cannot happen (a rail has one receiver on the other node).
 *
 * The hop to that GPU crosses its NVLink port, which may also be receiving a message of its own
 * from a node mate in that round (about a third of the rounds at 32-128 ranks, measured the same
 * way).
 *
 * {@link railRounds} splits such a round into sub-rounds that follow it in its group: messages
 * inside a node stay in the first, a message across nodes goes to the first sub-round whose leaving
 * NIC is free and, when it leaves by a node mate's NIC, whose NVLink port into that mate is free too
 * (all rows of one message together). Every sub-round is a subset of the original matching, so
 * still congestion-free per rank; groups, and so every readiness rule of the plan, are unchanged.
 * The rounds are no longer exactly Δ of the fetch graph: that bound ignores the NICs.
 */

import { sameNode } from '../../../core/nodes.ts';
import { pxnNic } from '../../../plan/report-nic.ts';

/** Rounds renumbered by {@link railRounds}. */
export interface RailRounds {
  /** New round of every transfer. */
  readonly roundOf: Int32Array;
  /** Group of every new round (non-decreasing). */
  readonly groupOfRound: Int32Array;
  /** Rounds added by the split (0: none needed). */
  readonly added: number;
}

/**
 * Splits rounds so that under PXN no two messages across nodes leave by one NIC in a round, and no
 * GPU's NVLink port takes a message it forwards beside one from a node mate (module comment).
 * `roundOf`, `src`, `dst`: per transfer; `groupOfRound`: per round; `world` ranks. Returns null
 * when no round needs a split (the caller keeps its numbering).
 */
export function railRounds(
  roundOf: Int32Array,
  src: Int32Array,
  dst: Int32Array,
  groupOfRound: Int32Array,
  nodeSize: number,
  world: number,
): RailRounds | null {
  const n = roundOf.length;
  const rounds = groupOfRound.length;
  if (nodeSize <= 1 || n === 0) return null;
  // Transfers by round, ids ascending within a round.
  const first = new Int32Array(rounds + 1);
  for (let i = 0; i < n; i++) first[roundOf[i]! + 1]!++;
  for (let r = 0; r < rounds; r++) first[r + 1]! += first[r]!;
  const byRound = new Int32Array(n);
  {
    const at = first.slice(0, rounds);
    for (let i = 0; i < n; i++) byRound[at[roundOf[i]!]!++] = i;
  }
  const nics = world; // NIC and NVLink port ids are rank ids
  // used[j][k] === stamp: resource k busy in sub-round j of the round being split (stamps avoid
  // clears). Resources: NIC k (a rank id, the GPU owning it) and NVLink port into rank k (nics + k).
  const used: Int32Array[] = [new Int32Array(2 * nics)];
  const sub = new Int32Array(n);
  const subsOf = new Int32Array(rounds);
  const messageSub = new Map<number, number>();
  let added = 0;
  for (let r = 0; r < rounds; r++) {
    const stamp = r + 1;
    let subs = 1;
    messageSub.clear();
    // Messages inside a node stay in sub-round 0, holding their receivers' NVLink ports there.
    for (let k = first[r]!; k < first[r + 1]!; k++) {
      const i = byRound[k]!;
      if (sameNode(src[i]!, dst[i]!, nodeSize)) used[0]![nics + dst[i]!] = stamp;
    }
    for (let k = first[r]!; k < first[r + 1]!; k++) {
      const i = byRound[k]!;
      const s = src[i]!;
      const d = dst[i]!;
      if (sameNode(s, d, nodeSize)) continue; // NVLink: sub-round 0
      const message = s * nics + d;
      const known = messageSub.get(message);
      if (known !== undefined) {
        sub[i] = known;
        continue;
      }
      const nic = pxnNic(s, d, nodeSize, world);
      // The hop into the NIC's GPU when it is not the sender (its NVLink port), else none.
      const port = nic !== s ? nics + nic : -1;
      let j = 0;
      for (; j < used.length && (used[j]![nic] === stamp || (port >= 0 && used[j]![port] === stamp)); j++);
      if (j === used.length) used.push(new Int32Array(2 * nics));
      used[j]![nic] = stamp;
      if (port >= 0) used[j]![port] = stamp;
      sub[i] = j;
      messageSub.set(message, j);
      if (j + 1 > subs) subs = j + 1;
    }
    subsOf[r] = subs;
    added += subs - 1;
  }
  if (added === 0) return null;
  const base = new Int32Array(rounds + 1);
  for (let r = 0; r < rounds; r++) base[r + 1] = base[r]! + subsOf[r]!;
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = base[roundOf[i]!]! + sub[i]!;
  const groups = new Int32Array(base[rounds]!);
  for (let r = 0; r < rounds; r++) groups.fill(groupOfRound[r]!, base[r]!, base[r + 1]!);
  return { roundOf: out, groupOfRound: groups, added };
}

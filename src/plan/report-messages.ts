/**
 * Message statistics of one phase for the rule-6 report: distinct (round, src, dst) messages, the
 * worst congestion of a round, Δ of the `kv` graph and the number of rounds carrying `kv`.
 */

import { sameNode } from '../core/nodes.ts';

/**
 * Distinct messages, congestion, Δ of the kv graph and rounds carrying kv, from (round, src, dst)
 * keys; `unique`: the distinct keys, sorted (for report-nic.ts, linkCongestion). Congestion is
 * the most messages one rank sends, or receives, in one round over one link class: with
 * `nodeSize` > 0 messages between node mates (NVLink) and across nodes (the NIC) are counted
 * apart, since they cross different links; with 0 every message is one class.
 */
export function messageStats(
  keys: Float64Array,
  kvFlag: Uint8Array,
  W: number,
  nodeSize = 0,
): { messages: number; congestion: number; kvDelta: number; kvRounds: number; unique: Float64Array } {
  // A kv message gets key*2+1 so that the sort keeps kv-ness; duplicates of a triple collapse.
  const tagged = new Float64Array(keys.length);
  for (let i = 0; i < keys.length; i++) tagged[i] = keys[i]! * 2 + kvFlag[i]!;
  tagged.sort();
  // Distinct keys (and whether any of their rows carries kv) written over the sorted list (n <= i).
  const isKv = new Uint8Array(tagged.length);
  let n = 0;
  for (let i = 0; i < tagged.length; i++) {
    const key = Math.floor(tagged[i]! / 2);
    const kvBit = tagged[i]! % 2;
    if (n > 0 && tagged[n - 1] === key) {
      if (kvBit) isKv[n - 1] = 1;
    } else {
      tagged[n] = key;
      isKv[n++] = kvBit;
    }
  }
  const uniq = tagged.subarray(0, n);
  // Keys are sorted by (round, src, dst): sends of one (round, src) are a run; receives are
  // counted per round in an array reset through a touched list.
  // Per link class (nodeSize > 0: 0 across nodes, 1 between node mates; else one class).
  const linkOf = (src: number, dst: number): number => (nodeSize > 0 && sameNode(src, dst, nodeSize) ? 1 : 0);
  const recvCount = new Int32Array(2 * W);
  const sendRun = [0, 0];
  const touched: number[] = [];
  const kvSend = new Float64Array(W);
  const kvRecv = new Float64Array(W);
  let kvRounds = 0;
  let congestion = 0;
  let prevRound = -1;
  let prevRs = -1;
  let roundHasKv = false;
  for (let i = 0; i < uniq.length; i++) {
    const key = uniq[i]!;
    const dst = key % W;
    const rs = (key - dst) / W; // round * W + src
    const src = rs % W;
    const round = (rs - src) / W;
    if (round !== prevRound) {
      for (const d of touched) recvCount[d] = 0;
      touched.length = 0;
      if (roundHasKv) kvRounds++;
      roundHasKv = false;
      prevRound = round;
    }
    const c = linkOf(src, dst);
    if (rs !== prevRs) sendRun[0] = sendRun[1] = 0;
    prevRs = rs;
    const run = ++sendRun[c]!;
    const rc = 2 * dst + c;
    if (recvCount[rc] === 0) touched.push(rc);
    const b = ++recvCount[rc]!;
    congestion = Math.max(congestion, run, b);
    if (isKv[i]) {
      kvSend[src]!++;
      kvRecv[dst]!++;
      roundHasKv = true;
    }
  }
  if (roundHasKv) kvRounds++;
  let kvDelta = 0;
  for (let r = 0; r < W; r++) kvDelta = Math.max(kvDelta, kvSend[r]!, kvRecv[r]!);
  return { messages: n, congestion, kvDelta, kvRounds, unique: uniq };
}
